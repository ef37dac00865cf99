"""The AI endpoint: every AI route is behind API-key auth and a rate limit, and every
policy points at something that exists.

Envoy Gateway attaches a policy to a Gateway (all its routes) or to one route, where the
route-level policy *replaces* the Gateway-level one (unless it sets `mergeType`). So a route
is covered when its most specific attached policy has the feature; a route-level policy
that only sets, say, CORS silently removes API-key auth from that route.
The AI gateway generates one HTTPRoute per AIGatewayRoute, with the same name and namespace.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import PolicyConfigSchema

from contract.names import HEADROOM_PRIORITY_CLASS, PART_OF

from . import k8s
from .base import Subject, resource_policy, stack_policy, subject_of
from .platform import PREDICTOR_SUFFIX

GATEWAY_API = "gateway.networking.k8s.io"
ENVOY_API = "gateway.envoyproxy.io"
AI_API = "aigateway.envoyproxy.io"
AI_ROUTE = (AI_API, "AIGatewayRoute")
HTTP_ROUTE = (GATEWAY_API, "HTTPRoute")
GATEWAY = (GATEWAY_API, "Gateway")
SECURITY_POLICY = (ENVOY_API, "SecurityPolicy")
TRAFFIC_POLICY = (ENVOY_API, "BackendTrafficPolicy")
# What Envoy Gateway's SecurityPolicy/BackendTrafficPolicy targetRefs may name.
ATTACHABLE_KINDS = {"Gateway", "HTTPRoute", "GRPCRoute", "TCPRoute", "UDPRoute", "TLSRoute"}


@dataclass(frozen=True)
class Route:
    subject: Subject
    kind: str  # the kind policies target: HTTPRoute (also for an AIGatewayRoute's generated route)
    name: str
    namespace: str | None
    gateways: frozenset[tuple[str | None, str]]  # (namespace, name) of parent Gateways
    labels: Mapping[str, Any]


def _routes(subjects: list[Subject]) -> list[Route]:
    routes = []
    for s in subjects:
        if s.gk not in (AI_ROUTE, HTTP_ROUTE):
            continue
        parents = frozenset(
            (k8s.get(p, "namespace", default=s.namespace), str(k8s.get(p, "name")))
            for p in k8s.items(s.props, "spec", "parentRefs")
            if k8s.get(p, "kind", default="Gateway") == "Gateway"
        )
        routes.append(Route(s, "HTTPRoute", s.k8s_name, s.namespace, parents, k8s.labels_of(s.props)))
    return routes


def _is_ai_route(route: Subject) -> bool:
    """An AIGatewayRoute, or an HTTPRoute that sends traffic straight to a predictor Service
    (which would bypass the AI route's policies unless it has its own)."""
    if route.gk == AI_ROUTE:
        return True
    return any(
        str(k8s.get(ref, "name", default="")).endswith(PREDICTOR_SUFFIX)
        for rule in k8s.items(route.props, "spec", "rules")
        for ref in k8s.items(rule, "backendRefs")
    )


def _target_refs(policy: Subject) -> list[Mapping[str, Any]]:
    refs = list(k8s.items(policy.props, "spec", "targetRefs"))
    single = k8s.get(policy.props, "spec", "targetRef")
    return refs + ([single] if k8s.is_map(single) else [])


def _selects(policy: Subject, kind: str, labels: Mapping[str, Any]) -> bool:
    for selector in k8s.items(policy.props, "spec", "targetSelectors"):
        wanted = k8s.get(selector, "matchLabels") or {}
        if k8s.get(selector, "kind") == kind and wanted and all(labels.get(k) == v for k, v in wanted.items()):
            return True
    return False


def _targets_route(policy: Subject, route: Route) -> bool:
    if policy.namespace != route.namespace:
        return False
    named = any(k8s.get(r, "kind") == "HTTPRoute" and k8s.get(r, "name") == route.name for r in _target_refs(policy))
    return named or _selects(policy, "HTTPRoute", route.labels)


def _targets_gateway_of(
    policy: Subject, route: Route, gateway_labels: Mapping[tuple[str | None, str], Mapping[str, Any]]
) -> bool:
    for namespace, name in route.gateways:
        if policy.namespace != namespace:
            continue
        if any(k8s.get(r, "kind") == "Gateway" and k8s.get(r, "name") == name for r in _target_refs(policy)):
            return True
        if _selects(policy, "Gateway", gateway_labels.get((namespace, name), {})):
            return True
    return False


def _effective(
    policies: list[Subject], route: Route, gateway_labels: Mapping[tuple[str | None, str], Mapping[str, Any]]
) -> list[Subject]:
    """The policies that apply to a route: the route-level ones win over the Gateway-level ones
    unless they merge (`mergeType`)."""
    on_route = [p for p in policies if _targets_route(p, route)]
    on_gateway = [p for p in policies if _targets_gateway_of(p, route, gateway_labels)]
    if on_route and not all(k8s.get(p.props, "spec", "mergeType") for p in on_route):
        return on_route
    return on_route + on_gateway


def _dangling_refs(policy: Subject, subjects: list[Subject]) -> Iterator[str]:
    """targetRefs naming a Gateway or route that is not in the stack."""
    existing = {("Gateway", s.namespace, s.k8s_name) for s in subjects if s.gk == GATEWAY} | {
        ("HTTPRoute", s.namespace, s.k8s_name) for s in subjects if s.gk in (AI_ROUTE, HTTP_ROUTE)
    }
    for ref in _target_refs(policy):
        kind, name = k8s.get(ref, "kind"), k8s.get(ref, "name")
        if kind not in ATTACHABLE_KINDS:
            yield (
                f"{policy.label}: targets {kind} {name}, which Envoy Gateway cannot attach a policy to "
                f"(attachable: {sorted(ATTACHABLE_KINDS)}; an AIGatewayRoute is reached through its HTTPRoute)"
            )
        elif kind in ("Gateway", "HTTPRoute") and (kind, policy.namespace, name) not in existing:
            yield f"{policy.label}: targets {kind} {policy.namespace}/{name}, which does not exist in the stack"


def _check_routes(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    subjects = [subject_of(r) for r in resources]
    security = [s for s in subjects if s.gk == SECURITY_POLICY]
    traffic = [s for s in subjects if s.gk == TRAFFIC_POLICY]
    for policy in security + traffic:
        for message in _dangling_refs(policy, subjects):
            yield message, policy.urn
    gateway_labels = {(s.namespace, s.k8s_name): k8s.labels_of(s.props) for s in subjects if s.gk == GATEWAY}
    for route in _routes(subjects):
        if not _is_ai_route(route.subject):
            continue
        label = route.subject.label
        auth = _effective(security, route, gateway_labels)
        if not any(k8s.get(p.props, "spec", "apiKeyAuth") for p in auth):
            names = [p.label for p in auth] or "no SecurityPolicy"
            yield f"{label}: not covered by an API-key SecurityPolicy (effective: {names})", route.subject.urn
        limits = _effective(traffic, route, gateway_labels)
        if not any(k8s.get(p.props, "spec", "rateLimit") for p in limits):
            names = [p.label for p in limits] or "no BackendTrafficPolicy"
            yield f"{label}: not covered by a BackendTrafficPolicy rate limit (effective: {names})", route.subject.urn


ai_routes = stack_policy(
    name="ai-routes-require-api-key-and-rate-limit",
    description=(
        "Every AI route (an AIGatewayRoute, or an HTTPRoute to a predictor Service) is covered by a SecurityPolicy "
        "with apiKeyAuth and a BackendTrafficPolicy with rateLimit, and every such policy targets a Gateway or "
        "route that exists."
    ),
    remediation=(
        "Attach the SecurityPolicy (apiKeyAuth) and the BackendTrafficPolicy (rateLimit) to the Gateway that is the "
        "route's parentRef (components/gateway/ does), or to the HTTPRoute the AI gateway generates (same name as "
        "the AIGatewayRoute). A route-level policy replaces the Gateway-level one: repeat apiKeyAuth/rateLimit in it "
        "or set mergeType."
    ),
    check=_check_routes,
)

# --- No single replica on the request path -----------------------------------------------

ENVOY_PROXY = (ENVOY_API, "EnvoyProxy")
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
DEFAULT_MIN_REPLICAS = 2


def _request_path_replicas(subject: Subject) -> Iterator[tuple[str, Any]]:
    """(what, replicas) of every component each request passes: the Envoy proxies, the rate-limit
    service, and the platform's own workloads (the rate-limit store)."""
    props = subject.props
    if subject.is_kind(*ENVOY_PROXY):
        yield (
            "Envoy proxies",
            k8s.get(props, "spec", "provider", "kubernetes", "envoyDeployment", "replicas", default=1, unknown=None),
        )
    elif subject.resource_type == HELM_RELEASE and str(k8s.get(props, "chart", default="")).endswith("/gateway-helm"):
        kubernetes = k8s.get(props, "values", "config", "envoyGateway", "provider", "kubernetes", unknown=None)
        yield "the rate-limit service", k8s.get(kubernetes, "rateLimitDeployment", "replicas", default=1, unknown=None)
    elif subject.gk in (("apps", "Deployment"), ("apps", "StatefulSet")):
        labels = k8s.labels_of(props)
        # Warm-headroom placeholders serve nothing: their count is capacity, not availability.
        placeholder = k8s.get(props, "spec", "template", "spec", "priorityClassName", unknown=None)
        if placeholder != HEADROOM_PRIORITY_CLASS and all(
            k8s.get(labels, key, unknown=None) == value for key, value in PART_OF.items()
        ):
            yield "this workload", k8s.get(props, "spec", "replicas", default=1, unknown=None)


def _check_replicas(subject: Subject, config: Mapping[str, Any]) -> Iterator[str]:
    minimum = int(config.get("minReplicas", DEFAULT_MIN_REPLICAS))
    for what, replicas in _request_path_replicas(subject):
        if isinstance(replicas, (int, float)) and not isinstance(replicas, bool) and replicas < minimum:
            yield f"{subject.label}: {what} run {replicas:g} replica(s); at least {minimum} on the request path"


request_path_replicated = resource_policy(
    name="no-single-replica-on-request-path",
    description=(
        "The Envoy proxies, the rate-limit service and the platform's own workloads on the request path (the "
        "rate-limit store) run at least minReplicas replicas."
    ),
    remediation=(
        "Set gateway.replicas, gateway.rateLimit.serviceReplicas and gateway.rateLimit.redisReplicas (Sentinel "
        "needs 3) to at least the minimum; dev stacks disable this policy in policies/config/dev.json."
    ),
    check=_check_replicas,
    config=PolicyConfigSchema(
        properties={"minReplicas": {"type": "integer", "minimum": 1, "default": DEFAULT_MIN_REPLICAS}}
    ),
)

POLICIES = [ai_routes, request_path_replicated]
