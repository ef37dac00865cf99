"""Self-managed Karpenter's IAM, ported statement for statement from its reference CloudFormation
template: aws/karpenter-provider-aws@v1.14.1:website/content/en/docs/getting-started/
getting-started-with-karpenter/cloudformation.yaml (NodeLifecyclePolicy, IAMIntegrationPolicy,
EKSIntegrationPolicy, InterruptionPolicy, ZonalShiftPolicy, ResourceDiscoveryPolicy; KarpenterNodeRole).

Every write is scoped the way upstream scopes it: Karpenter may launch, tag and terminate only what
carries this cluster's `kubernetes.io/cluster/<name>: owned` and a `karpenter.sh/nodepool` tag, and
may tag an existing instance only with the keys it sets after launch.
"""

from __future__ import annotations

from typing import Any

from . import iam

# KarpenterNodeRole's managed policies (ECR pull-only, as upstream, not the broader read-only).
NODE_ROLE_POLICIES = (
    "AmazonEKS_CNI_Policy",
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)


def controller_policy(
    *, cluster_name: str, region: str, partition: str, account_id: str, queue_arn: str, node_role_arn: str
) -> str:
    """The controller's permissions, as one document (upstream splits it into six managed policies)."""
    ec2 = f"arn:{partition}:ec2:{region}"
    profile = f"arn:{partition}:iam::{account_id}:instance-profile/*"
    cluster_arn = f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}"
    owned = f"kubernetes.io/cluster/{cluster_name}"
    launched = [
        f"{ec2}:*:{kind}/*"
        for kind in ("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")
    ]
    request_owned: dict[str, Any] = {
        f"aws:RequestTag/{owned}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
    }
    nodepool_request = {"aws:RequestTag/karpenter.sh/nodepool": "*"}
    resource_owned = {f"aws:ResourceTag/{owned}": "owned"}
    nodepool_resource = {"aws:ResourceTag/karpenter.sh/nodepool": "*"}
    profile_owned = {**resource_owned, "aws:ResourceTag/topology.kubernetes.io/region": region}
    profile_request = {**request_owned, "aws:RequestTag/topology.kubernetes.io/region": region}
    nodeclass_request = {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}
    nodeclass_resource = {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"}
    return iam.document(
        # NodeLifecyclePolicy
        {
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Resource": [
                f"{ec2}::image/*",
                f"{ec2}::snapshot/*",
                f"{ec2}:*:security-group/*",
                f"{ec2}:*:subnet/*",
                f"{ec2}:*:capacity-reservation/*",
                f"{ec2}:*:placement-group/*",
            ],
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Resource": f"{ec2}:*:launch-template/*",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Condition": {"StringEquals": resource_owned, "StringLike": nodepool_resource},
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Resource": launched,
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Condition": {"StringEquals": request_owned, "StringLike": nodepool_request},
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Resource": launched,
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": {
                    **request_owned,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": nodepool_request,
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Resource": f"{ec2}:*:instance/*",
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": resource_owned,
                "StringLike": nodepool_resource,
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster_name},
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                },
            },
        },
        {
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Condition": {"StringEquals": resource_owned, "StringLike": nodepool_resource},
        },
        # IAMIntegrationPolicy
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Resource": node_role_arn,
            "Action": "iam:PassRole",
            "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}},
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Resource": profile,
            "Action": ["iam:CreateInstanceProfile"],
            "Condition": {"StringEquals": profile_request, "StringLike": nodeclass_request},
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Resource": profile,
            "Action": ["iam:TagInstanceProfile"],
            "Condition": {
                "StringEquals": {**profile_owned, **profile_request},
                "StringLike": {**nodeclass_resource, **nodeclass_request},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileActions",
            "Effect": "Allow",
            "Resource": profile,
            "Action": [
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            "Condition": {"StringEquals": profile_owned, "StringLike": nodeclass_resource},
        },
        # EKSIntegrationPolicy
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Resource": cluster_arn,
            "Action": "eks:DescribeCluster",
        },
        # InterruptionPolicy
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Resource": queue_arn,
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
        },
        # ZonalShiftPolicy
        {
            "Sid": "AllowZonalShiftStatusReadOnly",
            "Effect": "Allow",
            "Resource": "*",
            "Action": ["arc-zonal-shift:GetManagedResource"],
            "Condition": {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": cluster_arn}},
        },
        # ResourceDiscoveryPolicy
        {
            "Sid": "AllowRegionalReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": [
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
        },
        {
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
            "Action": "ssm:GetParameter",
        },
        {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Resource": "*", "Action": "pricing:GetProducts"},
        {
            "Sid": "AllowUnscopedInstanceProfileListAction",
            "Effect": "Allow",
            "Resource": "*",
            "Action": "iam:ListInstanceProfiles",
        },
        {
            "Sid": "AllowInstanceProfileReadActions",
            "Effect": "Allow",
            "Resource": profile,
            "Action": "iam:GetInstanceProfile",
        },
    )
