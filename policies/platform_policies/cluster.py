"""The EKS control plane: audit trail, encrypted Secrets, no open API endpoint; and what the
cluster role must allow for the Auto Mode NodeClass."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator, Mapping
from typing import Any

from . import k8s
from .base import Subject, of_kind, resource_policy, stack_policy, subject_of
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

# --- Auto Mode NodeClass tags ----------------------------------------------------------------

AUTO_MODE_NODE_CLASS = ("eks.amazonaws.com", "NodeClass")
ROLE_POLICY_TYPES = {"aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy"}
LAUNCH_ACTIONS = {"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate"}
CLUSTER_TAG_CONDITION = "aws:RequestTag/eks:eks-cluster-name"


def _statements(policy_text: Any) -> list[Mapping[str, Any]]:
    try:
        document = json.loads(policy_text) if isinstance(policy_text, str) else policy_text
    except ValueError:
        return []
    statements = k8s.get(document, "Statement", unknown=[])
    return [s for s in (statements if k8s.is_list(statements) else [statements]) if k8s.is_map(s)]


def permits_custom_tags(policy_text: Any) -> bool:
    """The EKS user guide's custom-tags statement: launching with request tags, for this cluster only."""
    for statement in _statements(policy_text):
        actions = k8s.get(statement, "Action", default=[])
        actions = {actions} if isinstance(actions, str) else set(actions)
        conditions = json.dumps(k8s.get(statement, "Condition", default={}), default=str)
        if k8s.get(statement, "Effect") == "Allow" and actions & LAUNCH_ACTIONS and CLUSTER_TAG_CONDITION in conditions:
            return True
    return False


def _check_node_class_tags(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    tagged = [n for n in of_kind(resources, *AUTO_MODE_NODE_CLASS) if k8s.get(n.props, "spec", "tags", unknown=True)]
    if not tagged:
        return
    subjects = [subject_of(r) for r in resources]
    granted = any(
        permits_custom_tags(k8s.get(s.props, "policy", unknown=None))
        for s in subjects
        if s.resource_type in ROLE_POLICY_TYPES
    )
    # pulumi_eks's own cluster role carries only the managed policies: the program must own it.
    own_role = all(k8s.is_set(s.props, "serviceRole") for s in subjects if s.resource_type == EKS_COMPONENT)
    if granted and own_role:
        return
    for node_class in tagged:
        yield (
            (
                f"{node_class.label}: sets spec.tags, but the cluster role has no policy allowing user tags on what "
                "Auto Mode launches; NodeClaims fail with 'Error getting launch template configs'"
            ),
            node_class.urn,
        )


auto_mode_tags = stack_policy(
    name="auto-mode-node-class-tags-permitted",
    description=(
        "An Auto Mode NodeClass with spec.tags needs the cluster role's custom-tags policy (EKS user guide, "
        "'Amazon EKS Auto Mode cluster IAM role', custom AWS tags)."
    ),
    remediation=(
        "Pass the cluster role to eks.Cluster (service_role) and attach iam.auto_mode_custom_tags_policy() to it, "
        "as components/cluster.py does, or drop the NodeClass tags."
    ),
    check=_check_node_class_tags,
)

# --- who may delete the cluster, and who may authenticate --------------------------------------


def _access(subject: Subject) -> tuple[Any, Any] | None:
    """(deletionProtection, authenticationMode) of either cluster shape; None: not a cluster."""
    props = subject.props
    if subject.resource_type == EKS_COMPONENT:
        return k8s.get(props, "deletionProtection", unknown=True), k8s.get(props, "authenticationMode", unknown="API")
    if subject.resource_type == AWS_EKS_CLUSTER:
        return (
            k8s.get(props, "deletionProtection", unknown=True),
            k8s.get(props, "accessConfig", "authenticationMode", unknown="API"),
        )
    return None


def _check_deletion_protection(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    found = _access(subject)
    if found is not None and found[0] is not True:
        yield f"EKS cluster '{subject.name}': deletionProtection is not true; one API call deletes the cluster"


eks_deletion_protected = resource_policy(
    name="eks-clusters-deletion-protected",
    description=(
        "EKS clusters set deletionProtection: EKS then refuses DeleteCluster until it is switched off (EKS user "
        "guide, 'Protect EKS clusters from accidental deletion'), so a mistaken destroy or a stolen deployer key "
        "cannot remove serving in one call."
    ),
    remediation=(
        "Leave cluster.deletionProtection true (the default); a throwaway dev stack disables this policy in "
        "policies/config/dev.json."
    ),
    check=_check_deletion_protection,
)


def _check_authentication(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    found = _access(subject)
    if found is not None and found[1] != "API":
        mode = found[1] or "unset (AWS then uses CONFIG_MAP)"
        yield (
            f"EKS cluster '{subject.name}': authenticationMode is {mode}; the aws-auth ConfigMap would map IAM "
            "principals to Kubernetes groups, editable by anyone who may write ConfigMaps in kube-system"
        )


eks_access_entries_only = resource_policy(
    name="eks-authentication-by-access-entries-only",
    description=(
        "EKS clusters authenticate IAM principals through access entries only (authenticationMode API): in CONFIG_MAP "
        "or API_AND_CONFIG_MAP mode the aws-auth ConfigMap also grants access, outside IAM and CloudTrail (EKS user "
        "guide, 'Grant IAM users access to Kubernetes with EKS access entries'; with no mode AWS uses the ConfigMap)."
    ),
    remediation="Keep authentication_mode API on eks.Cluster (components/cluster.py) and grant access with accessEntries.",
    check=_check_authentication,
)

POLICIES = [eks_control_plane, auto_mode_tags, eks_deletion_protected, eks_access_entries_only]
