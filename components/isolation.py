"""Network isolation: what makes NetworkPolicies enforced, and the default-deny every platform
namespace starts from (each component then admits exactly its callers).

EKS Auto Mode enforces NetworkPolicy only when the `amazon-vpc-cni` ConfigMap in `kube-system`
sets `enable-network-policy-controller: "true"` and the node's NodeClass sets `networkPolicy`
(EKS user guide, "Use Network Policies with EKS Auto Mode"); without Auto Mode the VPC CNI add-on
enforces them with `enableNetworkPolicy` (pulumi_eks `VpcCniOptions.enable_network_policy`).
"""

from __future__ import annotations

from typing import Any, Literal

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


def _policy(namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": names.PART_OF},
        "spec": spec,
    }


def _ports(ports: list[int], protocol: str = "TCP") -> list[dict[str, Any]]:
    return [{"protocol": protocol, "port": port} for port in ports]


def default_deny_egress(namespace: str) -> dict[str, Any]:
    """Selects every pod of the namespace and lets nothing out: only explicit policies open a way
    (no internet over NAT, no IMDS, no Kubernetes API, no other namespace)."""
    return _policy(namespace, "default-deny-egress", {"podSelector": {}, "policyTypes": ["Egress"]})


# DNS on port 53 to any address: EKS Auto Mode resolves on the node (EKS user guide, "Learn about
# VPC Networking and Load Balancing in EKS Auto Mode": DNS queries cached on the node), not only
# through CoreDNS pods, so the resolver is not a pod a selector could name.
DNS_PORTS = [*_ports([53], "UDP"), *_ports([53])]


def dns_egress(namespace: str, pod_selector: dict[str, Any] | None = None) -> dict[str, Any]:
    """Name resolution, and nothing else, for the selected pods (default: every pod)."""
    return _policy(
        namespace,
        "allow-dns",
        {"podSelector": pod_selector or {}, "policyTypes": ["Egress"], "egress": [{"ports": DNS_PORTS}]},
    )


def same_namespace_ingress(namespace: str) -> dict[str, Any]:
    """Pods of the namespace may call each other (an operator's parts: Grafana -> Prometheus ->
    Alertmanager, KEDA's metrics server -> its operator); no pod of another namespace may."""
    return _policy(
        namespace,
        "same-namespace",
        {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": {}}]}]},
    )


def api_server_ingress(
    namespace: str, name: str, ports: list[int], pod_selector: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Admission webhooks and aggregated APIs: the EKS control plane calls them from its
    cross-account ENIs, which no pod selector names, so these ports (and only these) admit any
    source, as the upstream charts' own NetworkPolicies do (kube-prometheus-stack-88.5.3
    templates/prometheus-operator/networkpolicy.yaml; keda-2.20.2 templates/webhooks/networkpolicy.yaml)."""
    return _policy(
        namespace,
        name,
        {"podSelector": pod_selector or {}, "policyTypes": ["Ingress"], "ingress": [{"ports": _ports(ports)}]},
    )


def peer_ingress(
    namespace: str, name: str, pod_selector: dict[str, Any], peers: list[dict[str, Any]], ports: list[int]
) -> dict[str, Any]:
    """The selected pods admit `peers` (named pods of named namespaces) on `ports` only."""
    return _policy(
        namespace,
        name,
        {"podSelector": pod_selector, "policyTypes": ["Ingress"], "ingress": [{"from": peers, "ports": _ports(ports)}]},
    )


def operator_namespace_policies(namespace: str, api_server_ports: list[int]) -> list[dict[str, Any]]:
    """An operator's namespace: default-deny ingress, its pods may call each other, the control
    plane reaches its webhook / aggregated-API ports."""
    return [
        default_deny_ingress(namespace),
        same_namespace_ingress(namespace),
        api_server_ingress(namespace, "api-server", api_server_ports),
    ]


# Pod Security Admission (Kubernetes docs, "Pod Security Admission": the
# pod-security.kubernetes.io/<mode> and <mode>-version namespace labels).
PSA_PREFIX = "pod-security.kubernetes.io"
PodSecurityLevel = Literal["privileged", "baseline", "restricted"]


def pod_security_labels(enforce: PodSecurityLevel, kubernetes_version: str) -> dict[str, str]:
    """Enforce `enforce`; warn and audit at restricted, so anything short of it is visible. The
    version is the cluster's, so an upgrade does not silently change what is enforced."""
    version = f"v{kubernetes_version}"
    labels = {}
    for mode, level in (("enforce", enforce), ("warn", "restricted"), ("audit", "restricted")):
        labels[f"{PSA_PREFIX}/{mode}"] = level
        labels[f"{PSA_PREFIX}/{mode}-version"] = version
    return labels
