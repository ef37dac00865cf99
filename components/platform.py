"""Platform: wires every component into one dependency graph, top to bottom."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from contract import names
from contract.gpu import instance_family_label
from contract.manifests.monitored import monitored_models
from contract.settings import StackSettings

from .autoscaling import Autoscaling, AutoscalingArgs
from .autoscaling.component import KEDA_NAMESPACE
from .cluster import Cluster, ClusterArgs
from .deploy_path import refuse_unreachable_first_deploy
from .gateway import Gateway, GatewayArgs
from .gateway.objects import AI_GATEWAY_NAMESPACE, ENVOY_GATEWAY_NAMESPACE, envoy_peer, envoy_pod_selector
from .gateway.store import RATE_LIMIT_POD_LABELS
from .gpu_capacity import GpuCapacity, GpuCapacityArgs
from .headroom import Headroom, HeadroomArgs
from .isolation import namespace_peer, pod_security_labels
from .model_store import ModelStore, ModelStoreArgs
from .model_sync import ModelSync, ModelSyncArgs
from .namespace_isolation import NamespaceIsolation, NamespaceIsolationArgs
from .naming import base_tags, type_token
from .network import Network, NetworkArgs
from .observability import Observability, ObservabilityArgs
from .observability.objects import PROMETHEUS_POD_LABELS
from .serving import ModelReplicas, Serving, ServingArgs
from .serving.objects import CERT_MANAGER_NAMESPACE, PREDICTOR_KEY_SECRET, SERVICE_PORT, serving_pod_security_level


class Platform(pulumi.ComponentResource):
    def __init__(self, name: str, settings: StackSettings, opts: pulumi.ResourceOptions | None = None) -> None:
        refuse_unreachable_first_deploy(settings.cluster, cluster_name=name)
        super().__init__(type_token("platform", "Platform"), name, None, opts)
        tags = base_tags(pulumi.get_stack(), settings.environment)
        child = pulumi.ResourceOptions(parent=self)
        cluster_name = name

        self.network = Network(
            f"{name}-net", NetworkArgs(settings.network, cluster_name=cluster_name, tags=tags), opts=child
        )
        self.cluster = Cluster(
            f"{name}-cluster",
            ClusterArgs(
                settings.cluster,
                cluster_name=cluster_name,
                vpc_id=self.network.vpc_id,
                private_subnet_ids=self.network.private_subnet_ids,
                public_subnet_ids=self.network.public_subnet_ids,
                region=settings.network.region,
                tags=tags,
            ),
            opts=child,
        )
        provider = self.cluster.provider
        self.gpu = GpuCapacity(
            f"{name}-gpu",
            GpuCapacityArgs(
                settings.gpu_capacity,
                cluster_name=self.cluster.name,
                node_role_name=self.cluster.node_role_name,
                node_security_group_id=self.cluster.node_security_group_id,
                region=settings.network.region,
                provider=provider,
                tags=tags,
            ),
            opts=child,
        )
        self.serving_namespace = k8s.core.v1.Namespace(
            f"{name}-serving",
            # Predictors and their init containers meet the restricted Pod Security Standard.
            metadata={
                "name": settings.serving.namespace,
                "labels": {
                    **names.PART_OF,
                    **pod_security_labels(
                        serving_pod_security_level(settings.models), settings.cluster.kubernetes_version
                    ),
                },
            },
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        held = settings.headroom_model()
        if held is not None:  # warm GPU nodes with the serving image, preempted by any predictor
            self.headroom = Headroom(
                f"{name}-headroom",
                HeadroomArgs(
                    settings.gpu_capacity.headroom,
                    model=held,
                    namespace=settings.serving.namespace,
                    instance_family_label=instance_family_label(settings.gpu_capacity.provisioner),
                    provider=provider,
                    depends_on=[self.serving_namespace, self.gpu],
                ),
                opts=child,
            )
        self.model_store = ModelStore(
            f"{name}-models",
            ModelStoreArgs(
                settings.model_store,
                models=settings.models,
                cluster_name=self.cluster.name,
                region=settings.network.region,
                namespace=self.serving_namespace.metadata.name,
                sync_namespace=settings.model_store.sync_namespace,
                mountpoint_role=self.cluster.mountpoint_role,
                provider=provider,
                tags=tags,
            ),
            opts=child,
        )
        # One Job per pinned revision fills the store; predictors wait for its manifest.
        self.model_sync = ModelSync(
            f"{name}-model-sync",
            ModelSyncArgs(
                models=settings.models,
                bucket_name=self.model_store.bucket_name,
                namespace=settings.model_store.sync_namespace,
                region=settings.network.region,
                provider=provider,
                vpc_cidr=settings.network.cidr,
                kubernetes_version=settings.cluster.kubernetes_version,
                hf_token_secret=settings.model_store.hugging_face_token_secret,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.model_store]),
        )
        monitored = monitored_models(settings)
        self.observability = Observability(
            f"{name}-obs",
            ObservabilityArgs(
                settings.observability,
                models=monitored,
                gpu_pools=settings.gpu_capacity.pools,
                auto_mode=settings.cluster.auto_mode,
                region=settings.network.region,
                cluster_name=self.cluster.name,
                provider=provider,
                tags=tags,
                serving_namespace=self.serving_namespace,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.gpu]),
        )
        self.serving = Serving(
            f"{name}-serving",
            ServingArgs(
                settings.serving,
                models=settings.models,
                replicas={m.name: ModelReplicas(m.policy.min_replicas, m.policy.max_replicas) for m in monitored},
                depends_on=[self.serving_namespace, self.model_store, self.model_sync],
                provider=provider,
                # Clients reach models only through the gateway (keys, quotas); Prometheus scrapes
                # the metrics-only port.
                predictor_peers=[envoy_peer(settings.gateway)],
                metrics_peers=[namespace_peer(settings.observability.namespace, PROMETHEUS_POD_LABELS)],
                instance_family_label=instance_family_label(settings.gpu_capacity.provisioner),
                endpoint_picker_callers=[envoy_peer(settings.gateway)],
                # The endpoint picker is on the request path: as available as the proxies that call it.
                endpoint_picker_replicas=2 if settings.gateway.replicas > 1 else 1,
                api_server_cidr=settings.network.cidr,
            ),
            opts=child,
        )
        self.gateway = Gateway(
            f"{name}-gateway",
            GatewayArgs(
                settings.gateway,
                models=settings.models,
                service_hosts=self.serving.service_hosts,
                service_port=SERVICE_PORT,
                backend_api_key=self.serving.backend_api_key,
                auto_mode=settings.cluster.auto_mode,
                vpc_cidr=settings.network.cidr,
                provider=provider,
                depends_on=[self.serving],
                load_balancer_controller=self.cluster.load_balancer_controller,
                inference_pools=self.serving.inference_pools,
                pool_key_secret=PREDICTOR_KEY_SECRET,
                inference_pool_releases=self.serving.inference_pool_releases,
            ),
            opts=child,
        )
        self.autoscaling = Autoscaling(
            f"{name}-autoscaling",
            AutoscalingArgs(
                monitored,
                prometheus_url=self.observability.prometheus_url,
                provider=provider,
                depends_on=[self.serving, self.observability],
            ),
            opts=child,
        )
        # Once every chart has created its namespace: the operators' NetworkPolicies and Pod Security labels.
        self.isolation = NamespaceIsolation(
            f"{name}-isolation",
            NamespaceIsolationArgs(
                kubernetes_version=settings.cluster.kubernetes_version,
                monitoring_namespace=settings.observability.namespace,
                exporters_namespace=settings.observability.exporters_namespace,
                keda_namespace=KEDA_NAMESPACE,
                kserve_namespace=settings.serving.kserve_namespace,
                cert_manager_namespace=CERT_MANAGER_NAMESPACE,
                envoy_gateway_namespace=ENVOY_GATEWAY_NAMESPACE,
                ai_gateway_namespace=AI_GATEWAY_NAMESPACE,
                gateway_namespace=settings.gateway.namespace,
                envoy_pod_labels=envoy_pod_selector(settings.gateway),
                rate_limit_pod_labels=RATE_LIMIT_POD_LABELS,
                prometheus_pod_labels=PROMETHEUS_POD_LABELS,
                provider=provider,
                depends_on=[self.observability, self.serving, self.gateway, self.autoscaling],
            ),
            opts=child,
        )

        self.outputs = {
            "vpcId": self.network.vpc_id,
            # Where the deploy runner goes (cluster.deployerCidrs admits them to the private API).
            "privateSubnetIds": self.network.private_subnet_ids,
            "clusterName": self.cluster.name,
            "kubeconfig": self.cluster.kubeconfig,
            "modelBucket": self.model_store.bucket_name,
            "gpuNodePools": self.gpu.pool_names,
            "prometheusUrl": self.observability.prometheus_url,
            "grafanaAdminPassword": self.observability.grafana_admin_password,
            "gatewayHostname": self.gateway.hostname,
            "endpointUrl": self.gateway.endpoint_url,
            "apiKeys": self.gateway.api_keys,
        }
        self.register_outputs(self.outputs)
