"""Namespace isolation in both stacks: every platform namespace denies ingress by default (or, for
envoy-gateway-system, closes the rate-limit service to all but the Envoy proxies), admits the
control plane only on the webhook ports of its pinned chart, carries Pod Security Admission labels,
and the namespaces whose pods need no network keep their egress to DNS and each other."""

from __future__ import annotations

from typing import Any

import pytest

from components import namespace_isolation as ni
from components.gateway.objects import envoy_pod_selector
from components.gateway.store import RATE_LIMIT_POD_LABELS, REDIS_PORT, SENTINEL_PORT
from components.isolation import PSA_PREFIX
from components.observability.objects import DCGM_PORT, NODE_EXPORTER_PORT, PROMETHEUS_POD_LABELS
from contract.settings.stack_file import load_stack
from tests.harness import ROOT, StackRun

OPERATOR_NAMESPACES = ["monitoring", "keda", "kserve", "cert-manager", "envoy-ai-gateway-system"]
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def policies(stack: StackRun, namespace: str) -> dict[str, dict[str, Any]]:
    return {
        r.inputs["metadata"]["name"]: r.inputs["spec"]
        for r in stack.of_type(NETWORK_POLICY)
        if r.inputs["metadata"]["namespace"] == namespace
    }


def namespace_labels(stack: StackRun, namespace: str) -> dict[str, str]:
    found = [
        r.inputs["metadata"].get("labels", {})
        for r in stack.of_type("kubernetes:core/v1:Namespace") + stack.of_type("kubernetes:core/v1:NamespacePatch")
        if r.inputs["metadata"]["name"] == namespace
    ]
    return {k: v for labels in found for k, v in labels.items()}


def ports(rule: dict[str, Any]) -> set[int]:
    return {p["port"] for p in rule.get("ports", [])}


@pytest.mark.parametrize("namespace", OPERATOR_NAMESPACES)
def test_every_operator_namespace_denies_ingress_by_default(stack: StackRun, namespace: str) -> None:
    deny = policies(stack, namespace)["default-deny-ingress"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress"]}


@pytest.mark.parametrize("namespace", OPERATOR_NAMESPACES)
def test_other_namespaces_reach_an_operator_only_on_named_ports(stack: StackRun, namespace: str) -> None:
    """A rule without `from` (the control plane has no pod to name) opens named ports only; a rule
    without ports admits only the namespace's own pods."""
    for name, spec in policies(stack, namespace).items():
        for rule in spec.get("ingress", []):
            if "ports" not in rule:
                assert rule["from"] == [{"podSelector": {}}], name  # same namespace, no namespaceSelector
            else:
                assert ports(rule), name


@pytest.mark.parametrize(
    ("namespace", "webhook_ports"),
    [
        ("keda", {6443, 9443}),
        ("kserve", {9443}),
        ("cert-manager", {10250}),
        ("envoy-ai-gateway-system", {9443}),
    ],
)
def test_the_control_plane_reaches_only_the_charts_webhook_ports(
    stack: StackRun, namespace: str, webhook_ports: set[int]
) -> None:
    [rule] = policies(stack, namespace)["api-server"]["ingress"]
    assert "from" not in rule and ports(rule) == webhook_ports


def test_alertmanager_and_prometheus_are_closed_to_other_namespaces_but_keda(stack: StackRun) -> None:
    found = policies(stack, "monitoring")
    keda = found["prometheus-from-keda"]
    assert keda["podSelector"] == {"matchLabels": PROMETHEUS_POD_LABELS}
    [rule] = keda["ingress"]
    assert ports(rule) == {ni.PROMETHEUS_PORT}
    assert rule["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}},
            "podSelector": {"matchLabels": ni.KEDA_OPERATOR_POD_LABELS},
        }
    ]
    webhook = found["operator-webhook"]
    assert webhook["podSelector"] == {"matchLabels": ni.PROMETHEUS_OPERATOR_POD_LABELS}
    assert set(found) == {"default-deny-ingress", "same-namespace", "operator-webhook", "prometheus-from-keda"}


def test_the_exporters_namespace_admits_only_prometheus_on_the_exporters_ports(stack: StackRun) -> None:
    found = policies(stack, "monitoring-exporters")
    assert set(found) == {"default-deny-ingress", "prometheus"}
    assert found["default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    [rule] = found["prometheus"]["ingress"]
    assert ports(rule) == {DCGM_PORT, NODE_EXPORTER_PORT}
    assert rule["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": PROMETHEUS_POD_LABELS},
        }
    ]


def test_the_rate_limit_service_admits_only_the_envoy_proxies_on_its_grpc_port(stack: StackRun) -> None:
    """Its HTTP/JSON port (8080) and debug port (6070) answer anyone who reaches them; the
    policy selects the rate-limit pods and admits the Gateway's Envoy pods on gRPC alone."""
    gw = load_stack(stack.stack, ROOT).gateway
    spec = policies(stack, "envoy-gateway-system")["rate-limit"]
    assert spec["podSelector"] == {"matchLabels": RATE_LIMIT_POD_LABELS}
    assert spec["policyTypes"] == ["Ingress"]
    [rule] = spec["ingress"]
    assert ports(rule) == {ni.RATE_LIMIT_GRPC_PORT}
    assert rule["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "envoy-gateway-system"}},
            "podSelector": {"matchLabels": envoy_pod_selector(gw)},
        }
    ]


def test_the_ai_gateway_controller_admits_envoy_gateway_on_its_extension_ports_only(stack: StackRun) -> None:
    [rule] = policies(stack, "envoy-ai-gateway-system")["from-envoy-gateway"]["ingress"]
    assert ports(rule) == {1063, 18002}
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "envoy-gateway-system"}}}
    ]


@pytest.mark.parametrize(
    ("namespace", "level"),
    [
        ("inference", "restricted"),
        ("ai-gateway", "restricted"),
        ("keda", "baseline"),
        ("kserve", "baseline"),
        ("cert-manager", "baseline"),
        ("envoy-gateway-system", "baseline"),
        ("envoy-ai-gateway-system", "baseline"),
        # Prometheus, Grafana, Alertmanager: no host access.
        ("monitoring", "baseline"),
        # node-exporter (hostNetwork, hostPID, hostPath) and DCGM (hostPath, root) need privileged.
        ("monitoring-exporters", "privileged"),
    ],
)
def test_every_platform_namespace_enforces_a_pod_security_level_pinned_to_the_cluster_version(
    stack: StackRun, namespace: str, level: str
) -> None:
    version = "v" + load_stack(stack.stack, ROOT).cluster.kubernetes_version
    labels = namespace_labels(stack, namespace)
    assert labels[f"{PSA_PREFIX}/enforce"] == level
    for mode in ("enforce", "warn", "audit"):
        assert labels[f"{PSA_PREFIX}/{mode}-version"] == version
    assert labels[f"{PSA_PREFIX}/warn"] == labels[f"{PSA_PREFIX}/audit"] == "restricted"


def test_labels_and_policies_of_chart_namespaces_wait_for_every_chart(stack: StackRun) -> None:
    """A patch of a namespace that does not exist yet fails: the component waits for every
    release (depending on a component is depending on its children)."""
    component = next(r for r in stack.resources if r.type == "inference-platform:isolation:NamespaceIsolation")
    releases = {r.urn for r in stack.of_type("kubernetes:helm.sh/v3:Release")}
    children = stack.children_of(component)
    assert children
    for child in children:
        assert releases <= set(child.dependencies), child.name


def test_the_gateway_namespace_lets_redis_reach_only_dns_and_its_own_pods(stack: StackRun) -> None:
    found = policies(stack, "ai-gateway")
    assert found["default-deny-egress"] == {"podSelector": {}, "policyTypes": ["Egress"]}
    assert found["allow-dns"]["egress"] == [
        {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}
    ]
    [egress] = found["ratelimit-redis"]["egress"]
    assert egress["to"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "ratelimit-redis"}}}]
    assert ports(egress) == {REDIS_PORT, SENTINEL_PORT}


def test_predictors_reach_nothing_but_dns(stack: StackRun) -> None:
    """No internet over NAT, no IMDS, no Kubernetes API, no Prometheus, no rate limiter: the
    serving namespace denies all egress, then opens port 53 alone."""
    serving = load_stack(stack.stack, ROOT).serving.namespace
    found = policies(stack, serving)
    assert found["default-deny-egress"] == {"podSelector": {}, "policyTypes": ["Egress"]}
    egress_rules = [rule for spec in found.values() for rule in spec.get("egress", [])]
    assert egress_rules == [{"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}]
