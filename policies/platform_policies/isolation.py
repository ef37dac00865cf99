"""Network isolation that a real cluster enforces: NetworkPolicies only count when EKS runs the
policy controller, and predictors are reachable only from the pods the platform names.

EKS Auto Mode enforces NetworkPolicies only with the `amazon-vpc-cni` ConfigMap in `kube-system`
(`enable-network-policy-controller: "true"`) and a NodeClass that sets `networkPolicy` (EKS user
guide, "Use Network Policies with EKS Auto Mode"); without Auto Mode, the VPC CNI add-on's
`enableNetworkPolicy`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from contract.names import PART_OF

from . import k8s
from .base import Subject, of_kind, resource_policy, stack_policy, subject_of
from .cluster import AUTO_MODE_NODE_CLASS, EKS_COMPONENT

NETWORK_POLICY = ("networking.k8s.io", "NetworkPolicy")
CONFIG_MAP = ("", "ConfigMap")
CONTROLLER_KEY = "enable-network-policy-controller"


def _controller_switched_on(resources: list[Any]) -> bool:
    return any(
        m.k8s_name == "amazon-vpc-cni"
        and m.namespace == "kube-system"
        and str(k8s.get(m.props, "data", CONTROLLER_KEY, unknown="")).lower() == "true"
        for m in of_kind(resources, *CONFIG_MAP)
    )


def _enforcement_gaps(resources: list[Any]) -> list[str]:
    clusters = [subject_of(r) for r in resources if r.resource_type == EKS_COMPONENT]
    if any(k8s.get(c.props, "autoMode", "enabled", unknown=True) is not True for c in clusters):
        vpc_cni = all(k8s.get(c.props, "vpcCniOptions", "enableNetworkPolicy", unknown=True) is True for c in clusters)
        return [] if vpc_cni else ["the VPC CNI add-on does not set enableNetworkPolicy"]
    gaps = (
        []
        if _controller_switched_on(resources)
        else [f'no ConfigMap kube-system/amazon-vpc-cni sets {CONTROLLER_KEY}: "true"']
    )
    gaps += [
        f"{n.label} does not set spec.networkPolicy"
        for n in of_kind(resources, *AUTO_MODE_NODE_CLASS)
        if k8s.get(n.props, "spec", "networkPolicy", unknown="?") not in ("DefaultAllow", "DefaultDeny", "?")
    ]
    return gaps


def _check_enforced(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    policies = of_kind(resources, *NETWORK_POLICY)
    if not policies:
        return
    for gap in _enforcement_gaps(resources):
        yield f"{len(policies)} NetworkPolicies are not enforced: {gap}", None


network_policies_enforced = stack_policy(
    name="network-policies-enforced",
    description="A stack with NetworkPolicies also switches on their enforcement (EKS Auto Mode or the VPC CNI).",
    remediation=(
        "Keep the amazon-vpc-cni ConfigMap and the NodeClass networkPolicy field of components/isolation.py "
        "(Auto Mode), or VpcCniOptions(enable_network_policy=True) on eks.Cluster (components/cluster.py)."
    ),
    check=_check_enforced,
)


def _is_default_deny(policy: Subject) -> bool:
    selector = k8s.get(policy.props, "spec", "podSelector", unknown=None)
    return (
        k8s.is_map(selector)
        and not list(iter(selector))
        and "Ingress" in [str(t) for t in k8s.items(policy.props, "spec", "policyTypes")]
        and not k8s.items(policy.props, "spec", "ingress")
    )


def _peer_names_pods(peer: Any) -> bool:
    """A peer names pods when it selects them by label (a non-empty podSelector) in named namespaces.
    Kubernetes reads `podSelector: {}` as every pod and `namespaceSelector: {}` as every namespace
    (Kubernetes docs, "Network Policies", the NetworkPolicy resource), and an ipBlock admits addresses,
    whatever pod or node holds them."""
    if not k8s.is_map(peer) or k8s.get(peer, "ipBlock") is not None:
        return False
    pods = k8s.get(peer, "podSelector")
    if pods is None or k8s.selector_is_empty(pods):
        return False
    namespaces = k8s.get(peer, "namespaceSelector")
    return namespaces is None or not k8s.selector_is_empty(namespaces)


def _opens_to_anyone(rule: Mapping[str, Any]) -> bool:
    """An ingress rule without sources (Kubernetes: an empty or missing `from` admits every source)
    or with a peer that names no pods admits callers outside the platform's own pods."""
    peers = k8s.items(rule, "from")
    return not peers or not all(_peer_names_pods(p) for p in peers)


def _check_predictor_ingress(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    policies = of_kind(resources, *NETWORK_POLICY)
    for isvc in of_kind(resources, *k8s.INFERENCE_SERVICE):
        namespace = isvc.namespace
        here = [p for p in policies if p.namespace == namespace]
        if not any(_is_default_deny(p) for p in here):
            yield (
                (
                    f"{isvc.label}: namespace {namespace} has no default-deny ingress NetworkPolicy, so any pod "
                    "can call the predictor directly, past the gateway's keys and quotas"
                ),
                isvc.urn,
            )
        for policy in here:
            if any(_opens_to_anyone(r) for r in k8s.items(policy.props, "spec", "ingress")):
                yield (
                    (f"{policy.label}: admits callers that are not named pods, beside the predictors of {isvc.label}"),
                    policy.urn,
                )


predictors_behind_gateway = stack_policy(
    name="predictors-reachable-only-through-gateway",
    description=(
        "Namespaces with InferenceServices deny ingress by default and admit only named pods (the gateway's "
        "proxies, Prometheus)."
    ),
    remediation=(
        "Keep the default-deny-ingress and predictors NetworkPolicies of components/serving (peers built in "
        "components/platform.py); admit callers by namespace and pod labels, never by IP block or unconditionally."
    ),
    check=_check_predictor_ingress,
)

# --- the platform's other workloads (the rate-limit store, model sync) -----------------------------

WORKLOADS_WITH_TEMPLATES = {("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet"), ("batch", "Job")}


def _platform_workloads(resources: list[Any]) -> list[Subject]:
    return [
        s
        for s in (subject_of(r) for r in resources)
        if s.gk in WORKLOADS_WITH_TEMPLATES
        and all(k8s.get(k8s.labels_of(s.props), key, unknown=None) == v for key, v in PART_OF.items())
    ]


def _check_workload_ingress(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    policies = of_kind(resources, *NETWORK_POLICY)
    for workload in _platform_workloads(resources):
        here = [p for p in policies if p.namespace == workload.namespace]
        if not any(_is_default_deny(p) for p in here):
            yield (
                (
                    f"{workload.label}: namespace {workload.namespace} has no default-deny ingress NetworkPolicy; "
                    "its pods are open to every pod a policy does not isolate"
                ),
                workload.urn,
            )
        labels = k8s.get(workload.props, "spec", "template", "metadata", "labels", unknown=None)
        labels = labels if k8s.is_map(labels) else {}
        for policy in here:
            if not k8s.selector_matches(k8s.get(policy.props, "spec", "podSelector", unknown=None), labels):
                continue
            if any(_opens_to_anyone(r) for r in k8s.items(policy.props, "spec", "ingress")):
                yield (
                    f"{policy.label}: admits callers that are not named pods to {workload.label}",
                    policy.urn,
                )


platform_workloads_isolated = stack_policy(
    name="platform-workloads-reachable-only-from-named-pods",
    description=(
        "Namespaces with the platform's own workloads (the rate-limit store, model sync) deny ingress by default, "
        "and every NetworkPolicy that selects those pods admits only named pods: the rate-limit store holds every "
        "client's budget, and only the rate-limit service has a reason to reach it."
    ),
    remediation=(
        "Keep default_deny_ingress (components/isolation.py) in each namespace the platform runs pods in, and build "
        "peers with namespace_peer(namespace, pod_labels), never an empty selector or an ipBlock."
    ),
    check=_check_workload_ingress,
)

# --- no way in beside the gateway ----------------------------------------------------------------

GATEWAY = ("gateway.networking.k8s.io", "Gateway")
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
KSERVE_CHART = "kserve-resources"


def _check_entrances(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if subject.gk == GATEWAY:
        # Gateway API: a listener admits routes from its own namespace unless allowedRoutes says
        # All or a Selector (Gateway API spec, AllowedRoutes; the default is Same).
        for listener in k8s.items(subject.props, "spec", "listeners"):
            origin = k8s.get(listener, "allowedRoutes", "namespaces", "from", default="Same")
            if origin == "All":
                yield (
                    f"{subject.label}: listener {k8s.get(listener, 'name')} admits routes from every namespace; "
                    "a route there, with its own route-level SecurityPolicy, replaces the gateway's keys and quotas"
                )
    elif subject.resource_type == HELM_RELEASE and str(k8s.get(subject.props, "chart", default="")).endswith(
        "/" + KSERVE_CHART
    ):
        disabled = k8s.get(subject.props, "values", "kserve", "controller", "gateway", "disableIngressCreation")
        if disabled is not True:
            yield (
                f"Helm release '{subject.name}': KServe creates an Ingress for every InferenceService "
                "(kserve.controller.gateway.disableIngressCreation is not true); any controller that serves it "
                "exposes the predictors beside the AI gateway"
            )


only_gateway_entrance = resource_policy(
    name="predictors-have-no-other-entrance",
    description=(
        "The AI gateway is the only way to a predictor: its listeners admit routes from their own namespace only, "
        "and KServe creates no Ingress of its own (disableIngressCreation)."
    ),
    remediation=(
        "Keep allowedRoutes.namespaces.from: Same on the Gateway (components/gateway/) and "
        "kserve.controller.gateway.disableIngressCreation: true on the KServe chart (components/serving/)."
    ),
    check=_check_entrances,
)

POLICIES = [network_policies_enforced, predictors_behind_gateway, platform_workloads_isolated, only_gateway_entrance]
