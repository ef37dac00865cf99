"""The gateway's Kubernetes objects and chart values, as pure functions of the settings
(tests and policies read exactly what the component applies)."""

from __future__ import annotations

from typing import Any

from contract.settings.gateway import ClientSettings, GatewaySettings
from contract.settings.models import ModelSettings

ENVOY_GATEWAY_CHART = "oci://docker.io/envoyproxy/gateway-helm"
ENVOY_GATEWAY_VERSION = "v1.9.0"
ENVOY_GATEWAY_NAMESPACE = "envoy-gateway-system"
AI_GATEWAY_CRDS_CHART = "oci://docker.io/envoyproxy/ai-gateway-crds-helm"
AI_GATEWAY_CHART = "oci://docker.io/envoyproxy/ai-gateway-helm"
AI_GATEWAY_VERSION = "v1.1.0"
AI_GATEWAY_NAMESPACE = "envoy-ai-gateway-system"
CONTROLLER_NAME = "gateway.envoyproxy.io/gatewayclass-controller"

GATEWAY_API = "gateway.networking.k8s.io"
ENVOY_API = "gateway.envoyproxy.io"
AI_API = "aigateway.envoyproxy.io/v1beta1"

GATEWAY_NAME = "inference"
ENVOY_PROXY_NAME = "inference-proxy"
ROUTE_NAME = "inference"
API_KEYS_SECRET = "client-api-keys"
# Above 1023, so Envoy listens on the same port without privileges (no port shifting).
LISTENER_PORT = 8080
# The AI gateway puts the request body's `model` here before route selection.
MODEL_HEADER = "x-ai-eg-model"
# Set by API-key auth to the authenticated client's id; it keys the rate limits.
CLIENT_ID_HEADER = "x-client-id"
# Where the AI gateway records each response's token counts (Envoy dynamic metadata).
COST_NAMESPACE = "io.envoy.ai_gateway"
COSTS = {"llm_input_token": "InputToken", "llm_output_token": "OutputToken", "llm_total_token": "TotalToken"}
TOKEN_BUDGET_KEY = "llm_total_token"
REDIS_NAME = "ratelimit-redis"
REDIS_PORT = 6379
ZONE = "topology.kubernetes.io/zone"
# Labels Envoy Gateway puts on its rate-limit service pods.
RATE_LIMIT_POD_LABELS = {"app.kubernetes.io/name": "envoy-ratelimit", "app.kubernetes.io/component": "ratelimit"}


def _ref(kind: str, name: str, group: str = GATEWAY_API) -> dict[str, str]:
    return {"group": group, "kind": kind, "name": name}


def gateway_ref() -> dict[str, str]:
    return _ref("Gateway", GATEWAY_NAME)


def zone_spread(labels: dict[str, str], strict: bool) -> list[dict[str, Any]]:
    return [{
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule" if strict else "ScheduleAnyway",
        "labelSelector": {"matchLabels": labels},
    }]


def redis_url(gw: GatewaySettings) -> str:
    return f"{REDIS_NAME}.{gw.namespace}.svc.cluster.local:{REDIS_PORT}"


def envoy_gateway_values(gw: GatewaySettings) -> dict[str, Any]:
    """Envoy Gateway as the AI gateway install requires: Backend API and EnvoyPatchPolicy on,
    the AI gateway controller as extension server, global rate limiting on Redis."""
    ha = gw.replicas > 1
    return {
        "deployment": {"replicas": 2 if ha else 1},
        # the chart's own PDB for its controller (rendered only when minAvailable >= 1)
        "podDisruptionBudget": {"minAvailable": 1 if ha else 0},
        "config": {
            "envoyGateway": {
                "gateway": {"controllerName": CONTROLLER_NAME},
                "logging": {"level": {"default": "info"}},
                "provider": {
                    "type": "Kubernetes",
                    "kubernetes": {
                        "rateLimitDeployment": {
                            "replicas": gw.rate_limit.service_replicas,
                            "pod": {"topologySpreadConstraints": zone_spread(RATE_LIMIT_POD_LABELS, strict=False)},
                        }
                    },
                },
                "extensionApis": {"enableEnvoyPatchPolicy": True, "enableBackend": True},
                "extensionManager": {
                    "hooks": {
                        "xdsTranslator": {
                            "translation": {kind: {"includeAll": True} for kind in ("listener", "route", "cluster", "secret")},
                            "post": ["Translation", "Cluster", "Route"],
                        }
                    },
                    "service": {"fqdn": {"hostname": f"ai-gateway-controller.{AI_GATEWAY_NAMESPACE}.svc.cluster.local",
                                         "port": 1063}},
                },
                "rateLimit": {
                    "backend": {"type": "Redis", "redis": {"url": redis_url(gw)}},
                    # See RateLimitSettings.fail_closed: prod fails open (Redis is one replica).
                    "failClosed": gw.rate_limit.fail_closed,
                },
            }
        },
    }


def ai_gateway_values(gw: GatewaySettings) -> dict[str, Any]:
    return {"controller": {"replicaCount": 2 if gw.replicas > 1 else 1, "leaderElection": {"enabled": True}}}


def envoy_proxy(gw: GatewaySettings) -> dict[str, Any]:
    """The data plane: replicas spread over zones, a PDB when there is more than one, and a
    drain long enough for the longest request before an Envoy pod exits (Envoy Gateway sets
    the pod's grace period to drainTimeout + 300 s)."""
    ha = gw.replicas > 1
    drain = gw.timeouts.request_seconds + 15
    kubernetes: dict[str, Any] = {
        "envoyDeployment": {
            "replicas": gw.replicas,
            "pod": {"topologySpreadConstraints": zone_spread(
                {"gateway.envoyproxy.io/owning-gateway-name": GATEWAY_NAME}, strict=ha)},
        },
        # The NLB is a Service of this program (see `load_balancer_service`), so its hostname
        # is a stack output; Envoy Gateway's own Service stays cluster-internal.
        "envoyService": {"type": "ClusterIP"},
    }
    if ha:
        kubernetes["envoyPDB"] = {"minAvailable": gw.replicas - 1}
    return {
        "apiVersion": f"{ENVOY_API}/v1alpha1",
        "kind": "EnvoyProxy",
        "metadata": {"name": ENVOY_PROXY_NAME, "namespace": gw.namespace},
        "spec": {
            "provider": {"type": "Kubernetes", "kubernetes": kubernetes},
            "shutdown": {"drainTimeout": f"{drain}s", "minDrainDuration": "15s"},
        },
    }


def gateway_class() -> dict[str, Any]:
    return {
        "apiVersion": f"{GATEWAY_API}/v1",
        "kind": "GatewayClass",
        "metadata": {"name": GATEWAY_NAME},
        "spec": {"controllerName": CONTROLLER_NAME},
    }


def gateway(gw: GatewaySettings) -> dict[str, Any]:
    return {
        "apiVersion": f"{GATEWAY_API}/v1",
        "kind": "Gateway",
        "metadata": {"name": GATEWAY_NAME, "namespace": gw.namespace},
        "spec": {
            "gatewayClassName": GATEWAY_NAME,
            # Only routes in this namespace (the platform's) may attach.
            "listeners": [{"name": "http", "protocol": "HTTP", "port": LISTENER_PORT,
                           "allowedRoutes": {"namespaces": {"from": "Same"}}}],
            "infrastructure": {"parametersRef": _ref("EnvoyProxy", ENVOY_PROXY_NAME, ENVOY_API)},
        },
    }


def envoy_pod_selector(gw: GatewaySettings) -> dict[str, str]:
    """Labels Envoy Gateway puts on the proxy pods of this Gateway."""
    return {
        "app.kubernetes.io/name": "envoy",
        "app.kubernetes.io/component": "proxy",
        "gateway.envoyproxy.io/owning-gateway-name": GATEWAY_NAME,
        "gateway.envoyproxy.io/owning-gateway-namespace": gw.namespace,
    }


def load_balancer_service(gw: GatewaySettings, auto_mode: bool) -> dict[str, Any]:
    """The NLB in front of the Envoy pods (IP targets, cross-zone), TLS on 443 when an ACM
    certificate is configured. Auto Mode provisions it itself; otherwise the AWS Load Balancer
    Controller must be installed."""
    prefix = "service.beta.kubernetes.io/aws-load-balancer"
    annotations = {
        f"{prefix}-scheme": gw.scheme,
        f"{prefix}-nlb-target-type": "ip",
        f"{prefix}-attributes": "load_balancing.cross_zone.enabled=true",
    }
    port = 80
    if gw.tls_certificate_arn:
        annotations |= {f"{prefix}-ssl-cert": gw.tls_certificate_arn, f"{prefix}-ssl-ports": "443"}
        port = 443
    spec: dict[str, Any] = {
        "type": "LoadBalancer",
        "loadBalancerClass": "eks.amazonaws.com/nlb" if auto_mode else "service.k8s.aws/nlb",
        "selector": envoy_pod_selector(gw),
        "ports": [{"name": gw.url_scheme, "port": port, "targetPort": LISTENER_PORT, "protocol": "TCP"}],
    }
    if gw.source_ranges:
        spec["loadBalancerSourceRanges"] = list(gw.source_ranges)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{GATEWAY_NAME}-gateway", "namespace": ENVOY_GATEWAY_NAMESPACE,
                     "annotations": annotations},
        "spec": spec,
    }


def backend_name(model: ModelSettings) -> str:
    return model.name


def backend(model: ModelSettings, gw: GatewaySettings, service_host: str, service_port: int) -> dict[str, Any]:
    """The predictor Service as an Envoy Gateway Backend."""
    return {
        "apiVersion": f"{ENVOY_API}/v1alpha1",
        "kind": "Backend",
        "metadata": {"name": backend_name(model), "namespace": gw.namespace},
        "spec": {"endpoints": [{"fqdn": {"hostname": service_host, "port": service_port}}]},
    }


def ai_service_backend(model: ModelSettings, gw: GatewaySettings) -> dict[str, Any]:
    return {
        "apiVersion": AI_API,
        "kind": "AIServiceBackend",
        "metadata": {"name": backend_name(model), "namespace": gw.namespace},
        "spec": {"schema": {"name": "OpenAI"}, "backendRef": _ref("Backend", backend_name(model), ENVOY_API)},
    }


def route_rule(model: ModelSettings, gw: GatewaySettings) -> dict[str, Any]:
    t = gw.timeouts
    return {
        "name": model.name,
        "matches": [{"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": model.name}]}],
        "backendRefs": [{"name": backend_name(model)}],
        # The request deadline the predictors' grace period is sized for.
        "timeouts": {"request": f"{t.request_seconds}s"},
        "streamIdleTimeout": f"{t.stream_idle_seconds}s",
    }


def ai_gateway_route(models: list[ModelSettings], gw: GatewaySettings) -> dict[str, Any]:
    return {
        "apiVersion": AI_API,
        "kind": "AIGatewayRoute",
        "metadata": {"name": ROUTE_NAME, "namespace": gw.namespace},
        "spec": {
            "parentRefs": [gateway_ref()],
            "rules": [route_rule(m, gw) for m in models],
            # Token counts of every response, as dynamic metadata the rate limiter charges.
            "llmRequestCosts": [{"metadataKey": key, "type": kind} for key, kind in COSTS.items()],
        },
    }


def security_policy(gw: GatewaySettings) -> dict[str, Any]:
    """API-key auth on the Gateway: every route on it, whatever its name, requires a key."""
    return {
        "apiVersion": f"{ENVOY_API}/v1alpha1",
        "kind": "SecurityPolicy",
        "metadata": {"name": "client-api-keys", "namespace": gw.namespace},
        "spec": {
            "targetRefs": [gateway_ref()],
            "apiKeyAuth": {
                "credentialRefs": [{"group": "", "kind": "Secret", "name": API_KEYS_SECRET}],
                # OpenAI SDKs send `Authorization: Bearer <key>`; Envoy strips the `Bearer ` prefix.
                "extractFrom": [{"headers": ["authorization"]}],
                "forwardClientIDHeader": CLIENT_ID_HEADER,
                "sanitize": True,
            },
        },
    }


def _client_selector(client: ClientSettings) -> list[dict[str, Any]]:
    return [{"headers": [{"name": CLIENT_ID_HEADER, "type": "Exact", "value": client.name}]}]


def rate_limit_rules(client: ClientSettings) -> list[dict[str, Any]]:
    """Two shared buckets per client, across every model: requests per window, and total
    tokens per window (checked before a request, charged with its token count after it)."""
    requests = {
        "clientSelectors": _client_selector(client),
        "limit": {"requests": client.requests.limit, "unit": client.requests.unit},
        "shared": True,
    }
    tokens = {
        "clientSelectors": _client_selector(client),
        "limit": {"requests": client.tokens.limit, "unit": client.tokens.unit},
        "cost": {
            "request": {"from": "Number", "number": 0},
            "response": {"from": "Metadata", "metadata": {"namespace": COST_NAMESPACE, "key": TOKEN_BUDGET_KEY}},
        },
        "shared": True,
    }
    return [requests, tokens]


def backend_traffic_policy(gw: GatewaySettings) -> dict[str, Any]:
    return {
        "apiVersion": f"{ENVOY_API}/v1alpha1",
        "kind": "BackendTrafficPolicy",
        "metadata": {"name": "client-limits", "namespace": gw.namespace},
        "spec": {
            "targetRefs": [gateway_ref()],
            "rateLimit": {
                "type": "Global",
                "global": {"rules": [rule for c in gw.clients for rule in rate_limit_rules(c)]},
            },
        },
    }


def client_traffic_policy(gw: GatewaySettings) -> dict[str, Any]:
    t = gw.timeouts
    return {
        "apiVersion": f"{ENVOY_API}/v1alpha1",
        "kind": "ClientTrafficPolicy",
        "metadata": {"name": "client-connections", "namespace": gw.namespace},
        "spec": {
            "targetRefs": [gateway_ref()],
            "timeout": {"http": {"idleTimeout": f"{t.connection_idle_seconds}s",
                                 "streamIdleTimeout": f"{t.stream_idle_seconds}s"}},
            "connection": {"bufferLimit": gw.buffer_limit},
        },
    }


def redis_labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": REDIS_NAME}


def redis_deployment(gw: GatewaySettings) -> dict[str, Any]:
    """Rate-limit counters only: no persistence (a restart resets the windows), bounded memory.
    One replica; the rate-limit filter fails open without it (see RateLimitSettings)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": REDIS_NAME, "namespace": gw.namespace, "labels": redis_labels()},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": redis_labels()},
            "template": {
                "metadata": {"labels": redis_labels()},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 999, "runAsGroup": 999,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "redis",
                        "image": gw.rate_limit.redis_image,
                        "args": ["--save", "", "--appendonly", "no", "--maxmemory", "200mb",
                                 "--maxmemory-policy", "volatile-ttl"],
                        "ports": [{"name": "redis", "containerPort": REDIS_PORT, "protocol": "TCP"}],
                        "readinessProbe": {"exec": {"command": ["redis-cli", "ping"]}, "periodSeconds": 5},
                        "livenessProbe": {"tcpSocket": {"port": "redis"}, "periodSeconds": 10},
                        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                                      "limits": {"memory": "256Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    }],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                },
            },
        },
    }


def redis_network_policy(gw: GatewaySettings) -> dict[str, Any]:
    """Only Envoy Gateway's rate-limit service may reach Redis (it holds every client's budget)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": REDIS_NAME, "namespace": gw.namespace},
        "spec": {
            "podSelector": {"matchLabels": redis_labels()},
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [{
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ENVOY_GATEWAY_NAMESPACE}},
                    "podSelector": {"matchLabels": RATE_LIMIT_POD_LABELS},
                }],
                "ports": [{"protocol": "TCP", "port": REDIS_PORT}],
            }],
        },
    }


def redis_service(gw: GatewaySettings) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": REDIS_NAME, "namespace": gw.namespace, "labels": redis_labels()},
        "spec": {"selector": redis_labels(),
                 "ports": [{"name": "redis", "port": REDIS_PORT, "targetPort": "redis", "protocol": "TCP"}]},
    }
