"""GpuCapacity: the GPU node class and the spot-first / on-demand-fallback NodePools.

Two provisioners share one NodePool shape (`karpenter.sh/v1`):
- `auto-mode`: EKS Auto Mode's managed Karpenter; an `eks.amazonaws.com/v1` NodeClass.
- `karpenter`: self-managed Karpenter from its chart, with its IAM, interruption queue
  and an `EC2NodeClass`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from contract.gpu import GPU_RESOURCE, GPU_TAINT, INSTANCE_LABEL_PREFIX, POOL_LABEL
from contract.names import PART_OF
from contract.settings.gpu_capacity import GeneralPurposePoolSettings, GpuCapacitySettings, NodePoolSettings

from . import iam
from .helm import helm_release
from .isolation import NODE_CLASS_NETWORK_POLICY
from .karpenter_policy import NODE_ROLE_POLICIES, controller_policy
from .naming import type_token

KARPENTER_CHART = "oci://public.ecr.aws/karpenter/karpenter"
KARPENTER_VERSION = "1.14.1"
KARPENTER_NAMESPACE = "kube-system"
KARPENTER_SERVICE_ACCOUNT = "karpenter"

NODE_CLASS_NAME = "gpu"
GENERAL_NODE_CLASS_NAME = "general"
GENERAL_POOL_NAME = "general-purpose"
# Platform pods need image layers and logs, not model weights.
GENERAL_VOLUME_GIB = 50

# The AL2023 NVIDIA AMIs do not include the NVIDIA device plugin (EKS user guide, "Install
# Kubernetes device plugin for GPUs"): without it no node advertises nvidia.com/gpu.
DEVICE_PLUGIN_CHART = "nvidia-device-plugin"
DEVICE_PLUGIN_REPOSITORY = "https://nvidia.github.io/k8s-device-plugin"
DEVICE_PLUGIN_VERSION = "0.20.0"
DEVICE_PLUGIN_NAMESPACE = "kube-system"

# Where each provisioner puts its well-known instance labels and node class kind.
_FLAVOURS = {
    "auto-mode": {
        "label_prefix": INSTANCE_LABEL_PREFIX["auto-mode"],
        "group": "eks.amazonaws.com",
        "kind": "NodeClass",
    },
    "karpenter": {
        "label_prefix": INSTANCE_LABEL_PREFIX["karpenter"],
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
    },
}


def node_pool_spec(pool: NodePoolSettings, provisioner: str) -> dict[str, Any]:
    """The `spec` of one `karpenter.sh/v1` NodePool (pure, so tests and policies can read it)."""
    flavour = _FLAVOURS[provisioner]
    prefix = flavour["label_prefix"]
    budgets = [b.model_dump(by_alias=True, exclude_none=True) for b in pool.disruption_budgets]
    return {
        "weight": pool.weight,
        "template": {
            "metadata": {"labels": {POOL_LABEL: pool.name}},
            "spec": {
                "nodeClassRef": {"group": flavour["group"], "kind": flavour["kind"], "name": NODE_CLASS_NAME},
                "taints": [GPU_TAINT],
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [pool.capacity_type]},
                    {"key": f"{prefix}/instance-family", "operator": "In", "values": list(pool.instance_families)},
                    {"key": f"{prefix}/instance-gpu-manufacturer", "operator": "In", "values": ["nvidia"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                ],
                "expireAfter": pool.expire_after,
            },
        },
        # The GPU budget: Karpenter launches no node that would push the pool past it.
        "limits": {GPU_RESOURCE: str(pool.gpu_limit)},
        "disruption": {
            "consolidationPolicy": pool.consolidation_policy,
            "consolidateAfter": pool.consolidate_after,
            "budgets": budgets,
        },
    }


def general_purpose_pool_spec(pool: GeneralPurposePoolSettings) -> dict[str, Any]:
    """The untainted on-demand NodePool for platform pods, shaped like Auto Mode's built-in
    `general-purpose` pool (EKS user guide, "Enable or Disable Built-in NodePools": on-demand only,
    the C, M and R families, generation 5 or newer, amd64)."""
    prefix = INSTANCE_LABEL_PREFIX["karpenter"]
    return {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": GENERAL_NODE_CLASS_NAME},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": f"{prefix}/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                    {"key": f"{prefix}/instance-generation", "operator": "Gt", "values": ["4"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                ],
                "expireAfter": "336h",
            }
        },
        "limits": {"cpu": str(pool.cpu_limit)},
        "disruption": {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": pool.consolidate_after,
            "budgets": [{"nodes": "10%"}],
        },
    }


def device_plugin_values() -> dict[str, Any]:
    """The NVIDIA device plugin on the GPU nodes only. The chart's default affinity wants labels from
    Node Feature Discovery, which is not installed (its `nfd` dependency is off unless gfd is on):
    select the label every GPU NodePool puts on its nodes instead, and tolerate the GPU taint
    (NVIDIA/k8s-device-plugin@v0.20.0:deployments/helm/nvidia-device-plugin/values.yaml)."""
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": POOL_LABEL, "operator": "Exists"}]}]
                }
            }
        },
        "tolerations": [{"key": GPU_TAINT["key"], "operator": "Exists", "effect": GPU_TAINT["effect"]}],
    }


# SOCI parallel pull/unpack on the GPU nodes (aws-samples/karpenter-blueprints@529b88c
# blueprints/soci-snapshotter/soci-snapshotter.yaml, the `soci-snapshotter` and `soci-snapshotter-br`
# EC2NodeClasses). AL2023: nodeadm's FastImagePull feature gate in a NodeConfig, which Karpenter
# merges with the NodeConfig it generates (the blueprint's README, "Amazon Linux 2023").
SOCI_AL2023_USER_DATA = """\
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  featureGates:
    FastImagePull: true
"""
# Bottlerocket: its settings API (the blueprint's values: 20 concurrent downloads in 16 MB chunks,
# which ECR serves as HTTP range requests, 12 concurrent unpacks, blobs discarded once unpacked).
SOCI_BOTTLEROCKET_USER_DATA = """\
[settings.container-runtime]
snapshotter = "soci"

[settings.container-runtime-plugins.soci-snapshotter]
pull-mode = "parallel-pull-unpack"

[settings.container-runtime-plugins.soci-snapshotter.parallel-pull-unpack]
max-concurrent-downloads-per-image = 20
concurrent-download-chunk-size = "16mb"
max-concurrent-unpacks-per-image = 12
discard-unpacked-layers = true
"""
# Parallel mode buffers layers on disk: the blueprint's "good starting point" for the gp3 volume
# (600 MiB/s at the base 3,000 IOPS) instead of the 250 MiB/s a node gets otherwise.
SOCI_VOLUME_THROUGHPUT_MIBS = 600


def soci_user_data(ami_family: str) -> str:
    """The EC2NodeClass userData that turns SOCI parallel pull on for this AMI family."""
    return SOCI_BOTTLEROCKET_USER_DATA if ami_family == "bottlerocket" else SOCI_AL2023_USER_DATA


@dataclass(frozen=True)
class GpuCapacityArgs:
    settings: GpuCapacitySettings
    cluster_name: pulumi.Input[str]
    node_role_name: pulumi.Input[str]
    node_security_group_id: pulumi.Input[str]
    region: str
    provider: k8s.Provider
    tags: dict[str, str]


def ec2_node_class_spec(
    role: pulumi.Input[str], args: GpuCapacityArgs, volume_gib: int, ami_alias: str
) -> dict[str, Any]:
    """An `EC2NodeClass` spec: pinned AMI alias (Karpenter picks the NVIDIA variant for GPU
    instances), the cluster's subnets and security group, an encrypted gp3 root, IMDSv2 only."""
    return {
        "role": role,
        "amiSelectorTerms": [{"alias": ami_alias}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": args.cluster_name}}],
        "securityGroupSelectorTerms": [{"id": args.node_security_group_id}],
        "blockDeviceMappings": [
            {
                "deviceName": "/dev/xvda",
                "ebs": {
                    "volumeSize": f"{volume_gib}Gi",
                    "volumeType": "gp3",
                    "iops": 3000,
                    "throughput": 250,
                    "encrypted": True,
                    "deleteOnTermination": True,
                },
            }
        ],
        "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1},
        "tags": args.tags,
    }


class GpuCapacity(pulumi.ComponentResource):
    pool_names: list[str]

    def __init__(self, name: str, args: GpuCapacityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("gpu", "GpuCapacity"), name, None, opts)
        s = args.settings
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)

        if s.provisioner == "auto-mode":
            node_class = self._auto_mode_node_class(name, args, k8s_opts)
        else:
            node_class = self._karpenter(name, args, k8s_opts)

        pools_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[node_class])
        for pool in s.pools:
            k8s.apiextensions.CustomResource(
                f"{name}-{pool.name}",
                api_version="karpenter.sh/v1",
                kind="NodePool",
                metadata={"name": pool.name, "labels": PART_OF},
                spec=node_pool_spec(pool, s.provisioner),
                opts=pools_opts,
            )
        self.pool_names = [p.name for p in s.pools]
        self.register_outputs({"poolNames": self.pool_names})

    def _auto_mode_node_class(
        self, name: str, args: GpuCapacityArgs, opts: pulumi.ResourceOptions
    ) -> k8s.apiextensions.CustomResource:
        """Auto Mode's NodeClass has no userData: SOCI parallel pull is Auto Mode's own doing on its
        GPU instances (settings refuse turning it off), nothing here renders it."""
        s = args.settings
        return k8s.apiextensions.CustomResource(
            f"{name}-node-class",
            api_version="eks.amazonaws.com/v1",
            kind="NodeClass",
            metadata={"name": NODE_CLASS_NAME},
            spec={
                # The Auto Mode node role already has its access entry, so GPU nodes can join.
                "role": args.node_role_name,
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": args.cluster_name}}],
                "securityGroupSelectorTerms": [{"id": args.node_security_group_id}],
                # Room for the vLLM image (~10 GiB) and a local copy of model weights.
                "ephemeralStorage": {
                    "size": f"{s.node_class.ephemeral_storage_gib}Gi",
                    "iops": 3000,
                    "throughput": 250,
                },
                # User tags need the cluster role's custom-tags policy (components/cluster.py).
                "tags": args.tags,
                # With the controller switch of components/cluster.py, these nodes enforce NetworkPolicies.
                **NODE_CLASS_NETWORK_POLICY,
            },
            opts=opts,
        )

    def _karpenter(
        self, name: str, args: GpuCapacityArgs, opts: pulumi.ResourceOptions
    ) -> k8s.apiextensions.CustomResource:
        s, tags = args.settings, args.tags
        aws_opts = pulumi.ResourceOptions(parent=self)

        queue = self._interruption_queue(name, tags, aws_opts)
        node_role = aws.iam.Role(
            f"{name}-karpenter-node",
            assume_role_policy=iam.service_trust("ec2.amazonaws.com"),
            tags=tags,
            opts=aws_opts,
        )
        for policy in NODE_ROLE_POLICIES:
            aws.iam.RolePolicyAttachment(
                f"{name}-karpenter-node-{policy}",
                role=node_role.name,
                policy_arn=f"arn:aws:iam::aws:policy/{policy}",
                opts=pulumi.ResourceOptions(parent=node_role),
            )
        # Nodes launched by Karpenter join the cluster through this access entry.
        aws.eks.AccessEntry(
            f"{name}-karpenter-node",
            cluster_name=args.cluster_name,
            principal_arn=node_role.arn,
            type="EC2_LINUX",
            tags=tags,
            opts=aws_opts,
        )
        controller_role, association = iam.pod_identity_role(
            f"{name}-karpenter-controller",
            cluster_name=args.cluster_name,
            namespace=KARPENTER_NAMESPACE,
            service_account=KARPENTER_SERVICE_ACCOUNT,
            tags=tags,
            parent=self,
            association_name=f"{name}-karpenter",
        )
        partition = aws.get_partition_output().partition
        account_id = aws.get_caller_identity_output().account_id
        aws.iam.RolePolicy(
            f"{name}-karpenter-controller",
            role=controller_role.id,
            policy=pulumi.Output.all(queue.arn, node_role.arn, args.cluster_name, partition, account_id).apply(
                lambda a: controller_policy(
                    queue_arn=a[0],
                    node_role_arn=a[1],
                    cluster_name=a[2],
                    partition=a[3],
                    account_id=a[4],
                    region=args.region,
                )
            ),
            opts=pulumi.ResourceOptions(parent=controller_role),
        )
        release = helm_release(
            f"{name}-karpenter",
            KARPENTER_CHART,
            KARPENTER_VERSION,
            KARPENTER_NAMESPACE,
            values={
                "settings": {"clusterName": args.cluster_name, "interruptionQueue": queue.name},
                "serviceAccount": {"name": KARPENTER_SERVICE_ACCOUNT},
                "replicas": 2,
                # Karpenter must not run on the nodes it manages.
                "nodeSelector": {"node-role": "system"},
                "controller": {
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}
                },
            },
            opts=pulumi.ResourceOptions(parent=self, provider=opts.provider, depends_on=[association]),
        )
        after_release = pulumi.ResourceOptions(parent=self, provider=opts.provider, depends_on=[release])
        if s.node_class.needs_device_plugin:
            helm_release(
                f"{name}-nvidia-device-plugin",
                DEVICE_PLUGIN_CHART,
                DEVICE_PLUGIN_VERSION,
                DEVICE_PLUGIN_NAMESPACE,
                repository=DEVICE_PLUGIN_REPOSITORY,
                values=device_plugin_values(),
                opts=pulumi.ResourceOptions(parent=self, provider=opts.provider),
            )
        general = k8s.apiextensions.CustomResource(
            f"{name}-general-node-class",
            api_version="karpenter.k8s.aws/v1",
            kind="EC2NodeClass",
            metadata={"name": GENERAL_NODE_CLASS_NAME, "labels": PART_OF},
            spec=ec2_node_class_spec(node_role.name, args, GENERAL_VOLUME_GIB, s.node_class.ami_alias),
            opts=after_release,
        )
        k8s.apiextensions.CustomResource(
            f"{name}-{GENERAL_POOL_NAME}",
            api_version="karpenter.sh/v1",
            kind="NodePool",
            metadata={"name": GENERAL_POOL_NAME, "labels": PART_OF},
            spec=general_purpose_pool_spec(s.general_purpose),
            opts=pulumi.ResourceOptions(parent=self, provider=opts.provider, depends_on=[general]),
        )
        node_class_spec = ec2_node_class_spec(
            node_role.name, args, s.node_class.ephemeral_storage_gib, s.node_class.ami_alias
        )
        if s.node_class.instance_store_raid0:
            # NVMe instance store as one RAID0 volume: a fast local cache for model weights.
            node_class_spec["instanceStorePolicy"] = "RAID0"
        if s.soci_parallel_pull:
            node_class_spec["userData"] = soci_user_data(s.ami_family)
            node_class_spec["blockDeviceMappings"][0]["ebs"]["throughput"] = SOCI_VOLUME_THROUGHPUT_MIBS
        return k8s.apiextensions.CustomResource(
            f"{name}-node-class",
            api_version="karpenter.k8s.aws/v1",
            kind="EC2NodeClass",
            metadata={"name": NODE_CLASS_NAME},
            spec=node_class_spec,
            opts=after_release,
        )

    def _interruption_queue(self, name: str, tags: dict[str, str], opts: pulumi.ResourceOptions) -> aws.sqs.Queue:
        """Spot interruption warnings reach Karpenter through SQS, so it drains before the node dies."""
        queue = aws.sqs.Queue(
            f"{name}-interruptions", message_retention_seconds=300, sqs_managed_sse_enabled=True, tags=tags, opts=opts
        )
        queue_opts = pulumi.ResourceOptions(parent=queue)
        aws.sqs.QueuePolicy(
            f"{name}-interruptions",
            queue_url=queue.url,
            policy=queue.arn.apply(
                lambda arn: iam.document(
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                        "Action": "sqs:SendMessage",
                        "Resource": arn,
                    },
                    {
                        "Effect": "Deny",
                        "Principal": "*",
                        "Action": "sqs:*",
                        "Resource": arn,
                        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                    },
                )
            ),
            opts=queue_opts,
        )
        events = {
            "health": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
            "spot": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
            "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
            "state": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
            "capacity-reservation": {
                "source": ["aws.ec2"],
                "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
            },
        }
        for key, pattern in events.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{key}", event_pattern=json.dumps(pattern), tags=tags, opts=queue_opts
            )
            aws.cloudwatch.EventTarget(
                f"{name}-{key}", rule=rule.name, arn=queue.arn, opts=pulumi.ResourceOptions(parent=rule)
            )
        return queue
