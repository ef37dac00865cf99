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
from contract.settings.gpu_capacity import GpuCapacitySettings, NodePoolSettings

from . import iam
from .helm import helm_release
from .isolation import NODE_CLASS_NETWORK_POLICY
from .naming import type_token

KARPENTER_CHART = "oci://public.ecr.aws/karpenter/karpenter"
KARPENTER_VERSION = "1.14.1"
KARPENTER_NAMESPACE = "kube-system"
KARPENTER_SERVICE_ACCOUNT = "karpenter"

NODE_CLASS_NAME = "gpu"

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


@dataclass(frozen=True)
class GpuCapacityArgs:
    settings: GpuCapacitySettings
    cluster_name: pulumi.Input[str]
    node_role_name: pulumi.Input[str]
    node_security_group_id: pulumi.Input[str]
    provider: k8s.Provider
    tags: dict[str, str]


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
        for policy in (
            "AmazonEKSWorkerNodePolicy",
            "AmazonEKS_CNI_Policy",
            "AmazonEC2ContainerRegistryReadOnly",
            "AmazonSSMManagedInstanceCore",
        ):
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
        aws.iam.RolePolicy(
            f"{name}-karpenter-controller",
            role=controller_role.id,
            policy=pulumi.Output.all(queue.arn, node_role.arn, args.cluster_name).apply(
                lambda a: _controller_policy(queue_arn=a[0], node_role_arn=a[1], cluster_name=a[2])
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
        node_class_spec: dict[str, Any] = {
            "role": node_role.name,
            # The alias picks the NVIDIA variant of the AMI for GPU instances; pinned, never @latest.
            "amiSelectorTerms": [{"alias": s.node_class.ami_alias}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": args.cluster_name}}],
            "securityGroupSelectorTerms": [{"id": args.node_security_group_id}],
            "blockDeviceMappings": [
                {
                    "deviceName": "/dev/xvda",
                    "ebs": {
                        "volumeSize": f"{s.node_class.ephemeral_storage_gib}Gi",
                        "volumeType": "gp3",
                        "iops": 3000,
                        "throughput": 250,
                        "encrypted": True,
                        "deleteOnTermination": True,
                    },
                }
            ],
            "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1},
            "tags": tags,
        }
        if s.node_class.instance_store_raid0:
            # NVMe instance store as one RAID0 volume: a fast local cache for model weights.
            node_class_spec["instanceStorePolicy"] = "RAID0"
        return k8s.apiextensions.CustomResource(
            f"{name}-node-class",
            api_version="karpenter.k8s.aws/v1",
            kind="EC2NodeClass",
            metadata={"name": NODE_CLASS_NAME},
            spec=node_class_spec,
            opts=pulumi.ResourceOptions(parent=self, provider=opts.provider, depends_on=[release]),
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
        }
        for key, pattern in events.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{key}", event_pattern=json.dumps(pattern), tags=tags, opts=queue_opts
            )
            aws.cloudwatch.EventTarget(
                f"{name}-{key}", rule=rule.name, arn=queue.arn, opts=pulumi.ResourceOptions(parent=rule)
            )
        return queue


def _controller_policy(queue_arn: str, node_role_arn: str, cluster_name: str) -> str:
    """Karpenter controller permissions, following its reference CloudFormation policy."""
    owned = {"StringEquals": {f"aws:ResourceTag/kubernetes.io/cluster/{cluster_name}": "owned"}}
    return iam.document(
        {
            "Sid": "Provision",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:CreateTags"],
            "Resource": "*",
        },
        {
            "Sid": "TerminateOwned",
            "Effect": "Allow",
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Resource": "*",
            "Condition": owned,
        },
        {
            "Sid": "Discover",
            "Effect": "Allow",
            "Action": [
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
                "pricing:GetProducts",
                "ssm:GetParameter",
                "eks:DescribeCluster",
            ],
            "Resource": "*",
        },
        {
            "Sid": "Interruptions",
            "Effect": "Allow",
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            "Resource": queue_arn,
        },
        {"Sid": "PassNodeRole", "Effect": "Allow", "Action": "iam:PassRole", "Resource": node_role_arn},
        {
            "Sid": "InstanceProfiles",
            "Effect": "Allow",
            "Action": [
                "iam:CreateInstanceProfile",
                "iam:TagInstanceProfile",
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
                "iam:GetInstanceProfile",
                "iam:ListInstanceProfiles",
            ],
            "Resource": "*",
        },
    )
