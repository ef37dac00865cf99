"""IAM for components: policy documents (pure functions returning JSON) and the role a
workload assumes through EKS Pod Identity."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws


def pod_identity_trust_document(cluster_arn: str, account_id: str, namespace: str, service_account: str) -> str:
    """Trust policy for a role assumed through EKS Pod Identity, for one service account of one
    cluster only. EKS Pod Identity tags every session with `eks-cluster-arn`,
    `kubernetes-namespace` and `kubernetes-service-account` (EKS user guide, "Create IAM role with
    trust policy required by EKS Pod Identity", Setting Conditions; "Enable or disable session
    tags"), so an association of another cluster or service account, made by anyone who may
    pass the role, cannot assume it; `aws:SourceAccount` keeps out another account's EKS."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "AllowEksAuthToAssumeRoleForPodIdentity",
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                    "Condition": {
                        "StringEquals": {
                            "aws:SourceAccount": account_id,
                            "aws:RequestTag/eks-cluster-arn": cluster_arn,
                            "aws:RequestTag/kubernetes-namespace": namespace,
                            "aws:RequestTag/kubernetes-service-account": service_account,
                        }
                    },
                }
            ],
        }
    )


def pod_identity_trust(
    *, cluster_name: pulumi.Input[str], namespace: pulumi.Input[str], service_account: str
) -> pulumi.Output[str]:
    """`pod_identity_trust_document` for the cluster of this account and region."""
    account = aws.get_caller_identity_output().account_id
    region = aws.get_region_output().region
    partition = aws.get_partition_output().partition

    def document_for(args: list[str]) -> str:
        name, ns, account_id, region_name, partition_name = args
        arn = f"arn:{partition_name}:eks:{region_name}:{account_id}:cluster/{name}"
        return pod_identity_trust_document(arn, account_id, ns, service_account)

    return pulumi.Output.all(cluster_name, namespace, account, region, partition).apply(document_for)


def service_trust(service: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
        }
    )


def flow_logs_trust_document(partition: str, region: str, account_id: str) -> str:
    """VPC Flow Logs may assume the role only for flow logs of this account and region (confused
    deputy: Amazon VPC user guide, "IAM role for publishing flow logs to CloudWatch Logs", trust
    policy with aws:SourceAccount and aws:SourceArn)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "vpc-flow-logs.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                    "Condition": {
                        "StringEquals": {"aws:SourceAccount": account_id},
                        "ArnLike": {"aws:SourceArn": f"arn:{partition}:ec2:{region}:{account_id}:vpc-flow-log/*"},
                    },
                }
            ],
        }
    )


def flow_logs_trust() -> pulumi.Output[str]:
    """`flow_logs_trust_document` for this account and region."""
    return pulumi.Output.all(
        aws.get_partition_output().partition,
        aws.get_region_output().region,
        aws.get_caller_identity_output().account_id,
    ).apply(lambda a: flow_logs_trust_document(a[0], a[1], a[2]))


def document(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def pod_identity_role(
    name: str,
    *,
    cluster_name: pulumi.Input[str],
    namespace: pulumi.Input[str],
    service_account: str,
    tags: dict[str, str],
    parent: pulumi.Resource,
    description: str | None = None,
    association_name: str | None = None,
    association_under_role: bool = False,
) -> tuple[aws.iam.Role, aws.eks.PodIdentityAssociation]:
    """A role with no permissions yet, and the Pod Identity association that lets one service
    account assume it. The association is named `association_name` (default: `name`) and is a
    child of `parent`, or of the role with `association_under_role`."""
    opts = pulumi.ResourceOptions(parent=parent)
    trust = pod_identity_trust(cluster_name=cluster_name, namespace=namespace, service_account=service_account)
    role = aws.iam.Role(name, assume_role_policy=trust, description=description, tags=tags, opts=opts)
    association = aws.eks.PodIdentityAssociation(
        association_name or name,
        cluster_name=cluster_name,
        namespace=namespace,
        service_account=service_account,
        role_arn=role.arn,
        tags=tags,
        opts=pulumi.ResourceOptions(parent=role) if association_under_role else opts,
    )
    return role, association


# What pulumi_eks attaches to the cluster role it creates (nodejs/eks/cluster/cluster.ts, createCore):
# the cluster policy, and with Auto Mode its four managed policies.
CLUSTER_POLICIES = ("AmazonEKSClusterPolicy",)
AUTO_MODE_POLICIES = (
    "AmazonEKSComputePolicy",
    "AmazonEKSBlockStoragePolicy",
    "AmazonEKSLoadBalancingPolicy",
    "AmazonEKSNetworkingPolicy",
)


def auto_mode_custom_tags_policy() -> str:
    """Lets EKS Auto Mode put user-defined tags (the NodeClass `spec.tags`) on what it creates,
    and change them later, only for this cluster: every statement requires the request (or the
    existing resource) to carry the `eks:eks-cluster-name` tag of the cluster's own session.
    The managed Auto Mode policies do not permit user tags, and NodeClaims then fail; EKS user
    guide, "Amazon EKS Auto Mode cluster IAM role", section "Custom AWS tags for EKS Auto resources"."""
    own_cluster = {"aws:RequestTag/eks:eks-cluster-name": "${aws:PrincipalTag/eks:eks-cluster-name}"}
    tagged_cluster = {"aws:ResourceTag/eks:eks-cluster-name": "${aws:PrincipalTag/eks:eks-cluster-name}"}
    return document(
        {
            "Sid": "Compute",
            "Effect": "Allow",
            "Action": ["ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate"],
            "Resource": "*",
            "Condition": {
                "StringEquals": own_cluster,
                "StringLike": {
                    "aws:RequestTag/eks:kubernetes-node-class-name": "*",
                    "aws:RequestTag/eks:kubernetes-node-pool-name": "*",
                },
            },
        },
        {
            "Sid": "Storage",
            "Effect": "Allow",
            "Action": ["ec2:CreateVolume", "ec2:CreateSnapshot"],
            "Resource": ["arn:aws:ec2:*:*:volume/*", "arn:aws:ec2:*:*:snapshot/*"],
            "Condition": {"StringEquals": own_cluster},
        },
        {
            "Sid": "Networking",
            "Effect": "Allow",
            "Action": "ec2:CreateNetworkInterface",
            "Resource": "*",
            "Condition": {
                "StringEquals": own_cluster,
                "StringLike": {"aws:RequestTag/eks:kubernetes-cni-node-name": "*"},
            },
        },
        {
            "Sid": "LoadBalancer",
            "Effect": "Allow",
            "Action": [
                "elasticloadbalancing:CreateLoadBalancer",
                "elasticloadbalancing:CreateTargetGroup",
                "elasticloadbalancing:CreateListener",
                "elasticloadbalancing:CreateRule",
                "ec2:CreateSecurityGroup",
            ],
            "Resource": "*",
            "Condition": {"StringEquals": own_cluster},
        },
        {
            "Sid": "ShieldProtection",
            "Effect": "Allow",
            "Action": "shield:CreateProtection",
            "Resource": "*",
            "Condition": {"StringEquals": own_cluster},
        },
        {
            "Sid": "ShieldTagResource",
            "Effect": "Allow",
            "Action": "shield:TagResource",
            "Resource": "arn:aws:shield::*:protection/*",
            "Condition": {"StringEquals": own_cluster},
        },
        {
            # Changing or removing a tag later (a settings change) needs these on existing resources.
            "Sid": "RetagOwnResources",
            "Effect": "Allow",
            "Action": [
                "ec2:CreateTags",
                "ec2:DeleteTags",
                "elasticloadbalancing:AddTags",
                "elasticloadbalancing:RemoveTags",
            ],
            "Resource": "*",
            "Condition": {"StringEquals": tagged_cluster},
        },
    )


# A key's administration stays with the account's IAM, without its use: the KMS Developer Guide's
# key-administrator actions ("Default key policy", "Allows key administrators to administer the KMS
# key"), so the key never becomes unmanageable and PutKeyPolicy's lockout safety check passes, but no
# kms:Decrypt/Encrypt/GenerateDataKey for the account root (an identity policy granting kms:Decrypt
# on "*" then decrypts nothing under the key). `kms:Create*` includes CreateGrant and `kms:Describe*`
# DescribeKey, which the principal calling eks:CreateCluster needs on a secrets key (EKS User Guide,
# "Encrypt Kubernetes secrets with KMS on existing clusters", note on scoped-down key policies).
KEY_ADMINISTRATION_ACTIONS = [
    "kms:Create*",
    "kms:Describe*",
    "kms:Enable*",
    "kms:List*",
    "kms:Put*",
    "kms:Update*",
    "kms:Revoke*",
    "kms:Disable*",
    "kms:Get*",
    "kms:Delete*",
    "kms:TagResource",
    "kms:UntagResource",
    "kms:ScheduleKeyDeletion",
    "kms:CancelKeyDeletion",
    "kms:RotateKeyOnDemand",
]


def administer_key_through_account_iam(partition: str, account_id: str) -> dict[str, Any]:
    """The key-policy statement that leaves a key's administration, not its use, to the account's IAM."""
    return {
        "Sid": "AdministerThroughAccountIam",
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
        "Action": KEY_ADMINISTRATION_ACTIONS,
        "Resource": "*",
    }
