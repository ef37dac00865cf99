"""The AWS Load Balancer Controller, for clusters without Auto Mode: it provisions the NLB of a
Service with `loadBalancerClass: service.k8s.aws/nlb` (Auto Mode brings its own controller for
`eks.amazonaws.com/nlb`; without one, the Service never gets an address).

Chart `aws-load-balancer-controller` 3.5.0 from https://aws.github.io/eks-charts (app v3.5.0); the
IAM policy is upstream's, verbatim: kubernetes-sigs/aws-load-balancer-controller@v3.5.0:
docs/install/iam_policy.json (docs/deploy/installation.md, "Option B: Recommended, Pod Identity").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from . import iam
from .helm import helm_release

CHART = "aws-load-balancer-controller"
REPOSITORY = "https://aws.github.io/eks-charts"
VERSION = "3.5.0"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "aws-load-balancer-controller"
IAM_POLICY_FILE = Path(__file__).parent / "data" / "aws_load_balancer_controller_iam_policy.json"


def iam_policy() -> str:
    """Upstream's controller policy at the pinned release, unchanged (compact: IAM counts characters)."""
    return json.dumps(json.loads(IAM_POLICY_FILE.read_text()), separators=(",", ":"))


def chart_values(cluster_name: str, vpc_id: str, region: str) -> dict[str, Any]:
    return {
        "clusterName": cluster_name,
        # Pod Identity gives credentials, not the instance metadata the controller would read these from.
        "vpcId": vpc_id,
        "region": region,
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        # The platform names its load balancer class on every Service: no webhook needs to default it,
        # and its failurePolicy Fail would block every LoadBalancer Service while the controller is down.
        "enableServiceMutatorWebhook": False,
        "nodeSelector": {"node-role": "system"},
    }


def load_balancer_controller(
    name: str,
    *,
    cluster_name: pulumi.Input[str],
    vpc_id: pulumi.Input[str],
    region: str,
    provider: k8s.Provider,
    tags: dict[str, str],
    parent: pulumi.Resource,
    after: list[pulumi.Resource],
) -> k8s.helm.v3.Release:
    """Its Pod Identity role with upstream's policy, then the chart (which waits until it is ready,
    so a Service registered after it gets its NLB); `after`: the nodes it runs on."""
    role, association = iam.pod_identity_role(
        f"{name}-lbc",
        cluster_name=cluster_name,
        namespace=NAMESPACE,
        service_account=SERVICE_ACCOUNT,
        tags=tags,
        parent=parent,
        description="AWS Load Balancer Controller (upstream policy)",
    )
    policy = aws.iam.Policy(
        f"{name}-lbc",
        description=f"AWS Load Balancer Controller {VERSION}, upstream docs/install/iam_policy.json",
        policy=iam_policy(),
        tags=tags,
        opts=pulumi.ResourceOptions(parent=role),
    )
    attachment = aws.iam.RolePolicyAttachment(
        f"{name}-lbc", role=role.name, policy_arn=policy.arn, opts=pulumi.ResourceOptions(parent=role)
    )
    return helm_release(
        f"{name}-lbc",
        CHART,
        VERSION,
        NAMESPACE,
        repository=REPOSITORY,
        values=pulumi.Output.all(cluster_name, vpc_id).apply(lambda a: chart_values(a[0], a[1], region)),
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[association, attachment, *after]),
    )
