"""IAM for components: policy documents (pure functions returning JSON) and the role a
workload assumes through EKS Pod Identity."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws


def pod_identity_trust() -> str:
    """Trust policy for a role assumed through EKS Pod Identity (no OIDC provider needed)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                }
            ],
        }
    )


def service_trust(service: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
        }
    )


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
    role = aws.iam.Role(name, assume_role_policy=pod_identity_trust(), description=description, tags=tags, opts=opts)
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
