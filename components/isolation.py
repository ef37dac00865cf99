"""Network isolation: what makes NetworkPolicies enforced, and the default-deny every platform
namespace starts from (each component then admits exactly its callers).

EKS Auto Mode enforces NetworkPolicy only when the `amazon-vpc-cni` ConfigMap in `kube-system`
sets `enable-network-policy-controller: "true"` and the node's NodeClass sets `networkPolicy`
(EKS user guide, "Use Network Policies with EKS Auto Mode"); without Auto Mode the VPC CNI add-on
enforces them with `enableNetworkPolicy` (pulumi_eks `VpcCniOptions.enable_network_policy`).
"""

from __future__ import annotations

from typing import Any

from contract import names

VPC_CNI_CONFIG_MAP = "amazon-vpc-cni"
NETWORK_POLICY_CONTROLLER_KEY = "enable-network-policy-controller"
# NodeClass fields (EKS user guide, "Create a Node Class"): pods no policy selects stay reachable;
# denied and allowed flows are logged on the node.
NODE_CLASS_NETWORK_POLICY = {"networkPolicy": "DefaultAllow", "networkPolicyEventLogs": "Enabled"}


def network_policy_controller_config_map() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": VPC_CNI_CONFIG_MAP, "namespace": "kube-system"},
        "data": {NETWORK_POLICY_CONTROLLER_KEY: "true"},
    }


def default_deny_ingress(namespace: str) -> dict[str, Any]:
    """Selects every pod of the namespace and admits nothing: only explicit policies open a port."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny-ingress", "namespace": namespace, "labels": names.PART_OF},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }


def namespace_peer(namespace: str, pod_labels: dict[str, str]) -> dict[str, Any]:
    """Pods with these labels in that namespace (`kubernetes.io/metadata.name` is set by Kubernetes)."""
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "podSelector": {"matchLabels": pod_labels},
    }
