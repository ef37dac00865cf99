"""The gateway's Kubernetes objects and chart values, as pure functions of the settings
(tests and policies read exactly what the component applies)."""

from __future__ import annotations

from typing import Any

from contract.names import PART_OF
from contract.settings.gateway import ClientSettings, GatewaySettings
from contract.settings.models import ModelSettings

from ..isolation import namespace_peer
from .store import RATE_LIMIT_NAMESPACE, RATE_LIMIT_POD_LABELS, ZONE, rate_limit_env, sentinel_url
from .tls import SERVING_SECRET

ENVOY_GATEWAY_CHART = "oci://docker.io/envoyproxy/gateway-helm"
ENVOY_GATEWAY_VERSION = "v1.9.0"
ENVOY_GATEWAY_NAMESPACE = RATE_LIMIT_NAMESPACE
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
# Envoy's HTTPS listener when it terminates TLS itself (gateway.clusterTls).
TLS_LISTENER_PORT = 8443
# The AI gateway puts the request body's `model` here before route selection.
MODEL_HEADER = "x-ai-eg-model"
# Set by API-key auth to the authenticated client's id; it keys the rate limits.
CLIENT_ID_HEADER = "x-client-id"
# Where the AI gateway records each response's token counts (Envoy dynamic metadata).
COST_NAMESPACE = "io.envoy.ai_gateway"
COSTS = {"llm_input_token": "InputToken", "llm_output_token": "OutputToken", "llm_total_token": "TotalToken"}
TOKEN_BUDGET_KEY = "llm_total_token"
# The Secret (in the gateway namespace) whose `apiKey` the AI gateway sends to every predictor as
# `Authorization: Bearer <key>` (BackendSecurityPolicy type APIKey: ai-gateway v1.1.0
# internal/backendauth/api_key.go; the key name is `apiKeyInSecret` of internal/controller).
BACKEND_KEY_SECRET = "predictor-api-key"
BACKEND_KEY_FIELD = "apiKey"


def _ref(kind: str, name: str, group: str = GATEWAY_API) -> dict[str, str]:
    return {"group": group, "kind": kind, "name": name}


def gateway_ref() -> dict[str, str]:
    return _ref("Gateway", GATEWAY_NAME)


def zone_spread(labels: dict[str, str], strict: bool) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule" if strict else "ScheduleAnyway",
            "labelSelector": {"matchLabels": labels},
        }
    ]


# What a model routed by the endpoint picker sends its requests to (Gateway API Inference
# Extension v1.0.2, the release Envoy AI Gateway v1.1.0 builds against).
INFERENCE_API = "inference.networking.k8s.io"
INFERENCE_POOL_KIND = "InferencePool"
# Envoy Gateway resolves InferencePool backendRefs through the extension server only when told to
# (ai-gateway v1.1.0 examples/inference-pool/envoy-gateway-values-addon.yaml, the guide
# "AIGatewayRoute + InferencePool", step 2).
INFERENCE_POOL_BACKEND_RESOURCE = {"group": INFERENCE_API, "kind": INFERENCE_POOL_KIND, "version": "v1"}


def uses_inference_pools(models: list[ModelSettings]) -> bool:
    return any(m.serving.routing == "endpoint-picker" for m in models)


def envoy_gateway_values(gw: GatewaySettings, models: list[ModelSettings]) -> dict[str, Any]:
    """Envoy Gateway as the AI gateway install requires: Backend API and EnvoyPatchPolicy on,
    the AI gateway controller as extension server, global rate limiting on Redis through Sentinel;
    InferencePool backends when a model is routed by the endpoint picker."""
    ha = gw.replicas > 1
    values = {
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
                            "container": {"env": rate_limit_env()},
                        }
                    },
                },
                "extensionApis": {"enableEnvoyPatchPolicy": True, "enableBackend": True},
                "extensionManager": {
                    "hooks": {
                        "xdsTranslator": {
                            "translation": {
                                kind: {"includeAll": True} for kind in ("listener", "route", "cluster", "secret")
                            },
                            "post": ["Translation", "Cluster", "Route"],
                        }
                    },
                    "service": {
                        "fqdn": {
                            "hostname": f"ai-gateway-controller.{AI_GATEWAY_NAMESPACE}.svc.cluster.local",
                            "port": 1063,
                        }
                    },
                },
                "rateLimit": {
                    "backend": {"type": "Redis", "redis": {"url": sentinel_url(gw)}},
                    # See RateLimitSettings.fail_closed: prod fails open through a Sentinel failover.
                    "failClosed": gw.rate_limit.fail_closed,
                },
            }
        },
    }
    if uses_inference_pools(models):
        values["config"]["envoyGateway"]["extensionManager"]["backendResources"] = [INFERENCE_POOL_BACKEND_RESOURCE]
    return values


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
            "pod": {
                "topologySpreadConstraints": zone_spread(
                    {"gateway.envoyproxy.io/owning-gateway-name": GATEWAY_NAME}, strict=ha
                )
            },
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


def listener(gw: GatewaySettings) -> dict[str, Any]:
    """HTTP behind an NLB that terminates TLS (ACM) or, without TLS, plain; HTTPS with the
    gateway CA's certificate when Envoy terminates it (Gateway API Listener, tls.mode Terminate)."""
    same = {"namespaces": {"from": "Same"}}
    if gw.tls_mode == "cluster":
        return {
            "name": "https",
            "protocol": "HTTPS",
            "port": TLS_LISTENER_PORT,
            "tls": {"mode": "Terminate", "certificateRefs": [{"group": "", "kind": "Secret", "name": SERVING_SECRET}]},
            "allowedRoutes": same,
        }
    return {"name": "http", "protocol": "HTTP", "port": LISTENER_PORT, "allowedRoutes": same}


def gateway(gw: GatewaySettings) -> dict[str, Any]:
    return {
        "apiVersion": f"{GATEWAY_API}/v1",
        "kind": "Gateway",
        "metadata": {"name": GATEWAY_NAME, "namespace": gw.namespace},
        "spec": {
            "gatewayClassName": GATEWAY_NAME,
            # Only routes in this namespace (the platform's) may attach.
            "listeners": [listener(gw)],
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


def load_balancer_service(gw: GatewaySettings, auto_mode: bool, vpc_cidr: str) -> dict[str, Any]:
    """The NLB in front of the Envoy pods (IP targets, cross-zone), TLS on 443: terminated by the
    NLB with an ACM certificate, or passed through to Envoy's HTTPS listener (gateway.clusterTls).
    Auto Mode provisions it itself; otherwise the AWS Load Balancer Controller must be installed."""
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
    elif gw.tls_mode == "cluster":
        port = 443  # TCP passthrough: Envoy terminates TLS
    spec: dict[str, Any] = {
        "type": "LoadBalancer",
        "loadBalancerClass": "eks.amazonaws.com/nlb" if auto_mode else "service.k8s.aws/nlb",
        "selector": envoy_pod_selector(gw),
        "ports": [{"name": gw.url_scheme, "port": port, "targetPort": listener(gw)["port"], "protocol": "TCP"}],
    }
    # Unset, the NLB would admit any address that can route to it (Kubernetes, "Service":
    # loadBalancerSourceRanges empty = no restriction); the stack's own VPC is the safe default.
    spec["loadBalancerSourceRanges"] = list(gw.source_ranges) or [vpc_cidr]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"{GATEWAY_NAME}-gateway",
            "namespace": ENVOY_GATEWAY_NAMESPACE,
            "annotations": annotations,
        },
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


def inference_pool_ref(pool: dict[str, str]) -> dict[str, str]:
    """An AIGatewayRoute backendRef to an InferencePool (api/v1beta1 AIGatewayRouteRuleBackendRef:
    group and kind together, the pool's namespace when it is not the route's)."""
    return {"group": INFERENCE_API, "kind": INFERENCE_POOL_KIND, "name": pool["name"], "namespace": pool["namespace"]}


def route_rule(model: ModelSettings, gw: GatewaySettings, pool: dict[str, str] | None = None) -> dict[str, Any]:
    """One model's rule: to its AIServiceBackend (least-request over the predictor Service), or to
    its InferencePool, whose endpoint picker chooses the pod (one pool per rule, never mixed)."""
    t = gw.timeouts
    return {
        "name": model.name,
        "matches": [{"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": model.name}]}],
        "backendRefs": [inference_pool_ref(pool) if pool else {"name": backend_name(model)}],
        # The request deadline the predictors' grace period is sized for.
        "timeouts": {"request": f"{t.request_seconds}s"},
        "streamIdleTimeout": f"{t.stream_idle_seconds}s",
    }


def ai_gateway_route(
    models: list[ModelSettings], gw: GatewaySettings, pools: dict[str, dict[str, str]] | None = None
) -> dict[str, Any]:
    """`pools`: model name -> its InferencePool (name, namespace), for models the endpoint picker routes."""
    pools = pools or {}
    return {
        "apiVersion": AI_API,
        "kind": "AIGatewayRoute",
        "metadata": {"name": ROUTE_NAME, "namespace": gw.namespace},
        "spec": {
            "parentRefs": [gateway_ref()],
            "rules": [route_rule(m, gw, pools.get(m.name)) for m in models],
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
            "timeout": {
                "http": {
                    "idleTimeout": f"{t.connection_idle_seconds}s",
                    "streamIdleTimeout": f"{t.stream_idle_seconds}s",
                }
            },
            "connection": {"bufferLimit": gw.buffer_limit},
        },
    }


def backend_security_policy(model: ModelSettings, gw: GatewaySettings) -> dict[str, Any]:
    """The AI gateway authenticates to the predictor with the key only it and the predictors hold,
    after the client's own key was checked and stripped (`sanitize`)."""
    return {
        "apiVersion": AI_API,
        "kind": "BackendSecurityPolicy",
        "metadata": {"name": f"{backend_name(model)}-key", "namespace": gw.namespace},
        "spec": {
            "targetRefs": [{"group": AI_API.split("/")[0], "kind": "AIServiceBackend", "name": backend_name(model)}],
            "type": "APIKey",
            "apiKey": {"secretRef": {"name": BACKEND_KEY_SECRET}},
        },
    }


def inference_pool_security_policy(model: ModelSettings, pool: dict[str, str], key_secret: str) -> dict[str, Any]:
    """The predictor key for requests through the pool: a BackendSecurityPolicy may target an
    InferencePool of its own namespace (api/v1beta1 backendsecurity_policy.go, targetRefs), and the
    controller looks it up there (internal/controller/gateway.go, getBSPForInferencePool); the key
    is the serving namespace's own copy (`apiKey` of `key_secret`)."""
    return {
        "apiVersion": AI_API,
        "kind": "BackendSecurityPolicy",
        "metadata": {"name": f"{pool['name']}-key", "namespace": pool["namespace"]},
        "spec": {
            "targetRefs": [{"group": INFERENCE_API, "kind": INFERENCE_POOL_KIND, "name": pool["name"]}],
            "type": "APIKey",
            "apiKey": {"secretRef": {"name": key_secret}},
        },
    }


def inference_pool_reference_grant(gw: GatewaySettings, namespace: str) -> dict[str, Any]:
    """Lets the route (in the gateway namespace) name pools in the serving namespace: the AI gateway
    checks AIGatewayRoute -> InferencePool (internal/controller/referencegrant.go), Envoy Gateway
    the HTTPRoute the AI gateway generates from it (Gateway API ReferenceGrant)."""
    return {
        "apiVersion": f"{GATEWAY_API}/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": f"{ROUTE_NAME}-inference-pools", "namespace": namespace, "labels": PART_OF},
        "spec": {
            "from": [
                {"group": AI_API.split("/")[0], "kind": "AIGatewayRoute", "namespace": gw.namespace},
                {"group": GATEWAY_API, "kind": "HTTPRoute", "namespace": gw.namespace},
            ],
            "to": [{"group": INFERENCE_API, "kind": INFERENCE_POOL_KIND}],
        },
    }


def envoy_peer(gw: GatewaySettings) -> dict[str, Any]:
    """The Envoy proxies of this Gateway, as a NetworkPolicy peer (Envoy Gateway runs them in
    its own namespace)."""
    return namespace_peer(ENVOY_GATEWAY_NAMESPACE, envoy_pod_selector(gw))
