"""Cache-aware routing on the platform (issue 26, items 3 and 5): with `serving.routing:
endpoint-picker` and LMCache on every model (set here, never in the committed stacks), both
stacks render an InferencePool and its endpoint picker from the `inferencepool` chart v1.0.2, route
each model's rule to its pool, keep the predictors reachable only from Envoy, Prometheus and the
picker, validate against the upstream CRDs and pass the policy pack."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pulumi_policy import EnforcementLevel

from components.gateway.objects import INFERENCE_POOL_BACKEND_RESOURCE, envoy_pod_selector
from components.serving.objects import (
    EPP_EXT_PROC_PORT,
    INFERENCE_EXTENSION_CRDS,
    INFERENCE_EXTENSION_VERSION,
    INFERENCEPOOL_CHART,
    inference_pool,
)
from contract import names
from contract.settings.stack_file import StackFile, load_stack, read_stack
from tests.contract.test_kv_cache_settings import KV_CONNECTOR_IMAGE
from tests.crd_rules import rule_violations
from tests.harness import ROOT, StackRun, run_program, stack_config
from tests.k8s_schemas import is_core, validate
from tests.policies.policy_harness import load_config, run_pack

RELEASE = "kubernetes:helm.sh/v3:Release"
ENDPOINT_PICKER = {"serving": {"routing": "endpoint-picker"}}


def with_cache_aware_routing(stack: str) -> dict[str, str]:
    config = stack_config(stack)
    models = json.loads(config["inference-platform:models"])
    for model in models:
        model.update(ENDPOINT_PICKER)
        model.setdefault("engine", {})["lmcache"] = "8Gi"
        model["image"] = KV_CONNECTOR_IMAGE
    config["inference-platform:models"] = json.dumps(models)
    return config


@pytest.fixture(scope="module", params=["dev", "prod"])
def routed(request: pytest.FixtureRequest) -> StackRun:
    return run_program(request.param, with_cache_aware_routing(request.param))


def settings_of(run: StackRun):
    source = read_stack(run.stack, ROOT)
    config = copy.deepcopy(source.config)
    for model in config["inference-platform:models"]:
        model.update(ENDPOINT_PICKER)
        model.setdefault("engine", {})["lmcache"] = "8Gi"
        model["image"] = KV_CONNECTOR_IMAGE
    return StackFile(source.path, config).settings()


def objects(run: StackRun, kind: str) -> list[dict[str, Any]]:
    return [r.inputs for r in run.kubernetes_objects() if r.inputs.get("kind") == kind]


def picker_releases(run: StackRun) -> list[Any]:
    return [r for r in run.of_type(RELEASE) if r.inputs["chart"] == INFERENCEPOOL_CHART]


def test_every_emitted_object_and_each_pool_the_chart_renders_match_the_upstream_schemas(routed: StackRun) -> None:
    pools = [inference_pool(m, settings_of(routed).serving) for m in settings_of(routed).models]
    emitted = [r.inputs for r in routed.kubernetes_objects()]
    problems = [p for obj in [*emitted, *pools] for p in validate(obj)]
    assert problems == []
    custom = [o for o in [*emitted, *pools] if not is_core(o["apiVersion"])]
    assert [v for o in custom for v in rule_violations(o)[0]] == []


def test_each_model_gets_a_pool_of_its_predictor_pods_from_the_pinned_chart(routed: StackRun) -> None:
    s = settings_of(routed)
    releases = {r.inputs["name"]: r.inputs for r in picker_releases(routed)}
    assert set(releases) == {names.inference_pool_name(m) for m in s.models}
    for model in s.models:
        release = releases[names.inference_pool_name(model)]
        assert release["version"] == INFERENCE_EXTENSION_VERSION and release["namespace"] == s.serving.namespace
        pool = release["values"]["inferencePool"]
        # KServe labels every predictor pod with its InferenceService name; vLLM listens on names.PORT.
        assert pool["modelServers"]["matchLabels"] == {names.ISVC_LABEL: names.inference_service_name(model)}
        assert pool["targetPorts"] == [{"number": names.PORT}]


def test_the_inference_extension_crds_are_the_release_of_the_chart(routed: StackRun) -> None:
    (crds,) = routed.of_type("kubernetes:yaml/v2:ConfigFile")
    assert crds.inputs["file"] == INFERENCE_EXTENSION_CRDS
    assert f"/download/{INFERENCE_EXTENSION_VERSION}/" in INFERENCE_EXTENSION_CRDS


def test_each_rule_sends_its_model_to_its_pool_and_no_service_backend_is_left(routed: StackRun) -> None:
    s = settings_of(routed)
    (route,) = objects(routed, "AIGatewayRoute")
    for rule, model in zip(route["spec"]["rules"], s.models, strict=True):
        assert rule["backendRefs"] == [
            {
                "group": "inference.networking.k8s.io",
                "kind": "InferencePool",
                "name": names.inference_pool_name(model),
                "namespace": s.serving.namespace,
            }
        ]
    assert objects(routed, "AIServiceBackend") == [] and objects(routed, "Backend") == []


def test_the_route_may_name_pools_in_the_serving_namespace(routed: StackRun) -> None:
    s = settings_of(routed)
    (grant,) = objects(routed, "ReferenceGrant")
    assert grant["metadata"]["namespace"] == s.serving.namespace
    assert {(f["kind"], f["namespace"]) for f in grant["spec"]["from"]} == {
        ("AIGatewayRoute", s.gateway.namespace),
        ("HTTPRoute", s.gateway.namespace),
    }
    assert grant["spec"]["to"] == [{"group": "inference.networking.k8s.io", "kind": "InferencePool"}]


def test_requests_through_a_pool_carry_the_predictor_key(routed: StackRun) -> None:
    s = settings_of(routed)
    policies = {p["spec"]["targetRefs"][0]["name"]: p for p in objects(routed, "BackendSecurityPolicy")}
    for model in s.models:
        policy = policies[names.inference_pool_name(model)]
        assert policy["metadata"]["namespace"] == s.serving.namespace
        assert policy["spec"]["targetRefs"][0]["kind"] == "InferencePool"
        assert policy["spec"]["apiKey"]["secretRef"]["name"] == "predictor-api-key"


def test_envoy_gateway_resolves_inference_pool_backends(routed: StackRun) -> None:
    (eg,) = [r for r in routed.of_type(RELEASE) if r.inputs["chart"].endswith("/gateway-helm")]
    manager = eg.inputs["values"]["config"]["envoyGateway"]["extensionManager"]
    assert manager["backendResources"] == [INFERENCE_POOL_BACKEND_RESOURCE]


def test_only_envoy_reaches_the_picker_and_the_picker_reaches_the_predictors_metrics(routed: StackRun) -> None:
    s = settings_of(routed)
    policies = {p["metadata"]["name"]: p for p in objects(routed, "NetworkPolicy")}
    pickers = [names.endpoint_picker_name(m) for m in s.models]
    for picker in pickers:
        (rule,) = policies[picker]["spec"]["ingress"]
        assert [peer["podSelector"]["matchLabels"] for peer in rule["from"]] == [envoy_pod_selector(s.gateway)]
        assert rule["ports"] == [{"protocol": "TCP", "port": EPP_EXT_PROC_PORT}]
    predictors = policies["predictors"]["spec"]["ingress"][0]  # [1] is Prometheus on the metrics-only port
    assert {"podSelector": {"matchExpressions": [{"key": "inferencepool", "operator": "In", "values": pickers}]}} in (
        predictors["from"]
    )
    assert predictors["ports"] == [{"protocol": "TCP", "port": names.PORT}]


def test_the_picker_may_leave_the_deny_all_namespace_only_for_the_predictors_and_the_api(routed: StackRun) -> None:
    s = settings_of(routed)
    policies = {p["metadata"]["name"]: p for p in objects(routed, "NetworkPolicy")}
    assert "default-deny-egress" in policies  # the serving namespace lets nothing out by default
    for model in s.models:
        egress = policies[f"{names.endpoint_picker_name(model)}-egress"]["spec"]
        assert egress["podSelector"] == {"matchLabels": {"inferencepool": names.endpoint_picker_name(model)}}
        to_predictors, to_api = egress["egress"]
        assert to_predictors["ports"] == [{"protocol": "TCP", "port": names.PORT}]
        assert to_api == {"to": [{"ipBlock": {"cidr": s.network.cidr}}], "ports": [{"protocol": "TCP", "port": 443}]}


def test_a_namespace_with_a_picker_enforces_baseline_since_the_chart_sets_no_security_context(
    routed: StackRun,
) -> None:
    (namespace,) = [
        n for n in objects(routed, "Namespace") if n["metadata"]["name"] == settings_of(routed).serving.namespace
    ]
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"


def test_prod_runs_a_standby_picker_under_a_disruption_budget_and_dev_one_picker(routed: StackRun) -> None:
    s = settings_of(routed)
    replicas = {r.inputs["values"]["inferenceExtension"]["replicas"] for r in picker_releases(routed)}
    budgets = {b["metadata"]["name"]: b for b in objects(routed, "PodDisruptionBudget")}
    if routed.stack == "prod":
        assert replicas == {2}
        for model in s.models:
            budget = budgets[names.endpoint_picker_name(model)]
            assert budget["spec"]["selector"]["matchLabels"] == {"inferencepool": names.endpoint_picker_name(model)}
    else:
        assert replicas == {1}
        assert not any(name.endswith("-epp") for name in budgets)


def test_lmcache_memory_is_in_every_predictors_memory_request(routed: StackRun) -> None:
    s = settings_of(routed)
    for isvc in objects(routed, "InferenceService"):
        model = s.model(isvc["metadata"]["name"])
        (container,) = [c for c in isvc["spec"]["predictor"]["containers"] if c["name"] == "kserve-container"]
        assert container["resources"]["requests"]["memory"] == model.container_resources()["requests"]["memory"]
        assert model.engine.lmcache_bytes == 8 * 2**30


def test_both_stacks_pass_the_pack_with_cache_aware_routing(routed: StackRun) -> None:
    found = run_pack(routed.resources, load_config(routed.stack))
    assert [v.message for v in found if v.level == EnforcementLevel.MANDATORY] == []


def test_the_committed_stacks_deploy_no_endpoint_picker(stack: StackRun) -> None:
    assert picker_releases(stack) == []
    assert stack.of_type("kubernetes:yaml/v2:ConfigFile") == []
    (eg,) = [r for r in stack.of_type(RELEASE) if r.inputs["chart"].endswith("/gateway-helm")]
    assert "backendResources" not in eg.inputs["values"]["config"]["envoyGateway"]["extensionManager"]
    assert all(m.serving.routing == "least-request" for m in load_stack(stack.stack, ROOT).models)


def test_the_pool_schema_is_really_checked() -> None:
    s = load_stack("prod", ROOT)
    pool = inference_pool(s.models[0], s.serving)
    pool["spec"]["endpointPickerRef"]["portNumber"] = EPP_EXT_PROC_PORT  # the v1alpha2 field, not v1's
    assert any("portNumber" in p for p in validate(pool))
