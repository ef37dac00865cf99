"""Platform: wires every component into one dependency graph, top to bottom."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from .cluster import Cluster, ClusterArgs
from .gpu_capacity import GpuCapacity, GpuCapacityArgs
from .model_store import ModelStore, ModelStoreArgs
from .naming import base_tags, type_token
from .network import Network, NetworkArgs
from .settings import StackSettings


class Platform(pulumi.ComponentResource):
    def __init__(self, name: str, settings: StackSettings, opts: pulumi.ResourceOptions | None = None) -> None:
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
                provider=provider,
                tags=tags,
            ),
            opts=child,
        )
        self.serving_namespace = k8s.core.v1.Namespace(
            f"{name}-serving",
            metadata={"name": settings.serving.namespace, "labels": {"app.kubernetes.io/part-of": "inference-platform"}},
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        self.model_store = ModelStore(
            f"{name}-models",
            ModelStoreArgs(
                settings.model_store,
                models=settings.models,
                cluster_name=self.cluster.name,
                region=settings.network.region,
                namespace=self.serving_namespace.metadata.name,
                mountpoint_role=self.cluster.mountpoint_role,
                provider=provider,
                tags=tags,
            ),
            opts=child,
        )

        self.outputs = {
            "vpcId": self.network.vpc_id,
            "clusterName": self.cluster.name,
            "kubeconfig": self.cluster.kubeconfig,
            "modelBucket": self.model_store.bucket_name,
            "gpuNodePools": self.gpu.pool_names,
        }
        self.register_outputs(self.outputs)
