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

from . import k8s
from .base import Subject, of_kind, stack_policy, subject_of
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


def _opens_to_anyone(rule: Mapping[str, Any]) -> bool:
    """An ingress rule without sources, with an IP block, or with a peer that names no pods
    admits callers outside the platform's own pods."""
    peers = k8s.items(rule, "from")
    return not peers or any(
        not k8s.is_map(p) or k8s.get(p, "ipBlock") is not None or k8s.get(p, "podSelector") is None for p in peers
    )


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

POLICIES = [network_policies_enforced, predictors_behind_gateway]
