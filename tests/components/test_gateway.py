"""Gateway: one authenticated, rate-limited OpenAI-compatible endpoint routing by model name;
asserted on what each stack registers and on the pure builders."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.gateway import store, tls
from components.gateway.coverage import dangling_targets, has_api_key_auth, has_rate_limit, uncovered
from components.gateway.objects import (
    AI_GATEWAY_CHART,
    AI_GATEWAY_CRDS_CHART,
    CLIENT_ID_HEADER,
    COST_NAMESPACE,
    ENVOY_GATEWAY_CHART,
    LISTENER_PORT,
    MODEL_HEADER,
    TLS_LISTENER_PORT,
    load_balancer_service,
)
from components.gateway.objects import gateway as gateway_manifest
from components.serving.objects import SERVICE_PORT
from contract import images, names
from contract.settings import SettingsError, parse
from contract.settings.gateway import GatewaySettings
from contract.settings.stack_file import load_stack
from tests.contract.test_settings import stack_raw, with_value
from tests.crd_rules import rule_violations
from tests.harness import ROOT, StackRun
from tests.k8s_schemas import is_core

RELEASE = "kubernetes:helm.sh/v3:Release"
SECRET = "1b47061264138c4ac30d75fd1eb44270"


def settings(stack: StackRun):
    return load_stack(stack.stack, ROOT)


def objects(stack: StackRun) -> list[dict[str, Any]]:
    return [r.inputs for r in stack.kubernetes_objects()]


def one(stack: StackRun, kind: str) -> dict[str, Any]:
    (obj,) = [o for o in objects(stack) if o["kind"] == kind]
    return obj


def by_name(stack: StackRun, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects(stack) if o["kind"] == kind}


def releases(stack: StackRun) -> dict[str, dict[str, Any]]:
    return {r.inputs["chart"]: r.inputs for r in stack.of_type(RELEASE)}


# Charts -----------------------------------------------------------------------------------


def test_envoy_gateway_and_ai_gateway_charts_are_pinned(stack: StackRun) -> None:
    charts = releases(stack)
    assert charts[ENVOY_GATEWAY_CHART]["version"] == "v1.9.0"
    assert charts[AI_GATEWAY_CRDS_CHART]["version"] == charts[AI_GATEWAY_CHART]["version"] == "v1.1.0"


def test_envoy_gateway_uses_the_ai_gateway_controller_as_extension_server(stack: StackRun) -> None:
    config = releases(stack)[ENVOY_GATEWAY_CHART]["values"]["config"]["envoyGateway"]
    assert config["extensionApis"] == {"enableEnvoyPatchPolicy": True, "enableBackend": True}
    service = config["extensionManager"]["service"]["fqdn"]
    assert service == {"hostname": "ai-gateway-controller.envoy-ai-gateway-system.svc.cluster.local", "port": 1063}
    assert config["extensionManager"]["hooks"]["xdsTranslator"]["post"] == ["Translation", "Cluster", "Route"]


def test_envoy_gateway_controller_is_highly_available_in_prod(stack: StackRun) -> None:
    values = releases(stack)[ENVOY_GATEWAY_CHART]["values"]
    ha = stack.stack == "prod"
    # chart keys as in gateway-helm's values.yaml: deployment.replicas, podDisruptionBudget.minAvailable
    assert values["deployment"]["replicas"] == (2 if ha else 1)
    assert values["podDisruptionBudget"]["minAvailable"] == (1 if ha else 0)
    assert releases(stack)[AI_GATEWAY_CHART]["values"]["controller"]["replicaCount"] == (2 if ha else 1)


def rate_limit_config(stack: StackRun) -> dict[str, Any]:
    return releases(stack)[ENVOY_GATEWAY_CHART]["values"]["config"]["envoyGateway"]


def test_rate_limit_service_reaches_every_sentinel_of_the_store(stack: StackRun) -> None:
    config = rate_limit_config(stack)
    master_set, *sentinels = config["rateLimit"]["backend"]["redis"]["url"].split(",")
    assert master_set == store.MASTER_SET
    redis = by_name(stack, "StatefulSet")[store.REDIS_NAME]
    replicas = settings(stack).gateway.rate_limit.redis_replicas
    assert redis["spec"]["replicas"] == replicas == len(sentinels)
    headless = by_name(stack, "Service")[redis["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
    for i, sentinel in enumerate(sentinels):
        host, port = sentinel.rsplit(":", 1)
        assert (
            host
            == f"{store.REDIS_NAME}-{i}.{headless['metadata']['name']}.{headless['metadata']['namespace']}.svc.cluster.local"
        )
        assert int(port) in [p["port"] for p in headless["spec"]["ports"]]


def test_rate_limit_service_runs_sentinel_mode_with_the_password_from_a_secret(stack: StackRun) -> None:
    env = {
        e["name"]: e
        for e in rate_limit_config(stack)["provider"]["kubernetes"]["rateLimitDeployment"]["container"]["env"]
    }
    assert env["REDIS_TYPE"]["value"] == "sentinel"
    secrets = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects(stack) if o["kind"] == "Secret"}
    for variable in ("REDIS_AUTH", "REDIS_SENTINEL_AUTH"):
        ref = env[variable]["valueFrom"]["secretKeyRef"]
        assert ref["key"] in secrets[("envoy-gateway-system", ref["name"])]["stringData"]
    # The chart values carry no password: only the Secret does, as a Pulumi secret.
    assert "not-a-real-password" not in str(rate_limit_config(stack))
    auth = [r for r in stack.of_kind("v1", "Secret") if r.inputs["metadata"]["name"] == store.AUTH_SECRET]
    assert len(auth) == 2 and all(r.secret_paths for r in auth)


def test_redis_and_sentinel_require_the_same_password(stack: StackRun) -> None:
    redis = by_name(stack, "StatefulSet")[store.REDIS_NAME]
    containers = redis["spec"]["template"]["spec"]["containers"]
    assert sorted(c["name"] for c in containers) == ["redis", "sentinel"]
    for container in containers:
        (password,) = [e for e in container["env"] if e["name"] == "REDIS_PASSWORD"]
        assert password["valueFrom"]["secretKeyRef"] == {"name": store.AUTH_SECRET, "key": store.AUTH_KEY}
    assert "requirepass $REDIS_PASSWORD" in store.START_SCRIPT and "masterauth $REDIS_PASSWORD" in store.START_SCRIPT


def test_redis_image_is_a_release_with_the_cve_2025_49844_fix(stack: StackRun) -> None:
    redis = by_name(stack, "StatefulSet")[store.REDIS_NAME]
    ref = images.parse(redis["spec"]["template"]["spec"]["containers"][0]["image"])
    assert ref is not None and ref.tag is not None
    major, minor, patch = (int(v) for v in ref.tag.split("-")[0].split("."))
    assert (major, minor) == (7, 4) and patch >= 6


@pytest.mark.parametrize("image", ["docker.io/library/redis:7.4.5-alpine", "docker.io/library/redis:7.2.10"])
def test_a_redis_image_without_the_lua_fix_is_rejected(image: str) -> None:
    raw = stack_raw("dev")
    raw["gateway"].setdefault("rateLimit", {})["redisImage"] = image
    with pytest.raises(SettingsError, match=r"gateway.rateLimit.redisImage.*CVE-2025-49844"):
        parse(raw)


def test_redis_pods_never_share_a_node_and_spread_evenly_over_zones(stack: StackRun) -> None:
    spec = by_name(stack, "StatefulSet")[store.REDIS_NAME]["spec"]["template"]["spec"]
    (anti,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    (spread,) = spec["topologySpreadConstraints"]
    assert (spread["topologyKey"], spread["whenUnsatisfiable"]) == ("topology.kubernetes.io/zone", "DoNotSchedule")


def test_redis_drains_one_pod_at_a_time(stack: StackRun) -> None:
    pdb = by_name(stack, "PodDisruptionBudget")[store.REDIS_NAME]
    redis = by_name(stack, "StatefulSet")[store.REDIS_NAME]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"] == redis["spec"]["selector"]


def test_only_the_rate_limit_service_and_the_store_itself_reach_redis(stack: StackRun) -> None:
    policy = by_name(stack, "NetworkPolicy")[store.REDIS_NAME]
    redis = by_name(stack, "StatefulSet")[store.REDIS_NAME]
    assert policy["spec"]["podSelector"]["matchLabels"] == redis["spec"]["selector"]["matchLabels"]
    from_service, from_store = policy["spec"]["ingress"]
    (peer,) = from_service["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "envoy-gateway-system"}
    assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "envoy-ratelimit"
    assert from_store["from"] == [{"podSelector": redis["spec"]["selector"]}]
    deny = [
        o
        for o in objects(stack)
        if o["kind"] == "NetworkPolicy"
        and o["metadata"]["name"] == "default-deny-ingress"
        and o["metadata"]["namespace"] == settings(stack).gateway.namespace
    ]
    assert deny and deny[0]["spec"]["podSelector"] == {}


def test_each_model_backend_authenticates_with_the_predictor_key(stack: StackRun) -> None:
    policies = by_name(stack, "BackendSecurityPolicy")
    backends = by_name(stack, "AIServiceBackend")
    secrets = {
        o["metadata"]["name"]: o
        for o in objects(stack)
        if o["kind"] == "Secret" and o["metadata"]["namespace"] == settings(stack).gateway.namespace
    }
    for model in settings(stack).models:
        (policy,) = [p for p in policies.values() if p["spec"]["targetRefs"][0]["name"] == model.name]
        assert policy["spec"]["type"] == "APIKey" and model.name in backends
        # ai-gateway v1.1.0 reads the key `apiKey` of the referenced Secret (internal/controller).
        assert "apiKey" in secrets[policy["spec"]["apiKey"]["secretRef"]["name"]]["stringData"]


# Routing ----------------------------------------------------------------------------------


def test_every_model_has_a_route_rule_matching_its_served_name(stack: StackRun) -> None:
    route = one(stack, "AIGatewayRoute")
    rules = {r["name"]: r for r in route["spec"]["rules"]}
    for model in settings(stack).models:
        assert rules[model.name]["matches"] == [
            {"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": model.name}]}
        ]


def test_every_route_rule_reaches_the_predictor_service_of_its_model(stack: StackRun) -> None:
    s = settings(stack)
    ai_backends, backends = by_name(stack, "AIServiceBackend"), by_name(stack, "Backend")
    for rule in one(stack, "AIGatewayRoute")["spec"]["rules"]:
        model = s.model(rule["name"])
        (ref,) = rule["backendRefs"]
        ai_backend = ai_backends[ref["name"]]
        assert ai_backend["spec"]["schema"] == {"name": "OpenAI"}
        target = ai_backend["spec"]["backendRef"]
        # The AI gateway CRD admits only Envoy Gateway Backends here (a CEL rule).
        assert (target["group"], target["kind"]) == ("gateway.envoyproxy.io", "Backend")
        (endpoint,) = backends[target["name"]]["spec"]["endpoints"]
        host = f"{names.service_name(model)}.{s.serving.namespace}.svc.cluster.local"
        assert endpoint == {"fqdn": {"hostname": host, "port": SERVICE_PORT}}


def test_route_records_input_output_and_total_tokens(stack: StackRun) -> None:
    costs = {c["type"]: c["metadataKey"] for c in one(stack, "AIGatewayRoute")["spec"]["llmRequestCosts"]}
    assert {"InputToken", "OutputToken", "TotalToken"} <= set(costs)


def test_route_attaches_to_the_gateway_it_is_served_by(stack: StackRun) -> None:
    route, gateway = one(stack, "AIGatewayRoute"), one(stack, "Gateway")
    assert route["spec"]["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway["metadata"]["name"]}
    ]
    assert route["metadata"]["namespace"] == gateway["metadata"]["namespace"]
    assert gateway["spec"]["gatewayClassName"] == one(stack, "GatewayClass")["metadata"]["name"]


# Authentication and limits: walk every policy's targets against every emitted route -------


def test_every_route_and_gateway_requires_an_api_key(stack: StackRun) -> None:
    objs = objects(stack)
    assert any(o["kind"] == "AIGatewayRoute" for o in objs)
    assert uncovered(objs, "SecurityPolicy", has_api_key_auth) == []


def test_every_route_and_gateway_is_rate_limited(stack: StackRun) -> None:
    assert uncovered(objects(stack), "BackendTrafficPolicy", has_rate_limit) == []


@pytest.mark.parametrize("kind", ["SecurityPolicy", "BackendTrafficPolicy", "ClientTrafficPolicy"])
def test_no_policy_targets_an_object_that_does_not_exist(stack: StackRun, kind: str) -> None:
    assert dangling_targets(objects(stack), kind) == []


def test_a_policy_on_a_route_name_that_does_not_exist_protects_nothing(dev: StackRun) -> None:
    objs = copy.deepcopy(objects(dev))
    policy = next(o for o in objs if o["kind"] == "SecurityPolicy")
    policy["spec"]["targetRefs"] = [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "openai"}]
    assert uncovered(objs, "SecurityPolicy", has_api_key_auth) == [
        "Gateway ai-gateway/inference",
        "AIGatewayRoute ai-gateway/inference",
    ]
    assert dangling_targets(objs, "SecurityPolicy") == [
        "SecurityPolicy ai-gateway/client-api-keys targets missing HTTPRoute ai-gateway/openai"
    ]


def test_a_policy_on_the_generated_http_route_covers_the_ai_route(dev: StackRun) -> None:
    objs = copy.deepcopy(objects(dev))
    route = next(o for o in objs if o["kind"] == "AIGatewayRoute")
    generated = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": route["metadata"]}
    policy = next(o for o in objs if o["kind"] == "SecurityPolicy")
    policy["spec"]["targetRefs"] = [
        {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": route["metadata"]["name"]}
    ]
    assert uncovered([*objs, generated], "SecurityPolicy", has_api_key_auth) == ["Gateway ai-gateway/inference"]


def test_the_route_and_load_balancer_wait_for_auth_and_limits(stack: StackRun) -> None:
    urn = {
        r.kind: r.urn
        for r in stack.kubernetes_objects()
        if r.kind and r.kind.rsplit("/", 1)[1] in ("SecurityPolicy", "BackendTrafficPolicy")
    }
    route = next(r for r in stack.kubernetes_objects() if r.inputs["kind"] == "AIGatewayRoute")
    nlb = next(
        r
        for r in stack.kubernetes_objects()
        if r.inputs["kind"] == "Service" and r.inputs["spec"].get("type") == "LoadBalancer"
    )
    assert len(urn) == 2
    assert set(urn.values()) <= set(route.dependencies)
    assert {route.urn, *urn.values()} <= set(nlb.dependencies)


def test_api_key_auth_reads_the_bearer_header_forwards_the_client_and_strips_the_key(stack: StackRun) -> None:
    auth = one(stack, "SecurityPolicy")["spec"]["apiKeyAuth"]
    assert auth["extractFrom"] == [{"headers": ["authorization"]}]
    assert auth["forwardClientIDHeader"] == CLIENT_ID_HEADER
    assert auth["sanitize"] is True
    (ref,) = auth["credentialRefs"]
    secret = by_name(stack, "Secret")[ref["name"]]
    assert secret["metadata"]["namespace"] == one(stack, "SecurityPolicy")["metadata"]["namespace"]


def test_one_generated_api_key_per_configured_client(stack: StackRun) -> None:
    clients = [c.name for c in settings(stack).gateway.clients]
    secret = by_name(stack, "Secret")[one(stack, "SecurityPolicy")["spec"]["apiKeyAuth"]["credentialRefs"][0]["name"]]
    assert sorted(secret["stringData"]) == sorted(clients)
    passwords = stack.of_type("random:index/randomPassword:RandomPassword")
    client_keys = [p for p in passwords if "inference-platform:gateway:Gateway" in p.parent and p.name.endswith("-key")]
    assert len(client_keys) == len(clients)
    assert sorted(stack.outputs["apiKeys"]) == sorted(clients)


def test_every_secret_value_is_a_pulumi_secret(stack: StackRun) -> None:
    secrets = [r for r in stack.resources if r.kind == "v1/Secret"]
    assert secrets
    for secret in secrets:
        assert {"stringData", "data"} & set(secret.inputs) <= set(secret.secret_paths)
    assert "apiKeys" in stack.secret_outputs
    keys = set(stack.outputs["apiKeys"].values())
    plain = {k: v for k, v in stack.outputs.items() if k not in stack.secret_outputs}
    assert not any(key in repr(plain) for key in keys)


def test_each_client_gets_its_request_rate_and_token_budget_from_config(stack: StackRun) -> None:
    rules = one(stack, "BackendTrafficPolicy")["spec"]["rateLimit"]["global"]["rules"]
    assert one(stack, "BackendTrafficPolicy")["spec"]["rateLimit"]["type"] == "Global"
    for client in settings(stack).gateway.clients:
        selector = [{"headers": [{"name": CLIENT_ID_HEADER, "type": "Exact", "value": client.name}]}]
        mine = [r for r in rules if r["clientSelectors"] == selector]
        requests = next(r for r in mine if "cost" not in r)
        tokens = next(r for r in mine if "cost" in r)
        assert requests["limit"] == {"requests": client.requests.limit, "unit": client.requests.unit}
        assert tokens["limit"] == {"requests": client.tokens.limit, "unit": client.tokens.unit}
        # Both buckets span every model the client calls, not one per route.
        assert requests["shared"] is tokens["shared"] is True


def test_token_budget_is_charged_with_the_responses_total_tokens(stack: StackRun) -> None:
    rules = one(stack, "BackendTrafficPolicy")["spec"]["rateLimit"]["global"]["rules"]
    costs = [r["cost"] for r in rules if "cost" in r]
    metadata_keys = {c["metadataKey"] for c in one(stack, "AIGatewayRoute")["spec"]["llmRequestCosts"]}
    for cost in costs:
        assert cost["request"] == {"from": "Number", "number": 0}
        assert cost["response"]["metadata"]["namespace"] == COST_NAMESPACE
        assert cost["response"]["metadata"]["key"] in metadata_keys


# Timeouts, buffers, availability -----------------------------------------------------------


def test_route_and_connection_timeouts_come_from_config(stack: StackRun) -> None:
    t = settings(stack).gateway.timeouts
    for rule in one(stack, "AIGatewayRoute")["spec"]["rules"]:
        assert rule["timeouts"] == {"request": f"{t.request_seconds}s"}
        assert rule["streamIdleTimeout"] == f"{t.stream_idle_seconds}s"
    client = one(stack, "ClientTrafficPolicy")["spec"]
    assert client["timeout"]["http"]["streamIdleTimeout"] == f"{t.stream_idle_seconds}s"
    assert client["connection"]["bufferLimit"] == settings(stack).gateway.buffer_limit


def test_predictors_outlast_the_longest_request_the_route_allows(stack: StackRun) -> None:
    drain = settings(stack).serving.drain_seconds
    longest = max(int(r["timeouts"]["request"].rstrip("s")) for r in one(stack, "AIGatewayRoute")["spec"]["rules"])
    for isvc in by_name(stack, "InferenceService").values():
        assert isvc["spec"]["predictor"]["terminationGracePeriodSeconds"] >= longest + drain


def test_envoy_drains_for_longer_than_the_longest_request(stack: StackRun) -> None:
    drain = one(stack, "EnvoyProxy")["spec"]["shutdown"]["drainTimeout"]
    assert int(drain.rstrip("s")) > settings(stack).gateway.timeouts.request_seconds


def test_prod_has_no_single_envoy_or_rate_limit_replica(prod: StackRun) -> None:
    kubernetes = one(prod, "EnvoyProxy")["spec"]["provider"]["kubernetes"]
    replicas = kubernetes["envoyDeployment"]["replicas"]
    assert replicas >= 2
    assert kubernetes["envoyPDB"] == {"minAvailable": replicas - 1}
    (spread,) = kubernetes["envoyDeployment"]["pod"]["topologySpreadConstraints"]
    assert (spread["topologyKey"], spread["whenUnsatisfiable"]) == ("topology.kubernetes.io/zone", "DoNotSchedule")
    rate_limit = releases(prod)[ENVOY_GATEWAY_CHART]["values"]["config"]["envoyGateway"]
    assert rate_limit["provider"]["kubernetes"]["rateLimitDeployment"]["replicas"] >= 2


def test_prod_rate_limiting_fails_open_through_a_sentinel_failover(prod: StackRun) -> None:
    assert by_name(prod, "StatefulSet")[store.REDIS_NAME]["spec"]["replicas"] >= 3
    config = releases(prod)[ENVOY_GATEWAY_CHART]["values"]["config"]["envoyGateway"]
    assert config["rateLimit"]["failClosed"] is False


def test_a_prod_store_with_fewer_than_three_redis_replicas_is_rejected() -> None:
    raw = stack_raw("prod")
    raw["gateway"]["rateLimit"]["redisReplicas"] = 1
    with pytest.raises(SettingsError, match=r"gateway.rateLimit.redisReplicas"):
        parse(raw)


def test_a_fail_closed_prod_gateway_is_rejected() -> None:
    raw = stack_raw("prod")
    raw["gateway"]["rateLimit"]["failClosed"] = True
    with pytest.raises(SettingsError, match=r"gateway.rateLimit.failClosed"):
        parse(raw)


def test_dev_single_envoy_has_no_pdb_that_would_block_drains(dev: StackRun) -> None:
    assert "envoyPDB" not in one(dev, "EnvoyProxy")["spec"]["provider"]["kubernetes"]


# The load balancer and the stack outputs --------------------------------------------------


def test_nlb_scheme_follows_config_and_selects_this_gateways_envoy_pods(stack: StackRun) -> None:
    gw = settings(stack).gateway
    nlb = next(s for s in by_name(stack, "Service").values() if s["spec"].get("type") == "LoadBalancer")
    assert nlb["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"] == gw.scheme
    gateway = one(stack, "Gateway")
    selector = nlb["spec"]["selector"]
    assert selector["gateway.envoyproxy.io/owning-gateway-name"] == gateway["metadata"]["name"]
    assert selector["gateway.envoyproxy.io/owning-gateway-namespace"] == gateway["metadata"]["namespace"]
    (port,) = nlb["spec"]["ports"]
    assert port["targetPort"] == gateway["spec"]["listeners"][0]["port"]


def test_an_internet_facing_gateway_terminates_tls_with_the_acm_certificate() -> None:
    arn = "arn:aws:acm:us-west-2:123456789012:certificate/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
    gw = GatewaySettings.model_validate(
        {
            "scheme": "internet-facing",
            "tlsCertificateArn": arn,
            "clients": [
                {"name": "a", "requests": {"limit": 1, "unit": "Second"}, "tokens": {"limit": 9, "unit": "Hour"}}
            ],
        }
    )
    service = load_balancer_service(gw, auto_mode=True, vpc_cidr="10.0.0.0/16")
    annotations = service["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] == arn
    assert service["spec"]["ports"][0]["port"] == 443
    assert gw.url_scheme == "https"


def test_endpoint_url_is_the_load_balancer_hostname_with_the_openai_prefix(stack: StackRun) -> None:
    host = stack.outputs["gatewayHostname"]
    assert host.endswith(".elb.us-west-2.amazonaws.com")
    assert stack.outputs["endpointUrl"] == f"https://{host}/v1"
    assert "endpointUrl" not in stack.secret_outputs


# TLS without an ACM certificate (gateway.clusterTls) ----------------------------------------------


def test_envoy_terminates_tls_on_its_https_listener_with_the_gateway_cas_certificate(stack: StackRun) -> None:
    [listener] = one(stack, "Gateway")["spec"]["listeners"]
    assert (listener["protocol"], listener["port"]) == ("HTTPS", TLS_LISTENER_PORT)
    assert listener["tls"] == {
        "mode": "Terminate",
        "certificateRefs": [{"group": "", "kind": "Secret", "name": tls.SERVING_SECRET}],
    }
    nlb = next(s for s in by_name(stack, "Service").values() if s["spec"].get("type") == "LoadBalancer")
    assert nlb["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": TLS_LISTENER_PORT, "protocol": "TCP"}]
    # TCP passthrough: no ACM certificate on the NLB.
    assert not any("ssl-cert" in a for a in nlb["metadata"]["annotations"])


def test_the_serving_certificate_names_the_nlb_hostname_and_chains_to_the_gateways_ca(stack: StackRun) -> None:
    certificates = {name: c["spec"] for name, c in by_name(stack, "Certificate").items()}
    issuers = {name: i["spec"] for name, i in by_name(stack, "Issuer").items()}
    serving = certificates[tls.SERVING_SECRET]
    assert serving["dnsNames"] == [stack.outputs["gatewayHostname"]]
    assert serving["issuerRef"]["name"] == tls.CA_ISSUER and issuers[tls.CA_ISSUER] == {
        "ca": {"secretName": tls.CA_SECRET}
    }
    ca = certificates[tls.CA_ISSUER]
    assert ca["isCA"] is True and ca["secretName"] == tls.CA_SECRET
    assert issuers[ca["issuerRef"]["name"]] == {"selfSigned": {}}


def test_prod_refuses_plain_http_and_an_nlb_open_to_every_address() -> None:
    raw = with_value(stack_raw("prod"), ["gateway", "clusterTls"], False)
    with pytest.raises(SettingsError, match=r"gateway\.clusterTls \(False\) is not allowed in a prod stack"):
        parse(raw)
    raw = with_value(stack_raw("prod"), ["gateway", "sourceRanges"], [])
    with pytest.raises(SettingsError, match=r"gateway\.sourceRanges must list the client CIDRs in a prod stack"):
        parse(raw)


def test_prod_admits_only_the_vpc_to_its_load_balancer(prod: StackRun) -> None:
    nlb = next(s for s in by_name(prod, "Service").values() if s["spec"].get("type") == "LoadBalancer")
    assert nlb["spec"]["loadBalancerSourceRanges"] == [load_stack("prod", ROOT).network.cidr]


def test_a_stack_without_source_ranges_admits_only_its_vpc(dev: StackRun) -> None:
    """dev sets no gateway.sourceRanges: its NLB still admits only the VPC, not every address."""
    assert not load_stack("dev", ROOT).gateway.source_ranges
    nlb = next(s for s in by_name(dev, "Service").values() if s["spec"].get("type") == "LoadBalancer")
    assert nlb["spec"]["loadBalancerSourceRanges"] == [load_stack("dev", ROOT).network.cidr]


def test_plain_http_stays_possible_outside_prod_for_a_dev_without_a_ca() -> None:
    gw = GatewaySettings.model_validate(
        {
            "clusterTls": False,
            "clients": [
                {"name": "a", "requests": {"limit": 1, "unit": "Second"}, "tokens": {"limit": 9, "unit": "Hour"}}
            ],
        }
    )
    assert (
        gw.url_scheme == "http"
        and load_balancer_service(gw, auto_mode=True, vpc_cidr="10.0.0.0/16")["spec"]["ports"][0]["port"] == 80
    )
    assert gateway_manifest(gw)["spec"]["listeners"][0]["port"] == LISTENER_PORT


def test_a_stack_without_a_gateway_section_is_rejected() -> None:
    raw = stack_raw("dev")
    del raw["gateway"]
    with pytest.raises(SettingsError, match="inference-platform:gateway is required"):
        parse(raw)


# CEL rules of the CRDs (structural schemas are checked by tests/test_conformance.py) ------


def test_every_custom_resource_satisfies_the_cel_rules_of_its_crd(stack: StackRun) -> None:
    custom = [o for o in objects(stack) if not is_core(o["apiVersion"])]
    assert [v for o in custom for v in rule_violations(o)[0]] == []


def test_cel_rules_reject_an_ai_service_backend_pointing_at_a_service(dev: StackRun) -> None:
    backend = copy.deepcopy(one_of(dev, "AIServiceBackend"))
    backend["spec"]["backendRef"] = {"group": "", "kind": "Service", "name": "qwen25-1p5b-predictor", "port": 80}
    assert any("must be a Backend resource" in v for v in rule_violations(backend)[0])


def test_cel_rules_reject_client_traffic_policy_on_a_route(dev: StackRun) -> None:
    policy = copy.deepcopy(one(dev, "ClientTrafficPolicy"))
    policy["spec"]["targetRefs"] = [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "inference"}]
    assert rule_violations(policy)[0] != []


def one_of(stack: StackRun, kind: str) -> dict[str, Any]:
    return next(o for o in objects(stack) if o["kind"] == kind)
