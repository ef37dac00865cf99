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

from contract.names import ISVC_LABEL, PART_OF

from . import k8s
from .backends import requires_api_key
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

# --- egress: default-deny, and predictors reach nothing but DNS -----------------------------------

DNS_PORT = 53


def _is_default_deny_egress(policy: Subject) -> bool:
    selector = k8s.get(policy.props, "spec", "podSelector", unknown=None)
    return (
        k8s.is_map(selector)
        and not list(iter(selector))
        and "Egress" in [str(t) for t in k8s.items(policy.props, "spec", "policyTypes")]
        and not k8s.items(policy.props, "spec", "egress")
    )


def predictor_pod_labels(isvc: Subject) -> dict[str, Any]:
    """The labels KServe puts on an InferenceService's predictor pods: the service's own labels,
    `serving.kserve.io/inferenceservice: <name>` and `component: predictor` (KServe v0.20
    pkg/controller/v1beta1/inferenceservice/components/predictor.go)."""
    labels = dict(k8s.labels_of(isvc.props))
    return {**labels, ISVC_LABEL: isvc.k8s_name, "component": "predictor"}


def _selects(policy: Subject, labels: Mapping[str, Any]) -> bool:
    return k8s.selector_matches(k8s.get(policy.props, "spec", "podSelector", unknown=None), labels)


def _port_numbers(rule: Any) -> set[str] | None:
    """The ports a NetworkPolicy rule opens (as strings: numbers or named ports), None for every port
    (Kubernetes: a rule without `ports` matches all ports)."""
    ports = k8s.items(rule, "ports")
    if not ports:
        return None
    return {_port_text(k8s.get(p, "port", unknown="?")) for p in ports}


def _port_text(port: Any) -> str:
    return str(int(port)) if isinstance(port, (int, float)) and not isinstance(port, bool) else str(port)


def _check_egress(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    policies = of_kind(resources, *NETWORK_POLICY)
    isvcs = of_kind(resources, *k8s.INFERENCE_SERVICE)
    namespaces: dict[str | None, Subject] = {}
    for subject in [*isvcs, *_platform_workloads(resources)]:
        namespaces.setdefault(subject.namespace, subject)
    for namespace, example in namespaces.items():
        if not any(_is_default_deny_egress(p) for p in policies if p.namespace == namespace):
            yield (
                f"{example.label}: namespace {namespace} has no default-deny egress NetworkPolicy; its pods reach "
                "the internet over NAT, the node's metadata service, the Kubernetes API and every other namespace",
                example.urn,
            )
    vpc_ranges = {
        str(k8s.get(r.props, "cidrBlock", unknown="")) for r in resources if r.resource_type == "aws:ec2/vpc:Vpc"
    } - {""}
    for policy in (p for p in policies if p.namespace in namespaces):
        for rule in k8s.items(policy.props, "spec", "egress"):
            for peer in k8s.items(rule, "to"):
                cidr = str(k8s.get(peer, "ipBlock", "cidr", unknown=""))
                kept_out = {str(c) for c in k8s.known_items(peer, "ipBlock", "except")}
                if cidr.endswith("/0") and vpc_ranges - kept_out:
                    yield (
                        f"{policy.label}: lets pods out to {cidr} without excepting the VPC "
                        f"{sorted(vpc_ranges - kept_out)}; they would reach the cluster's API endpoint and every "
                        "service inside it on those ports",
                        policy.urn,
                    )
    for isvc in isvcs:
        labels = predictor_pod_labels(isvc)
        for policy in (p for p in policies if p.namespace == isvc.namespace and _selects(p, labels)):
            if "Egress" not in [str(t) for t in k8s.items(policy.props, "spec", "policyTypes")]:
                continue
            for rule in k8s.items(policy.props, "spec", "egress"):
                ports = _port_numbers(rule)
                if ports is None or ports - {str(DNS_PORT)}:
                    shown = "every port" if ports is None else f"port(s) {sorted(ports)}"
                    yield (
                        f"{policy.label}: lets the predictors of {isvc.label} out on {shown}; a predictor runs "
                        "downloaded model code and needs nothing beyond DNS",
                        policy.urn,
                    )


platform_egress_denied = stack_policy(
    name="platform-namespaces-deny-egress-by-default",
    description=(
        "Every namespace with the platform's pods (predictors, model sync, the rate-limit store) has a default-deny "
        "egress NetworkPolicy, and no policy lets a predictor out beyond DNS (port 53): a compromised engine must "
        "not reach the internet, IMDS, the Kubernetes API, Prometheus or the rate limiter."
    ),
    remediation=(
        "Keep default_deny_egress and dns_egress (components/isolation.py) in the serving, gateway and model-sync "
        "namespaces; open other ways out for named pods only (components/model_sync.py egress_policy)."
    ),
    check=_check_egress,
)

# --- Prometheus reaches the metrics port, never vLLM's ----------------------------------------------

# The Prometheus pods the operator runs carry `app.kubernetes.io/name: prometheus`
# (prometheus-operator v0.80+ pkg/prometheus/statefulset.go, the managed-by/name labels).
PROMETHEUS_NAME = ("app.kubernetes.io/name", "prometheus")


def _names_prometheus(peer: Any) -> bool:
    labels = k8s.get(peer, "podSelector", "matchLabels", unknown=None)
    return k8s.is_map(labels) and k8s.get(labels, PROMETHEUS_NAME[0], unknown=None) == PROMETHEUS_NAME[1]


def _serving_ports(isvc: Subject) -> set[str]:
    """The ports (numbers and names) of the predictor containers that require the API key: vLLM's."""
    found: set[str] = set()
    predictor = k8s.get(isvc.props, "spec", "predictor")
    for name, container in k8s.containers(predictor):
        if name.startswith("initContainers") or not requires_api_key(container):
            continue
        for port in k8s.known_items(container, "ports"):
            found |= {_port_text(k8s.get(port, "containerPort", unknown="?")), str(k8s.get(port, "name", default=""))}
        for arg in k8s.known_items(container, "args"):
            if str(arg).startswith("--port="):
                found.add(str(arg).split("=", 1)[1])
    return found - {""}


def _check_metrics_port(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    policies = of_kind(resources, *NETWORK_POLICY)
    for isvc in of_kind(resources, *k8s.INFERENCE_SERVICE):
        serving = _serving_ports(isvc)
        labels = predictor_pod_labels(isvc)
        for policy in (p for p in policies if p.namespace == isvc.namespace and _selects(p, labels)):
            for rule in k8s.items(policy.props, "spec", "ingress"):
                if not any(_names_prometheus(peer) for peer in k8s.items(rule, "from")):
                    continue
                ports = _port_numbers(rule)
                if ports is None or ports & serving:
                    shown = "every port" if ports is None else f"vLLM's port {sorted(ports & serving)}"
                    yield (
                        f"{policy.label}: admits Prometheus to the predictors of {isvc.label} on {shown}; a pod "
                        "wearing Prometheus' labels would reach /invocations, /pause and /update_weights, which "
                        "vLLM's --api-key does not guard",
                        policy.urn,
                    )


metrics_port_only = stack_policy(
    name="predictors-admit-prometheus-on-the-metrics-port-only",
    description=(
        "A NetworkPolicy rule that admits Prometheus to the predictors names ports, and none of them is vLLM's "
        "serving port: Prometheus scrapes the metrics-only sidecar (GET /metrics alone), because vLLM's API key "
        "guards /v1 but not /invocations, /pause or /update_weights."
    ),
    remediation=(
        "Keep the predictors policy of components/serving/objects.py: Envoy on names.PORT, Prometheus on "
        "METRICS_PORT only, and the PodMonitor on the metrics port."
    ),
    check=_check_metrics_port,
)

# --- the rate-limit service admits only Envoy, on gRPC ---------------------------------------------

GATEWAY_CHART = "gateway-helm"
# Envoy Gateway v1.9.0 internal/infrastructure/kubernetes/ratelimit/resource.go: the rate-limit pods'
# labels, InfraGRPCPort 8081 (what Envoy calls); the HTTP/JSON port 8080 takes unauthenticated
# requests that spend any client's budget, the debug port 6070 serves the configuration.
RATE_LIMIT_POD_LABELS = {"app.kubernetes.io/name": "envoy-ratelimit", "app.kubernetes.io/component": "ratelimit"}
RATE_LIMIT_GRPC_PORT = "8081"


def chart_of(release: Subject) -> str:
    return str(k8s.get(release.props, "chart", default="", unknown="")).rsplit("/", 1)[-1]


def _check_rate_limit_ingress(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    policies = of_kind(resources, *NETWORK_POLICY)
    for release in (subject_of(r) for r in resources if r.resource_type == HELM_RELEASE):
        if chart_of(release) != GATEWAY_CHART:
            continue
        if k8s.get(release.props, "values", "config", "envoyGateway", "rateLimit", unknown=None) is None:
            continue
        namespace = k8s.get(release.props, "namespace", unknown=None)
        selecting = [
            p
            for p in policies
            if p.namespace == namespace
            and _selects(p, RATE_LIMIT_POD_LABELS)
            and "Ingress" in [str(t) for t in k8s.items(p.props, "spec", "policyTypes")]
        ]
        if not selecting:
            yield (
                f"{release.label}: no NetworkPolicy in {namespace} isolates the rate-limit service; any pod can "
                "POST to its HTTP/JSON port to spend another client's budget and read its config on 6070",
                release.urn,
            )
        for policy in selecting:
            for rule in k8s.items(policy.props, "spec", "ingress"):
                ports = _port_numbers(rule)
                if _opens_to_anyone(rule) or ports is None or ports - {RATE_LIMIT_GRPC_PORT}:
                    shown = "every port" if ports is None else f"port(s) {sorted(ports)}"
                    yield (
                        f"{policy.label}: admits {'callers that are not named pods' if _opens_to_anyone(rule) else 'peers'} "
                        f"to the rate-limit service on {shown}; only the Envoy proxies, on gRPC "
                        f"{RATE_LIMIT_GRPC_PORT}",
                        policy.urn,
                    )


rate_limit_isolated = stack_policy(
    name="rate-limit-service-reachable-only-from-envoy",
    description=(
        "When Envoy Gateway runs its rate-limit service, a NetworkPolicy selects its pods and admits only named "
        "pods (the gateway's Envoy proxies) on its gRPC port: its HTTP/JSON port answers anyone who asks to "
        "charge a budget, and its debug port prints the limits."
    ),
    remediation=(
        "Keep the rate-limit policy of components/namespace_isolation.py (envoy-gateway-system: the proxies' "
        "labels, port 8081)."
    ),
    check=_check_rate_limit_ingress,
)

# --- operator namespaces deny ingress by default ---------------------------------------------------

# Charts whose namespaces the platform isolates (components/namespace_isolation.py): their pods
# hold what an attacker wants (Alertmanager's silences, what KEDA reads, webhooks that admit pods).
# envoy-gateway-system is left out: the Envoy proxies there serve the NLB from every VPC address.
ISOLATED_CHARTS = {
    "kube-prometheus-stack",
    "dcgm-exporter",
    "keda",
    "kserve-resources",
    "cert-manager",
    "ai-gateway-helm",
}


def _admits_everyone(rule: Any) -> bool:
    """A rule that admits every source on every port, or any pod of any namespace (an empty
    namespaceSelector, an ipBlock): not what an operator namespace opens. A rule limited to ports
    but without sources is the control plane's way to a webhook (api_server_ingress)."""
    peers = k8s.items(rule, "from")
    if not peers:
        return _port_numbers(rule) is None
    for peer in peers:
        if not k8s.is_map(peer) or k8s.get(peer, "ipBlock") is not None:
            return True
        namespaces = k8s.get(peer, "namespaceSelector")
        if namespaces is not None and k8s.selector_is_empty(namespaces):
            return True
    return False


def _check_operator_namespaces(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    policies = of_kind(resources, *NETWORK_POLICY)
    seen: set[Any] = set()
    for release in (subject_of(r) for r in resources if r.resource_type == HELM_RELEASE):
        namespace = k8s.get(release.props, "namespace", unknown=None)
        if chart_of(release) not in ISOLATED_CHARTS or namespace in seen:
            continue
        seen.add(namespace)
        here = [p for p in policies if p.namespace == namespace]
        if not any(_is_default_deny(p) for p in here):
            yield (
                f"{release.label}: namespace {namespace} has no default-deny ingress NetworkPolicy; any pod can call "
                "its operators (silence alerts through Alertmanager, forge what KEDA reads)",
                release.urn,
            )
        for policy in here:
            if any(_admits_everyone(r) for r in k8s.items(policy.props, "spec", "ingress")):
                yield (
                    f"{policy.label}: admits every pod of every namespace (or every address) to {namespace}",
                    policy.urn,
                )


operator_namespaces_isolated = stack_policy(
    name="operator-namespaces-deny-ingress-by-default",
    description=(
        "The namespaces of the operators the platform installs (monitoring, KEDA, KServe, cert-manager, the AI "
        "gateway's controller) deny ingress by default, and no policy there admits any pod of any namespace: only "
        "their own pods, named peers, and the control plane on webhook ports."
    ),
    remediation=(
        "Keep components/namespace_isolation.py (operator_namespaces): default-deny, same-namespace, the API "
        "server on each chart's webhook ports, named peers for the rest."
    ),
    check=_check_operator_namespaces,
)

POLICIES = [
    network_policies_enforced,
    predictors_behind_gateway,
    platform_workloads_isolated,
    only_gateway_entrance,
    platform_egress_denied,
    metrics_port_only,
    rate_limit_isolated,
    operator_namespaces_isolated,
]
