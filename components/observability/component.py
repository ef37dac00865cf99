"""Observability component: installs kube-prometheus-stack and the DCGM exporter from their
charts, then applies the objects of `objects.py`, the rules of `rules.py` and the dashboards
of `dashboards.py`; optionally remote write to Amazon Managed Service for Prometheus."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pulumi_random as random
import yaml

from contract import names
from contract.manifests.monitored import MonitoredModel
from contract.settings.gpu_capacity import NodePoolSettings
from contract.settings.observability import ObservabilitySettings

from .. import iam
from ..helm import helm_release
from ..naming import type_token
from .dashboards import dashboards
from .objects import (
    ALERTMANAGER_CONFIG_SECRET,
    DCGM_CHART,
    DCGM_REPOSITORY,
    DCGM_VERSION,
    GRAFANA_ADMIN_SECRET,
    PROMETHEUS_SERVICE_ACCOUNT,
    STACK_CHART,
    STACK_REPOSITORY,
    STACK_VERSION,
    STORAGE_CLASS,
    alertmanager_config,
    dashboard_config_map,
    dcgm_service_monitor,
    dcgm_values,
    pod_monitor,
    prometheus_rule,
    prometheus_url,
    stack_values,
)
from .rules import rule_groups


@dataclass(frozen=True)
class ObservabilityArgs:
    settings: ObservabilitySettings
    # The served models with their merged autoscaling policies (monitors, rules, dashboards).
    models: Sequence[MonitoredModel]
    # The GPU NodePools whose limits the capacity dashboard draws.
    gpu_pools: Sequence[NodePoolSettings]
    # Auto Mode ships its own EBS CSI driver (the storage class's provisioner).
    auto_mode: bool
    # The AWS region of the remote-write endpoint (SigV4).
    region: str
    cluster_name: pulumi.Input[str]
    provider: k8s.Provider
    tags: dict[str, str]
    # The predictors' namespace: PodMonitors live there.
    serving_namespace: k8s.core.v1.Namespace


class Observability(pulumi.ComponentResource):
    namespace: str
    prometheus_url: str
    grafana_admin_password: pulumi.Output[str]
    remote_write_url: pulumi.Output[str] | None

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("observability", "Observability"), name, None, opts)
        obs = args.settings
        self.namespace = obs.namespace
        self.prometheus_url = prometheus_url(obs.namespace)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)

        def apply(logical: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
            return k8s.apiextensions.CustomResource(
                f"{name}-{logical}",
                api_version=obj["apiVersion"],
                kind=obj["kind"],
                metadata=obj["metadata"],
                spec=obj["spec"],
                opts=opts,
            )

        namespace = k8s.core.v1.Namespace(
            f"{name}-ns", metadata={"name": obs.namespace, "labels": names.PART_OF}, opts=k8s_opts
        )
        # The host-level exporters' own namespace (privileged; NamespaceIsolation labels and isolates it).
        exporters_namespace = k8s.core.v1.Namespace(
            f"{name}-exporters-ns",
            metadata={"name": obs.exporters_namespace, "labels": names.PART_OF},
            opts=k8s_opts,
        )
        in_namespace = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace])
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-gp3",
            metadata={"name": STORAGE_CLASS, "labels": names.PART_OF},
            # Auto Mode ships its own EBS CSI driver; otherwise the upstream add-on's provisioner.
            provisioner="ebs.csi.eks.amazonaws.com" if args.auto_mode else "ebs.csi.aws.com",
            parameters={"type": "gp3", "encrypted": "true"},
            volume_binding_mode="WaitForFirstConsumer",
            allow_volume_expansion=True,
            reclaim_policy="Retain",
            opts=k8s_opts,
        )
        password = random.RandomPassword(
            f"{name}-grafana-password", length=32, special=False, opts=pulumi.ResourceOptions(parent=self)
        )
        self.grafana_admin_password = pulumi.Output.secret(password.result)
        grafana_secret = k8s.core.v1.Secret(
            f"{name}-grafana-admin",
            metadata={"name": GRAFANA_ADMIN_SECRET, "namespace": obs.namespace, "labels": names.PART_OF},
            string_data={"admin-user": "admin", "admin-password": self.grafana_admin_password},
            opts=in_namespace,
        )
        alertmanager_secret = k8s.core.v1.Secret(
            f"{name}-alertmanager",
            metadata={"name": ALERTMANAGER_CONFIG_SECRET, "namespace": obs.namespace, "labels": names.PART_OF},
            # Webhook URLs are credentials: the rendered config stays a Pulumi secret.
            string_data={
                "alertmanager.yaml": pulumi.Output.secret(
                    yaml.safe_dump(alertmanager_config(obs.alertmanager.receivers), sort_keys=False)
                )
            },
            opts=in_namespace,
        )

        remote_write, self.remote_write_url, writer = None, None, []
        if obs.managed_prometheus.enabled:
            self.remote_write_url, writer = self._managed_prometheus(name, args)
            remote_write = [{"url": self.remote_write_url, "sigv4": {"region": args.region}}]

        stack = helm_release(
            f"{name}-stack",
            STACK_CHART,
            STACK_VERSION,
            obs.namespace,
            pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                depends_on=[
                    namespace,
                    exporters_namespace,
                    storage_class,
                    grafana_secret,
                    alertmanager_secret,
                    *writer,
                ],
            ),
            repository=STACK_REPOSITORY,
            values=args.serving_namespace.metadata.name.apply(
                lambda serving: stack_values(obs, remote_write, monitored_namespaces=[serving])
            ),
        )
        helm_release(
            f"{name}-dcgm",
            DCGM_CHART,
            DCGM_VERSION,
            obs.exporters_namespace,
            pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[exporters_namespace]),
            repository=DCGM_REPOSITORY,
            values=dcgm_values(),
        )

        # Custom resources need the operator's CRDs, which the stack release installs.
        after_stack = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[stack])
        apply("dcgm-monitor", dcgm_service_monitor(obs), after_stack)
        predictors_opts = pulumi.ResourceOptions(
            parent=self, provider=args.provider, depends_on=[stack, args.serving_namespace]
        )
        for m in args.models:
            apply(m.name, pod_monitor(m, obs), predictors_opts)
        apply("rules", prometheus_rule(rule_groups(args.models, obs), obs), after_stack)
        for key, dashboard in dashboards(args.models, obs, args.gpu_pools).items():
            config_map = dashboard_config_map(key, dashboard, obs)
            k8s.core.v1.ConfigMap(
                f"{name}-dashboard-{key}", metadata=config_map["metadata"], data=config_map["data"], opts=in_namespace
            )
        self.register_outputs(
            {"prometheusUrl": self.prometheus_url, "grafanaAdminPassword": self.grafana_admin_password}
        )

    def _managed_prometheus(
        self, name: str, args: ObservabilityArgs
    ) -> tuple[pulumi.Output[str], list[pulumi.Resource]]:
        """An AMP workspace and the right for the Prometheus service account to write to it."""
        workspace = aws.amp.Workspace(
            f"{name}-amp", alias=name, tags=args.tags, opts=pulumi.ResourceOptions(parent=self)
        )
        role, association = iam.pod_identity_role(
            f"{name}-amp-writer",
            cluster_name=args.cluster_name,
            namespace=args.settings.namespace,
            service_account=PROMETHEUS_SERVICE_ACCOUNT,
            tags=args.tags,
            parent=self,
            description="Prometheus remote write to Amazon Managed Service for Prometheus",
        )
        # Remote write to this workspace only (the managed AmazonPrometheusRemoteWriteAccess allows
        # aps:RemoteWrite on every workspace of the account).
        aws.iam.RolePolicy(
            f"{name}-amp-writer",
            role=role.id,
            policy=workspace.arn.apply(
                lambda arn: iam.document({"Effect": "Allow", "Action": "aps:RemoteWrite", "Resource": arn})
            ),
            opts=pulumi.ResourceOptions(parent=role),
        )
        url = workspace.prometheus_endpoint.apply(lambda endpoint: f"{endpoint.rstrip('/')}/api/v1/remote_write")
        return url, [association]
