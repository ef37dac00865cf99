"""The EKS control plane: audit trail, encrypted Secrets, no open API endpoint."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any

from . import k8s
from .base import Subject, resource_policy
from .platform import REQUIRED_LOGS

# The raw EKS cluster (what the engine sees in every real preview) and the pulumi_eks component.
AWS_EKS_CLUSTER = "aws:eks/cluster:Cluster"
EKS_COMPONENT = "eks:index:Cluster"


def _settings(subject: Subject) -> tuple[list[str], bool, bool, list[str]] | None:
    """(log types, secrets encrypted, public endpoint, public CIDRs) of either cluster shape."""
    props = subject.props
    if subject.resource_type == AWS_EKS_CLUSTER:
        logs = [str(v) for v in k8s.items(props, "enabledClusterLogTypes")]
        configs = k8s.get(props, "encryptionConfig")
        encrypted = any(
            "secrets" in [str(r) for r in k8s.items(config, "resources")] and k8s.is_set(config, "provider", "keyArn")
            for config in ([configs] if k8s.is_map(configs) else k8s.items(props, "encryptionConfig"))
        )
        # The EKS API opens the public endpoint unless told otherwise.
        public = k8s.get(props, "vpcConfig", "endpointPublicAccess", default=True) is not False
        cidrs = [str(c) for c in k8s.items(props, "vpcConfig", "publicAccessCidrs")]
    elif subject.resource_type == EKS_COMPONENT:
        logs = [str(v) for v in k8s.items(props, "enabledClusterLogTypes")]
        encrypted = k8s.is_set(props, "encryptionConfigKeyArn")
        public = k8s.get(props, "endpointPublicAccess", default=True) is not False
        cidrs = [str(c) for c in k8s.items(props, "publicAccessCidrs")]
    else:
        return None
    return logs, encrypted, public, cidrs


def _open_to_all(cidr: str) -> bool:
    try:
        return ipaddress.ip_network(cidr, strict=False).prefixlen == 0
    except ValueError:
        return False


def _check_control_plane(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    found = _settings(subject)
    if found is None:
        return
    logs, encrypted, public, cidrs = found
    label = f"EKS cluster '{subject.name}'"
    missing = [log for log in REQUIRED_LOGS if log not in logs]
    if missing:
        yield f"{label}: control-plane logging misses {missing}"
    if not encrypted:
        yield f"{label}: Kubernetes Secrets are not envelope-encrypted with a KMS key"
    if public and not cidrs:
        yield f"{label}: the public API endpoint is open without a CIDR allowlist"
    elif public and any(_open_to_all(c) for c in cidrs):
        yield f"{label}: the public API endpoint allowlist contains {[c for c in cidrs if _open_to_all(c)]}"


eks_control_plane = resource_policy(
    name="eks-control-plane-logged-encrypted-private",
    description=(
        f"EKS clusters log {list(REQUIRED_LOGS)}, envelope-encrypt Secrets with KMS, and expose a public API "
        "endpoint only to an explicit CIDR allowlist."
    ),
    remediation=(
        "Keep cluster.controlPlaneLogs and the secrets KMS key of components/cluster.py; leave "
        "cluster.publicAccessCidrs empty (private endpoint) or list your egress ranges. Dev may relax this "
        "policy to advisory in policies/config/dev.json; prod keeps it mandatory."
    ),
    check=_check_control_plane,
)

POLICIES = [eks_control_plane]
