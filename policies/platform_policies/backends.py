"""What the gateway's keys protect: quotas are charged to the client the key authenticated,
the client's key stops at the gateway, the predictors accept only the gateway's own key, and an
internet-facing load balancer never carries a key in clear."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from . import k8s
from .base import Subject, of_kind, resource_policy, stack_policy, subject_of
from .gateway import AI_API, SECURITY_POLICY, TRAFFIC_POLICY, _target_refs
from .workloads import platform_pod_specs

AI_SERVICE_BACKEND = (AI_API, "AIServiceBackend")
BACKEND_SECURITY_POLICY = (AI_API, "BackendSecurityPolicy")
SERVICE = ("", "Service")
# vLLM refuses /v1 requests without this key (`--api-key`, or the VLLM_API_KEY environment variable;
# vLLM docs, "OpenAI-Compatible Server").
VLLM_KEY_ENV, VLLM_KEY_FLAG = "VLLM_API_KEY", "--api-key"
LB_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer"


def _targets(policy: Subject) -> set[tuple[str | None, str, str]]:
    return {(policy.namespace, str(k8s.get(r, "kind")), str(k8s.get(r, "name"))) for r in _target_refs(policy)}


def _selector_headers(policy: Subject) -> set[str]:
    """Header names the rate-limit rules of a BackendTrafficPolicy tell clients apart by."""
    return {
        str(k8s.get(header, "name")).lower()
        for rule in k8s.items(policy.props, "spec", "rateLimit", "global", "rules")
        + k8s.items(policy.props, "spec", "rateLimit", "local", "rules")
        for selector in k8s.items(rule, "clientSelectors")
        for header in k8s.items(selector, "headers")
    }


def _check_client_identity(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    auth = [s for s in of_kind(resources, *SECURITY_POLICY) if k8s.is_map(k8s.get(s.props, "spec", "apiKeyAuth"))]
    for policy in auth:
        # Envoy Gateway's apiKeyAuth.sanitize removes the client's key before the request goes upstream
        # (Envoy's api_key_auth filter, `forwarding.hide_credentials`).
        if k8s.get(policy.props, "spec", "apiKeyAuth", "sanitize", unknown=None) is not True:
            yield (
                f"{policy.label}: apiKeyAuth does not set sanitize: true, so every client's API key is forwarded "
                "to the backends and their logs",
                policy.urn,
            )
    for limits in of_kind(resources, *TRAFFIC_POLICY):
        headers = _selector_headers(limits)
        if not headers:
            continue
        covering = [p for p in auth if _targets(p) & _targets(limits)]
        # apiKeyAuth.forwardClientIDHeader sets that header to the authenticated client's id,
        # replacing whatever the client sent; any other header is the client's own word.
        forwarded = {
            str(k8s.get(p.props, "spec", "apiKeyAuth", "forwardClientIDHeader", unknown="")).lower() for p in covering
        } - {""}
        spoofable = sorted(headers - forwarded)
        if spoofable:
            yield (
                f"{limits.label}: rate limits tell clients apart by header(s) {spoofable}, which no apiKeyAuth "
                f"on the same target sets (forwardClientIDHeader: {sorted(forwarded) or 'none'}); a client could "
                "send another client's id and spend that client's quota",
                limits.urn,
            )


client_identity = stack_policy(
    name="quotas-charged-to-the-authenticated-client",
    description=(
        "Rate-limit and token-quota rules select clients only by the header the API-key SecurityPolicy on the same "
        "target sets to the authenticated client id (apiKeyAuth.forwardClientIDHeader), and that policy strips the "
        "client's key before forwarding (sanitize: true). Without them any client chooses whose quota it spends, "
        "and every key reaches the predictors."
    ),
    remediation=(
        "Keep forwardClientIDHeader: x-client-id and sanitize: true on the SecurityPolicy of components/gateway/ and "
        "select clients in the BackendTrafficPolicy by that header only."
    ),
    check=_check_client_identity,
)


# --- the predictors accept only the gateway's key ------------------------------------------------


def requires_api_key(container: Mapping[str, Any]) -> bool:
    env = {str(k8s.get(e, "name", unknown="")) for e in k8s.known_items(container, "env")}
    args = [str(a) for a in (*k8s.known_items(container, "command"), *k8s.known_items(container, "args"))]
    return VLLM_KEY_ENV in env or any(a == VLLM_KEY_FLAG or a.startswith(VLLM_KEY_FLAG + "=") for a in args)


def _keyed_backends(resources: list[Any]) -> set[tuple[str | None, str]]:
    """AIServiceBackends an APIKey BackendSecurityPolicy targets (AI Gateway v1beta1 targetRefs)."""
    found: set[tuple[str | None, str]] = set()
    for policy in of_kind(resources, *BACKEND_SECURITY_POLICY):
        if k8s.get(policy.props, "spec", "type") != "APIKey" or not k8s.is_set(
            policy.props, "spec", "apiKey", "secretRef", "name"
        ):
            continue
        for ref in k8s.items(policy.props, "spec", "targetRefs"):
            if k8s.get(ref, "kind") == AI_SERVICE_BACKEND[1]:
                found.add((policy.namespace, str(k8s.get(ref, "name"))))
    return found


def _check_backend_keys(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    for isvc in of_kind(resources, *k8s.INFERENCE_SERVICE):
        predictor = k8s.get(isvc.props, "spec", "predictor")
        serving = [c for n, c in k8s.containers(predictor) if not n.startswith("initContainers")]
        if k8s.is_map(predictor) and not any(requires_api_key(c) for c in serving):
            yield (
                f"{isvc.label}: the predictor's server requires no API key ({VLLM_KEY_ENV} or {VLLM_KEY_FLAG}); any "
                "pod that reaches it is served past the gateway's keys and quotas",
                isvc.urn,
            )
    keyed = _keyed_backends(resources)
    for backend in of_kind(resources, *AI_SERVICE_BACKEND):
        if (backend.namespace, backend.k8s_name) not in keyed:
            yield (
                f"{backend.label}: no BackendSecurityPolicy of type APIKey targets it, so the gateway sends no "
                "predictor key (the predictors refuse every request, or serve anyone if their key is dropped too)",
                backend.urn,
            )


backend_keys = stack_policy(
    name="predictors-accept-only-the-gateway-key",
    description=(
        "Every predictor's vLLM server requires an API key (VLLM_API_KEY / --api-key), and every AIServiceBackend "
        "has an APIKey BackendSecurityPolicy that supplies it: a second lock behind the NetworkPolicies, held by the "
        "gateway alone."
    ),
    remediation=(
        "Keep the VLLM_API_KEY secret reference of components/serving/objects.py and the per-backend "
        "BackendSecurityPolicy of components/gateway/ (type APIKey, secretRef to the predictor key)."
    ),
    check=_check_backend_keys,
)


# --- TLS on the internet ------------------------------------------------------------------------


def _is_load_balancer(subject: Subject) -> bool:
    return subject.gk == SERVICE and k8s.get(subject.props, "spec", "type", unknown=None) == "LoadBalancer"


def _check_public_tls(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if not _is_load_balancer(subject):
        return
    annotations = k8s.get(subject.props, "metadata", "annotations", unknown=None)
    annotations = annotations if k8s.is_map(annotations) else {}
    # The AWS Load Balancer Controller and EKS Auto Mode make an NLB internal unless this says
    # internet-facing (LBC docs, "Service annotations": aws-load-balancer-scheme, default internal).
    if k8s.get(annotations, f"{LB_ANNOTATION}-scheme", unknown=None) != "internet-facing":
        return
    certificate = k8s.get(annotations, f"{LB_ANNOTATION}-ssl-cert", unknown="unknown")
    ports = k8s.known_items(subject.props, "spec", "ports")
    if not certificate:
        yield f"{subject.label}: an internet-facing load balancer without a TLS certificate (ssl-cert) sends API keys and prompts in clear"
        return
    # ssl-ports lists the TLS listeners (names or numbers); unset, every port is TLS.
    tls_ports = k8s.get(annotations, f"{LB_ANNOTATION}-ssl-ports", unknown="*")
    wanted = {p.strip() for p in str(tls_ports or "*").split(",")}
    if "*" in wanted:
        return
    plain = [
        f"{k8s.get(p, 'port')}"
        for p in ports
        if str(k8s.get(p, "name", unknown="")) not in wanted and str(int(k8s.get(p, "port", default=0))) not in wanted
    ]
    if plain:
        yield f"{subject.label}: internet-facing port(s) {plain} are not in ssl-ports and carry traffic in clear"


public_load_balancers_tls = resource_policy(
    name="internet-facing-load-balancers-terminate-tls",
    description=(
        "A LoadBalancer Service with aws-load-balancer-scheme internet-facing terminates TLS on every port "
        "(aws-load-balancer-ssl-cert, ssl-ports): API keys and prompts must not cross the internet in clear."
    ),
    remediation=(
        "Set gateway.tlsCertificateArn (an ACM certificate) whenever gateway.scheme is internet-facing; the settings "
        "refuse one without the other, and components/gateway/objects.py then listens on 443 with TLS."
    ),
    check=_check_public_tls,
)

# --- the rate-limit store is authenticated ------------------------------------------------------

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
GATEWAY_CHART = "gateway-helm"
# Redis accepts every command without AUTH unless `requirepass` is set (redis.conf, "SECURITY"); the
# platform's start script sets it from REDIS_PASSWORD. The rate-limit service authenticates with
# REDIS_AUTH / REDIS_SENTINEL_AUTH (envoyproxy/ratelimit src/settings/settings.go).
STORE_ENV = "REDIS_PASSWORD"
CLIENT_ENV = ("REDIS_AUTH", "REDIS_SENTINEL_AUTH")


def _secret_env(container: Any) -> set[str]:
    return {
        str(k8s.get(e, "name", unknown=""))
        for e in k8s.known_items(container, "env")
        if k8s.is_set(e, "valueFrom", "secretKeyRef", "name")
    }


# redis-cli takes the password from REDISCLI_AUTH; `-a`/`--pass` put it on the command line, where
# every process that may read /proc/<pid>/cmdline sees it (redis-cli.c: "Warning: Using a password with
# '-a' or '-u' option on the command line interface may not be safe").
PASSWORD_ON_ARGV = re.compile(r"redis-cli\b[^\n;|&]*?\s(-a|--pass)(\s|=)")


def _password_on_argv(subjects: list[Subject]) -> Iterator[tuple[str, str | None]]:
    for subject in subjects:
        texts: list[str] = []
        if subject.gk == ("", "ConfigMap"):
            data = k8s.get(subject.props, "data", unknown=None)
            texts += [str(data[k]) for k in data] if k8s.is_map(data) else []
        for _, pod_spec in platform_pod_specs(subject):
            for _, container in k8s.containers(pod_spec):
                for probe in ("readinessProbe", "livenessProbe", "startupProbe", None):
                    where = container if probe is None else k8s.get(container, probe, "exec", unknown=None)
                    texts.append(" ".join(str(a) for a in k8s.known_items(where, "command")))
                texts.append(" ".join(str(a) for a in k8s.known_items(container, "args")))
        if any(PASSWORD_ON_ARGV.search(t) for t in texts):
            yield (
                f"{subject.label}: runs redis-cli with the password on its command line (-a/--pass); it belongs "
                "in REDISCLI_AUTH",
                subject.urn,
            )


def _check_store_auth(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    subjects = [subject_of(r) for r in resources]
    yield from _password_on_argv(subjects)
    for store in (s for s in subjects if s.gk == ("apps", "StatefulSet")):
        for where, pod_spec in platform_pod_specs(store):
            for name, container in k8s.containers(pod_spec):
                image = str(k8s.get(container, "image", unknown=""))
                if "redis" in image.rsplit("/", 1)[-1] and STORE_ENV not in _secret_env(container):
                    yield (
                        f"{store.label}: {where}.{name} runs Redis without {STORE_ENV} from a Secret; it would "
                        "accept every command without a password",
                        store.urn,
                    )
    for release in (s for s in subjects if s.resource_type == HELM_RELEASE):
        if not str(k8s.get(release.props, "chart", default="")).endswith("/" + GATEWAY_CHART):
            continue
        envoy_gateway = k8s.get(release.props, "values", "config", "envoyGateway", unknown=None)
        if k8s.get(envoy_gateway, "rateLimit", "backend", "type", unknown=None) != "Redis":
            continue
        container = k8s.get(envoy_gateway, "provider", "kubernetes", "rateLimitDeployment", "container", unknown=None)
        missing = [e for e in CLIENT_ENV if e not in _secret_env(container)]
        if missing:
            yield (
                f"{release.label}: the rate-limit service gets no {missing} from a Secret; it cannot authenticate "
                "to the store, so every limit fails open (or the store runs without a password)",
                release.urn,
            )


store_authenticated = stack_policy(
    name="rate-limit-store-authenticated",
    description=(
        "The rate-limit store (Redis and its Sentinels) requires a password from a Secret, and Envoy Gateway's "
        "rate-limit service authenticates with it: an open store lets any pod that reaches it reset or exhaust "
        "every client's quota. No redis-cli gets the password on its command line (REDISCLI_AUTH instead)."
    ),
    remediation=(
        "Keep REDIS_PASSWORD on the store's containers (components/gateway/store.py) and REDIS_AUTH / "
        "REDIS_SENTINEL_AUTH in the gateway chart's rateLimitDeployment.container.env, both from ratelimit-redis-auth."
    ),
    check=_check_store_auth,
)

# --- token budgets charge what the route records ------------------------------------------------

AI_ROUTE = (AI_API, "AIGatewayRoute")
AI_GATEWAY_METADATA = "io.envoy.ai_gateway"


def _cost_keys(limits: Subject) -> set[str]:
    """Metadata keys the rate-limit rules charge a response by (`cost.response.from: Metadata`)."""
    return {
        str(k8s.get(rule, "cost", "response", "metadata", "key"))
        for rule in k8s.items(limits.props, "spec", "rateLimit", "global", "rules")
        if k8s.get(rule, "cost", "response", "from") == "Metadata"
        and k8s.get(rule, "cost", "response", "metadata", "namespace") == AI_GATEWAY_METADATA
    }


def _check_token_costs(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    routes = of_kind(resources, *AI_ROUTE)
    for limits in of_kind(resources, *TRAFFIC_POLICY):
        wanted = _cost_keys(limits)
        if not wanted:
            continue
        # The AI gateway writes each llmRequestCosts entry's token count under its metadataKey in
        # io.envoy.ai_gateway (AI Gateway docs, "Usage-based Rate Limiting"); a key no route
        # records is charged nothing.
        recorded = {
            str(k8s.get(cost, "metadataKey"))
            for route in routes
            if route.namespace == limits.namespace
            for cost in k8s.items(route.props, "spec", "llmRequestCosts")
        }
        missing = sorted(wanted - recorded)
        if missing:
            yield (
                f"{limits.label}: token budgets charge metadata {missing}, which no AIGatewayRoute in "
                f"{limits.namespace} records in llmRequestCosts; every response would cost 0 tokens",
                limits.urn,
            )


token_costs = stack_policy(
    name="token-budgets-charge-recorded-costs",
    description=(
        "Every token budget (a rate-limit rule charging the response by io.envoy.ai_gateway metadata) reads a key "
        "an AIGatewayRoute records in llmRequestCosts: otherwise the budget never decreases."
    ),
    remediation=(
        "Keep the InputToken/OutputToken/TotalToken llmRequestCosts of the AIGatewayRoute in components/gateway/ "
        "with the metadata keys the BackendTrafficPolicy's token rules charge."
    ),
    check=_check_token_costs,
)

# --- streamed completions report their usage -------------------------------------------------------

# vLLM reports usage on a streamed response only when the request asks (stream_options.include_usage)
# unless the server forces it: `--enable-force-include-usage` (vllm/entrypoints/openai/cli_args.py,
# enable_force_include_usage); AI Gateway v1.1 forces stream usage for chat completions only, and a
# response without usage is charged 0 tokens.
FORCE_USAGE_FLAG = "--enable-force-include-usage"


def _forces_usage(container: Mapping[str, Any]) -> bool:
    """The last of --enable-force-include-usage / --no-enable-force-include-usage wins (argparse)."""
    args = [str(a) for a in (*k8s.known_items(container, "command"), *k8s.known_items(container, "args"))]
    flags = [a for a in args if a.split("=", 1)[0] in (FORCE_USAGE_FLAG, "--no-" + FORCE_USAGE_FLAG[2:])]
    return bool(flags) and flags[-1].split("=", 1)[0] == FORCE_USAGE_FLAG


def _check_stream_usage(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    if not any(_cost_keys(limits) for limits in of_kind(resources, *TRAFFIC_POLICY)):
        return
    for isvc in of_kind(resources, *k8s.INFERENCE_SERVICE):
        predictor = k8s.get(isvc.props, "spec", "predictor")
        servers = [
            c for n, c in k8s.containers(predictor) if not n.startswith("initContainers") and requires_api_key(c)
        ]
        if servers and not any(_forces_usage(c) for c in servers):
            yield (
                f"{isvc.label}: vLLM runs without {FORCE_USAGE_FLAG}; a streamed /v1/completions reports no usage "
                "and is charged 0 tokens against the client's budget",
                isvc.urn,
            )


stream_usage = stack_policy(
    name="token-budgets-see-streamed-usage",
    description=(
        "Where token budgets are charged, every predictor's vLLM forces usage into every response "
        f"({FORCE_USAGE_FLAG}): otherwise a streamed /v1/completions costs nothing."
    ),
    remediation=(
        "Keep the flag components/serving/objects.py adds to every predictor (the settings refuse extraArgs that "
        "set or negate it)."
    ),
    check=_check_stream_usage,
)

# --- the gateway terminates TLS, and the load balancer admits named ranges -------------------------

GATEWAY = ("gateway.networking.k8s.io", "Gateway")
TLS_PROTOCOLS = {"HTTPS", "TLS"}
OWNING_GATEWAY = "gateway.envoyproxy.io/owning-gateway-name"


def _nlb_terminates_tls(resources: list[Any], gateway: Subject) -> bool:
    """A LoadBalancer Service in front of this gateway's proxies that terminates TLS with an ACM
    certificate on every port (aws-load-balancer-ssl-cert; ssl-ports unset means all)."""
    for service in of_kind(resources, *SERVICE):
        selector = k8s.get(service.props, "spec", "selector", unknown=None)
        if not k8s.is_map(selector) or k8s.get(selector, OWNING_GATEWAY, unknown=None) != gateway.k8s_name:
            continue
        annotations = k8s.get(service.props, "metadata", "annotations", unknown=None)
        annotations = annotations if k8s.is_map(annotations) else {}
        if k8s.get(annotations, f"{LB_ANNOTATION}-ssl-cert", unknown="unknown") and not k8s.get(
            annotations, f"{LB_ANNOTATION}-ssl-ports", unknown=None
        ):
            return True
    return False


def _check_gateway_tls(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    for gateway in of_kind(resources, *GATEWAY):
        if _nlb_terminates_tls(resources, gateway):
            continue
        for listener in k8s.items(gateway.props, "spec", "listeners"):
            protocol = str(k8s.get(listener, "protocol", unknown="?"))
            refs = k8s.items(listener, "tls", "certificateRefs")
            if protocol not in TLS_PROTOCOLS and protocol != "?":
                yield (
                    f"{gateway.label}: listener {k8s.get(listener, 'name')} speaks {protocol} and no load balancer in "
                    "front terminates TLS; API keys and prompts cross the VPC in clear",
                    gateway.urn,
                )
            elif protocol == "HTTPS" and not refs:
                yield (
                    f"{gateway.label}: HTTPS listener {k8s.get(listener, 'name')} has no certificateRefs; Envoy "
                    "refuses the listener (no certificate to terminate with)",
                    gateway.urn,
                )


gateway_tls = stack_policy(
    name="gateway-terminates-tls",
    description=(
        "Every listener of a Gateway serves HTTPS (or TLS) with a certificate, unless the NLB in front "
        "terminates TLS with an ACM certificate on every port: keys and prompts never cross the VPC in clear, "
        "internal or not."
    ),
    remediation=(
        "Keep gateway.clusterTls (the default: the gateway's own CA through cert-manager, components/gateway/tls.py) "
        "or set gateway.tlsCertificateArn; the settings refuse plain HTTP in prod."
    ),
    check=_check_gateway_tls,
)


def _check_source_ranges(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if not _is_load_balancer(subject):
        return
    ranges = k8s.get(subject.props, "spec", "loadBalancerSourceRanges", unknown=["?"])
    ranges = [str(r) for r in ranges] if k8s.is_list(ranges) else []
    if not ranges:
        yield (
            f"{subject.label}: no loadBalancerSourceRanges; the load balancer admits every address that routes to it"
        )
    elif any(r.endswith("/0") for r in ranges):
        yield f"{subject.label}: loadBalancerSourceRanges {ranges} include every address"


source_ranges = resource_policy(
    name="load-balancers-admit-named-ranges",
    description=(
        "A LoadBalancer Service lists the ranges it admits (loadBalancerSourceRanges, which the AWS Load Balancer "
        "Controller and EKS Auto Mode turn into the NLB's security-group rules), none of them /0."
    ),
    remediation=(
        "Set gateway.sourceRanges (the settings refuse an empty list in prod); unset, components/gateway/objects.py "
        "admits the stack's VPC CIDR only."
    ),
    check=_check_source_ranges,
)

POLICIES = [
    client_identity,
    backend_keys,
    public_load_balancers_tls,
    store_authenticated,
    token_costs,
    stream_usage,
    gateway_tls,
    source_ranges,
]
