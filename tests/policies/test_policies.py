"""The policy pack, run on what the real program registers for dev and prod under mocks.

The captured stacks must pass every policy (zero mandatory violations with each stack's
policy config). Every policy also has violating cases: a mutated copy of a real captured
resource (or stack) that the policy must report with a message naming the rule and the
resource.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from pulumi_policy import EnforcementLevel, StackValidationPolicy

from contract import signals
from contract.settings.stack_file import load_stack
from tests.harness import ROOT, Captured, StackRun
from tests.policies.policy_harness import (
    POLICIES,
    UNKNOWN,
    Dependencies,
    Violation,
    k8s_object,
    load_config,
    policy,
    record_dependencies,
    run_pack,
    run_policy,
    swap,
    with_inputs,
)

# Policy names with at least one violating case below (filled by @violates).
COVERED: set[str] = set()


def violates(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def mark(test: Callable[..., Any]) -> Callable[..., Any]:
        COVERED.add(name)
        return test

    return mark


def of_kind(run: StackRun, kind: str) -> list[Captured]:
    """Captured Kubernetes objects whose kind is `kind` (any API version)."""
    return [r for r in run.kubernetes_objects() if r.inputs.get("kind") == kind]


def first(run: StackRun, kind: str) -> Captured:
    found = of_kind(run, kind)
    assert found, f"the {run.stack} stack registers no {kind}"
    return found[0]


def meta_name(captured: Captured) -> str:
    return captured.inputs["metadata"]["name"]


def prod_pool_gpus() -> int:
    """What prod's GPU NodePools may launch together (the sum of their gpuLimits)."""
    return sum(pool.gpu_limit for pool in load_stack("prod", ROOT).gpu_capacity.pools)


def check(name: str, resources: list[Captured], config: dict[str, Any] | None = None) -> list[Violation]:
    return run_policy(policy(name), resources, config)


def check_stack(
    name: str,
    run: StackRun,
    old: Captured | None = None,
    new: Captured | None = None,
    config: dict[str, Any] | None = None,
) -> list[Violation]:
    resources = run.resources if old is None else swap(run.resources, old, new)
    if new is not None and old is None:
        resources = [*resources, new]
    return check(name, resources, config)


def assert_reported(found: list[Violation], policy_name: str, *fragments: str) -> None:
    """One violation of `policy_name` whose message names the rule and contains every fragment."""
    matching = [
        v
        for v in found
        if v.policy == policy_name and f"[{policy_name}]" in v.message and all(f in v.message for f in fragments)
    ]
    assert matching, f"expected a {policy_name} violation mentioning {fragments}; got {[v.message for v in found]}"


def predictor_spec(isvc_inputs: dict[str, Any]) -> dict[str, Any]:
    return isvc_inputs["spec"]["predictor"]


def serving_container(isvc_inputs: dict[str, Any]) -> dict[str, Any]:
    return predictor_spec(isvc_inputs)["containers"][0]


def trigger(inputs: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in inputs["spec"]["triggers"] if t["name"] == name)


def behavior(inputs: dict[str, Any]) -> dict[str, Any]:
    return inputs["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]


# --- the real stacks pass ------------------------------------------------------------------


@pytest.mark.parametrize("stack_name", ["dev", "prod"])
def test_stack_has_no_mandatory_violations(stack_name: str, dev: StackRun, prod: StackRun) -> None:
    run = {"dev": dev, "prod": prod}[stack_name]
    mandatory = [v for v in run_pack(run.resources, load_config(stack_name)) if v.level == EnforcementLevel.MANDATORY]
    assert mandatory == []


@pytest.mark.parametrize("policy_name", [p.name for p in POLICIES])
def test_policy_passes_on_prod_as_captured(policy_name: str, prod: StackRun) -> None:
    assert check(policy_name, prod.resources, None) == []


# Dev runs single replicas and a force-destroy bucket on purpose; its config disables those two
# (and holds its own properties, e.g. the planner's shorter scale-down window on a small fleet).
DISABLED_IN_DEV = {name for name, level in load_config("dev").items() if level == "disabled"}


@pytest.mark.parametrize("policy_name", [p.name for p in POLICIES if p.name not in DISABLED_IN_DEV])
def test_policy_passes_on_dev_as_captured(policy_name: str, dev: StackRun) -> None:
    assert check(policy_name, dev.resources, load_config("dev")) == []


def test_every_policy_has_a_violating_case() -> None:
    assert {p.name for p in POLICIES} - COVERED == set()


@pytest.mark.parametrize("policy_name", [p.name for p in POLICIES])
def test_policy_has_description_remediation_and_level(policy_name: str) -> None:
    p = policy(policy_name)
    assert p.description and p.remediation_steps and p.enforcement_level == EnforcementLevel.MANDATORY


@pytest.mark.parametrize("stack_name", ["dev", "prod"])
def test_policy_config_file_names_policies_and_matches_their_schemas(stack_name: str) -> None:
    import jsonschema

    levels = {"advisory", "mandatory", "remediate", "disabled"}
    for name, entry in load_config(stack_name).items():
        assert name in {p.name for p in POLICIES}, f"{stack_name}.json configures unknown policy {name}"
        if isinstance(entry, str):
            assert entry in levels
            continue
        schema = policy(name).config_schema
        properties = dict(schema.properties) if schema else {}
        if "enforcementLevel" in entry:
            assert entry["enforcementLevel"] in levels
        values = {k: v for k, v in entry.items() if k != "enforcementLevel"}
        jsonschema.validate(values, {"type": "object", "properties": properties, "additionalProperties": False})


# --- no CPU/memory scaling -------------------------------------------------------------------

NO_RESOURCE_SCALING = "no-cpu-memory-scaling-for-gpu-inference"


@violates(NO_RESOURCE_SCALING)
def test_keda_cpu_trigger_on_a_predictor_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    mutated = with_inputs(
        scaled,
        lambda i: i["spec"]["triggers"].append(
            {"type": "cpu", "name": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}
        ),
    )
    assert_reported(check(NO_RESOURCE_SCALING, [mutated]), NO_RESOURCE_SCALING, meta_name(scaled), "cpu")


@violates(NO_RESOURCE_SCALING)
def test_hpa_resource_metric_on_a_predictor_is_reported(prod: StackRun) -> None:
    target = first(prod, "ScaledObject").inputs["spec"]["scaleTargetRef"]
    hpa = k8s_object(
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        {"name": "cpu-hpa", "namespace": "inference"},
        {
            "scaleTargetRef": dict(target),
            "minReplicas": 1,
            "maxReplicas": 4,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 80}},
                }
            ],
        },
    )
    assert_reported(check(NO_RESOURCE_SCALING, [hpa]), NO_RESOURCE_SCALING, "cpu-hpa", "memory")


@violates(NO_RESOURCE_SCALING)
def test_inference_service_left_to_kserve_cpu_autoscaler_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    mutated = with_inputs(isvc, lambda i: i["metadata"]["annotations"].pop("serving.kserve.io/autoscalerClass"))
    assert_reported(check(NO_RESOURCE_SCALING, [mutated]), NO_RESOURCE_SCALING, meta_name(isvc), "autoscalerClass")


@violates(NO_RESOURCE_SCALING)
def test_inference_service_scale_metric_memory_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    mutated = with_inputs(isvc, lambda i: predictor_spec(i).update(scaleMetric="memory"))
    assert_reported(check(NO_RESOURCE_SCALING, [mutated]), NO_RESOURCE_SCALING, meta_name(isvc), "scaleMetric")


# --- KEDA Prometheus queries -------------------------------------------------------------------

QUERIES = "keda-prometheus-queries-single-series-known-metrics"


def with_query(scaled: Captured, trigger_name: str, query: str) -> Captured:
    """`scaled` with its trigger `trigger_name` reading `query`. A trigger the stack's policy left
    out is added as a copy of its first Prometheus trigger, so a case does not depend on which
    triggers the planner enabled."""

    def mutate(inputs: dict[str, Any]) -> None:
        triggers = inputs["spec"]["triggers"]
        if not any(t["name"] == trigger_name for t in triggers):
            added = copy.deepcopy(next(t for t in triggers if t["type"] == "prometheus"))
            triggers.append({**added, "name": trigger_name})
        trigger(inputs, trigger_name)["metadata"]["query"] = query

    return with_inputs(scaled, mutate)


@violates(QUERIES)
def test_per_pod_query_without_aggregation_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    mutated = with_query(scaled, "queue-depth", 'avg_over_time(vllm:num_requests_waiting{namespace="inference"}[60s])')
    assert_reported(check(QUERIES, [mutated]), QUERIES, meta_name(scaled), "queue-depth", "more than one series")


@violates(QUERIES)
def test_sum_by_pod_query_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    mutated = with_query(scaled, "kv-cache", "sum by (pod) (vllm:kv_cache_usage_perc)")
    assert_reported(check(QUERIES, [mutated]), QUERIES, meta_name(scaled), "kv-cache", "more than one series")


@violates(QUERIES)
def test_quantile_over_unaggregated_buckets_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    query = "histogram_quantile(0.99, rate(vllm:e2e_request_latency_seconds_bucket[2m]))"
    mutated = with_query(scaled, "e2e-latency", query)
    assert_reported(check(QUERIES, [mutated]), QUERIES, meta_name(scaled), "e2e-latency", "more than one series")


@violates(QUERIES)
def test_removed_vllm_metric_name_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    mutated = with_query(scaled, "kv-cache", 'sum(vllm:gpu_cache_usage_perc{model_name="x"})')
    assert_reported(check(QUERIES, [mutated]), QUERIES, meta_name(scaled), "vllm:gpu_cache_usage_perc", "renamed")


@violates(QUERIES)
def test_vllm_metric_unknown_to_signals_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    mutated = with_query(scaled, "queue-depth", "sum(vllm:num_requests_swapped)")
    assert_reported(check(QUERIES, [mutated]), QUERIES, meta_name(scaled), "vllm:num_requests_swapped")


def test_every_signals_scaling_query_is_accepted() -> None:
    scope = signals.Scope("m", "inference")
    queries = [
        signals.queue_depth(scope, 60),
        signals.kv_cache_usage(scope),
        signals.requests_running(scope),
        signals.requests_waiting(scope),
        signals.e2e_latency_quantile(scope, 0.99, 120),
        signals.ttft_quantile(scope, 0.95, 60),
        signals.inter_token_latency_quantile(scope, 0.9, 60),
        signals.generation_tokens_per_second(scope, 60),
        signals.requests_per_second(scope, 60),
    ]
    scaled = k8s_object(
        "keda.sh/v1alpha1",
        "ScaledObject",
        {"name": "m", "namespace": "inference"},
        {
            "scaleTargetRef": {"name": "m-predictor"},
            "minReplicaCount": 1,
            "triggers": [
                {"type": "prometheus", "name": f"q{i}", "metricType": "Value", "metadata": {"query": q}}
                for i, q in enumerate(queries)
            ],
        },
    )
    assert check(QUERIES, [scaled]) == []


@pytest.mark.parametrize(
    ("query", "single"),
    [
        ("sum(vllm:num_requests_waiting)", True),
        ("max by () (vllm:kv_cache_usage_perc)", True),
        ("(histogram_quantile(0.99, sum by (le) (rate(x_bucket[2m]))) > 0) or vector(0)", True),
        ("sum(rate(a[1m])) / sum(rate(b[1m]))", True),
        ("-sum(x) + 1", True),
        ('sum(x{path="/a,b(c)"})', True),
        ("vllm:num_requests_waiting", False),
        ("rate(vllm:request_success_total[1m])", False),
        ("sum by (pod) (x)", False),
        ("sum without (pod) (x)", False),
        ("histogram_quantile(0.9, sum by (le, pod) (rate(x_bucket[1m])))", False),
        ("sum(a) / b", False),
        ("predict_linear((sum(rate(a[1m])))[10m:1m], 300) or vector(0)", True),
        ("predict_linear((rate(a[1m]))[10m:1m], 300)", False),
    ],
)
def test_query_shape_decides_whether_one_series_is_returned(query: str, single: bool) -> None:
    from policies.platform_policies import promql

    assert promql.returns_single_series(query) is single


@pytest.mark.parametrize(
    ("query", "seconds"),
    [
        ("sum(vllm:kv_cache_usage_perc)", 0),
        ('sum(rate(a{path="[9d]"}[5m] offset 1d))', 86_400 + 300),
        ("predict_linear((sum(rate(a[1m])))[10m:1m], 300) or vector(0)", 600 + 60),
        ("sum(rate(a[1m])) / sum(rate(b[2h] offset 1h))", 3 * 3600),
    ],
)
def test_a_querys_look_back_is_its_farthest_range_with_offsets_and_enclosing_subqueries(
    query: str, seconds: int
) -> None:
    from policies.platform_policies import promql

    assert promql.look_back_seconds(query) == seconds


# --- quantiles use Value ---------------------------------------------------------------------

VALUE_TYPE = "latency-triggers-use-value-metric-type"


# A latency quantile as the platform renders it, for cases that need one whatever the planner enabled.
E2E_QUANTILE = (
    "histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket"
    '{namespace="inference",model_name="m"}[120s])))'
)


@violates(VALUE_TYPE)
def test_latency_trigger_with_average_value_is_reported(prod: StackRun) -> None:
    scaled = with_query(first(prod, "ScaledObject"), "e2e-latency", E2E_QUANTILE)
    mutated = with_inputs(scaled, lambda i: trigger(i, "e2e-latency").update(metricType="AverageValue"))
    assert_reported(check(VALUE_TYPE, [mutated]), VALUE_TYPE, meta_name(scaled), "e2e-latency", "AverageValue")


@violates(VALUE_TYPE)
def test_latency_trigger_without_metric_type_is_reported(prod: StackRun) -> None:
    scaled = with_query(first(prod, "ScaledObject"), "e2e-latency", E2E_QUANTILE)
    mutated = with_inputs(scaled, lambda i: trigger(i, "e2e-latency").pop("metricType"))
    assert_reported(check(VALUE_TYPE, [mutated]), VALUE_TYPE, meta_name(scaled), "e2e-latency")


# --- scale down slower than up -------------------------------------------------------------

SLOW_DOWN = "scale-down-slower-than-scale-up"


@violates(SLOW_DOWN)
def test_scale_down_window_not_longer_than_scale_up_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    down = behavior(scaled.inputs)["scaleDown"]["stabilizationWindowSeconds"]
    mutated = with_inputs(scaled, lambda i: behavior(i)["scaleUp"].update(stabilizationWindowSeconds=down))
    assert_reported(check(SLOW_DOWN, [mutated]), SLOW_DOWN, meta_name(scaled), "stabilization window")


@violates(SLOW_DOWN)
def test_scale_down_faster_than_scale_up_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    mutated = with_inputs(
        scaled,
        lambda i: behavior(i)["scaleDown"].update(policies=[{"type": "Percent", "value": 100, "periodSeconds": 15}]),
    )
    assert_reported(check(SLOW_DOWN, [mutated]), SLOW_DOWN, meta_name(scaled), "scale-down rate")


@violates(SLOW_DOWN)
def test_scaled_object_without_behavior_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    mutated = with_inputs(scaled, lambda i: i["spec"].pop("advanced"))
    assert_reported(check(SLOW_DOWN, [mutated]), SLOW_DOWN, meta_name(scaled), "scale-down rate")


def test_minimum_scale_down_window_comes_from_policy_config(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    minimum = int(behavior(scaled.inputs)["scaleDown"]["stabilizationWindowSeconds"]) + 1
    assert_reported(
        check(SLOW_DOWN, [scaled], {SLOW_DOWN: {"minScaleDownStabilizationSeconds": minimum}}),
        SLOW_DOWN,
        meta_name(scaled),
        f"below {minimum}s",
    )


# --- warm replica --------------------------------------------------------------------------

WARM = "interactive-models-keep-a-warm-replica"


@violates(WARM)
def test_interactive_scaled_object_with_min_zero_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    mutated = with_inputs(scaled, lambda i: i["spec"].update(minReplicaCount=0))
    assert_reported(check(WARM, [mutated]), WARM, meta_name(scaled), "minReplicaCount is 0")


@violates(WARM)
def test_scaled_object_without_min_replica_count_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    mutated = with_inputs(scaled, lambda i: i["spec"].pop("minReplicaCount"))
    assert_reported(check(WARM, [mutated]), WARM, meta_name(scaled), "not set")


@violates(WARM)
def test_idle_replica_count_zero_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    mutated = with_inputs(scaled, lambda i: i["spec"].update(idleReplicaCount=0))
    assert_reported(check(WARM, [mutated]), WARM, meta_name(scaled), "idleReplicaCount")


@violates(WARM)
def test_a_lone_warm_replica_is_reported_where_the_stack_keeps_two(prod: StackRun) -> None:
    # policies/config/prod.json: a single replica on spot is one interruption from an outage
    scaled = first(prod, "ScaledObject")
    mutated = with_inputs(scaled, lambda i: i["spec"].update(minReplicaCount=1))
    assert_reported(check(WARM, [mutated], {WARM: {"minReplicas": 2}}), WARM, meta_name(scaled), "at least 2 warm")


def test_one_warm_replica_meets_the_policys_default(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    assert check(WARM, [with_inputs(scaled, lambda i: i["spec"].update(minReplicaCount=1))]) == []


def test_batch_labelled_scaled_object_may_scale_to_zero(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")

    def batch(i: dict[str, Any]) -> None:
        i["spec"]["minReplicaCount"] = 0
        i["metadata"]["labels"]["inference-platform/workload"] = "batch"

    assert check(WARM, [with_inputs(scaled, batch)]) == []


def test_batch_model_scaled_to_zero_by_config_passes() -> None:
    import json

    from tests.harness import run_program, stack_config

    config = stack_config("dev")
    models = json.loads(config["inference-platform:models"])
    models[0]["workload"] = "batch"
    autoscaling = json.loads(config["inference-platform:autoscaling"])
    autoscaling["default"]["minReplicas"] = 0
    autoscaling["default"].setdefault("triggers", {}).setdefault("cron", {})["enabled"] = True  # its wake-up
    config |= {
        "inference-platform:models": json.dumps(models),
        "inference-platform:autoscaling": json.dumps(autoscaling),
    }
    assert check(WARM, run_program("dev", config).resources) == []


# --- scale to zero needs a wake-up ----------------------------------------------------------

WAKE = "scale-to-zero-has-a-wake-up"


def batch_at_zero(mutate_triggers: Callable[[list[dict[str, Any]]], None]) -> Callable[[dict[str, Any]], None]:
    def mutate(i: dict[str, Any]) -> None:
        i["spec"]["minReplicaCount"] = 0
        i["metadata"]["labels"]["inference-platform/workload"] = "batch"
        mutate_triggers(i["spec"]["triggers"])

    return mutate


def only_vllm_queries(triggers: list[dict[str, Any]]) -> None:
    triggers[:] = [t for t in triggers if t["type"] == "prometheus"]
    assert triggers and all("vllm:" in t["metadata"]["query"] for t in triggers)


@violates(WAKE)
def test_scaled_object_at_zero_with_only_vllm_triggers_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    mutated = with_inputs(scaled, batch_at_zero(only_vllm_queries))
    assert_reported(check(WAKE, [mutated]), WAKE, meta_name(scaled), "nothing can wake it")


def test_scaled_object_at_zero_with_a_cron_window_passes(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    cron = {
        "type": "cron",
        "metadata": {"timezone": "UTC", "start": "0 8 * * *", "end": "0 20 * * *", "desiredReplicas": "1"},
    }
    assert check(WAKE, [with_inputs(scaled, batch_at_zero(lambda ts: ts.append(cron)))]) == []


def test_scaled_object_with_a_warm_replica_needs_no_wake_up(prod: StackRun) -> None:
    assert check(WAKE, [first(prod, "ScaledObject")]) == []


# --- GPU pods ---------------------------------------------------------------------------------

GPU_PODS = "gpu-workloads-tolerate-taint-and-request-whole-gpus"


@violates(GPU_PODS)
def test_predictor_without_gpu_toleration_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    mutated = with_inputs(isvc, lambda i: predictor_spec(i).pop("tolerations"))
    assert_reported(check(GPU_PODS, [mutated]), GPU_PODS, meta_name(isvc), "does not tolerate")


@violates(GPU_PODS)
def test_predictor_gpu_request_differing_from_limit_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    mutated = with_inputs(isvc, lambda i: serving_container(i)["resources"]["limits"].update({"nvidia.com/gpu": "2"}))
    assert_reported(check(GPU_PODS, [mutated]), GPU_PODS, meta_name(isvc), "requests 1", "limits 2")


@violates(GPU_PODS)
def test_fractional_gpu_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")

    def half(i: dict[str, Any]) -> None:
        for side in ("requests", "limits"):
            serving_container(i)["resources"][side]["nvidia.com/gpu"] = "500m"

    assert_reported(check(GPU_PODS, [with_inputs(isvc, half)]), GPU_PODS, meta_name(isvc), "whole devices")


@violates(GPU_PODS)
def test_deployment_asking_for_a_gpu_without_toleration_is_reported(prod: StackRun) -> None:
    deployment = first(prod, "StatefulSet")
    mutated = with_inputs(
        deployment,
        lambda i: i["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].update({"nvidia.com/gpu": "1"}),
    )
    assert_reported(check(GPU_PODS, [mutated]), GPU_PODS, meta_name(deployment), "does not tolerate")


# --- NodePools -------------------------------------------------------------------------------

POOLS = "gpu-node-pools-limited-tainted-with-fallback"
FAMILIES = "gpu-node-pools-use-allowed-instance-families"


def pool(run: StackRun, name: str) -> Captured:
    return next(p for p in of_kind(run, "NodePool") if meta_name(p) == name)


@violates(POOLS)
def test_gpu_pool_without_gpu_limit_is_reported(prod: StackRun) -> None:
    spot = pool(prod, "gpu-spot")
    mutated = with_inputs(spot, lambda i: i["spec"].pop("limits"))
    assert_reported(check_stack(POOLS, prod, spot, mutated), POOLS, "NodePool gpu-spot", "limits")


@violates(POOLS)
def test_gpu_pool_without_gpu_taint_is_reported(prod: StackRun) -> None:
    spot = pool(prod, "gpu-spot")
    mutated = with_inputs(spot, lambda i: i["spec"]["template"]["spec"].update(taints=[]))
    assert_reported(check_stack(POOLS, prod, spot, mutated), POOLS, "NodePool gpu-spot", "taint")


def test_pool_of_gpu_families_without_any_gpu_marker_is_still_a_gpu_pool(prod: StackRun) -> None:
    spot = pool(prod, "gpu-spot")

    def bare(i: dict[str, Any]) -> None:
        i["spec"].pop("limits")
        i["spec"]["template"]["spec"]["taints"] = []
        i["spec"]["template"]["metadata"]["labels"] = {}
        i["spec"]["template"]["spec"]["requirements"] = [
            r for r in i["spec"]["template"]["spec"]["requirements"] if "instance-gpu" not in r["key"]
        ]

    violations = check_stack(POOLS, prod, spot, with_inputs(spot, bare))
    assert_reported(violations, POOLS, "NodePool gpu-spot", "limits")
    assert_reported(violations, POOLS, "NodePool gpu-spot", "taint")


@violates(POOLS)
def test_spot_pool_without_on_demand_fallback_is_reported(prod: StackRun) -> None:
    violations = check_stack(POOLS, prod, pool(prod, "gpu-on-demand"), None)
    assert_reported(violations, POOLS, "NodePool gpu-spot", "on-demand fallback")


def test_on_demand_pool_weighted_above_spot_is_not_a_fallback(prod: StackRun) -> None:
    on_demand = pool(prod, "gpu-on-demand")
    mutated = with_inputs(on_demand, lambda i: i["spec"].update(weight=200))
    assert_reported(check_stack(POOLS, prod, on_demand, mutated), POOLS, "NodePool gpu-spot", "on-demand fallback")


@violates(FAMILIES)
def test_instance_family_outside_the_allowed_list_is_reported(prod: StackRun) -> None:
    spot = pool(prod, "gpu-spot")

    def p5(i: dict[str, Any]) -> None:
        for requirement in i["spec"]["template"]["spec"]["requirements"]:
            if requirement["key"].endswith("/instance-family"):
                requirement["values"] = ["g6", "p5"]

    assert_reported(check(FAMILIES, [with_inputs(spot, p5)]), FAMILIES, "NodePool gpu-spot", "['p5']")


@violates(FAMILIES)
def test_gpu_pool_without_family_restriction_is_reported(prod: StackRun) -> None:
    spot = pool(prod, "gpu-spot")
    mutated = with_inputs(
        spot,
        lambda i: i["spec"]["template"]["spec"].update(
            requirements=[
                r for r in i["spec"]["template"]["spec"]["requirements"] if not r["key"].endswith("/instance-family")
            ]
        ),
    )
    assert_reported(check(FAMILIES, [mutated]), FAMILIES, "NodePool gpu-spot", "does not restrict")


def test_allowed_families_come_from_policy_config(prod: StackRun) -> None:
    spot = pool(prod, "gpu-spot")
    violations = check(FAMILIES, [spot], {FAMILIES: {"allowedInstanceFamilies": ["g5"]}})
    assert_reported(violations, FAMILIES, "NodePool gpu-spot", "['g6']")


# --- GPU budget --------------------------------------------------------------------------------

BUDGET = "gpu-budget-fits-node-pools"


@violates(BUDGET)
def test_max_replicas_beyond_the_pools_gpu_limits_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    beyond = prod_pool_gpus() + 1
    mutated = with_inputs(scaled, lambda i: i["spec"].update(maxReplicaCount=beyond))
    assert_reported(check_stack(BUDGET, prod, scaled, mutated), BUDGET, meta_name(scaled), f"maxReplicas {beyond}")


@violates(BUDGET)
def test_models_together_beyond_the_pools_gpu_limits_are_reported(prod: StackRun) -> None:
    # Each model alone fits the prod pools; together (two thirds of them each) they do not.
    gpus = prod_pool_gpus()
    resources = list(prod.resources)
    for scaled, maximum in zip(of_kind(prod, "ScaledObject"), (2 * gpus // 3, 2 * gpus // 3)):
        resources = swap(
            resources, scaled, with_inputs(scaled, lambda i, m=maximum: i["spec"].update(maxReplicaCount=m))
        )
    assert_reported(check(BUDGET, resources), BUDGET, "all autoscalers together", f"{gpus} GPUs")


def test_init_container_gpus_are_not_added_to_the_replica(dev: StackRun) -> None:
    # dev: maxReplicas 3 x 1 GPU = the 3 GPUs of its pools; a GPU init container keeps it at 1 per replica.
    isvc = first(dev, "InferenceService")
    mutated = with_inputs(
        isvc,
        lambda i: (
            predictor_spec(i)["initContainers"][0]
            .setdefault("resources", {})
            .setdefault("limits", {})
            .update({"nvidia.com/gpu": "1"})
        ),
    )
    assert check_stack(BUDGET, dev, isvc, mutated) == []


@violates(BUDGET)
def test_pool_limits_above_max_gpus_per_stack_are_reported(prod: StackRun) -> None:
    violations = check(BUDGET, prod.resources, {BUDGET: {"maxGpusPerStack": 16}})
    assert_reported(violations, BUDGET, "gpu-spot", f"{prod_pool_gpus()} GPUs", "maxGpusPerStack 16")


@violates(BUDGET)
def test_scaled_object_for_a_missing_predictor_is_reported(prod: StackRun) -> None:
    scaled = first(prod, "ScaledObject")
    mutated = with_inputs(scaled, lambda i: i["spec"]["scaleTargetRef"].update(name="qwen-typo-predictor"))
    assert_reported(check_stack(BUDGET, prod, scaled, mutated), BUDGET, meta_name(scaled), "qwen-typo-predictor")


# --- S3 -----------------------------------------------------------------------------------------

S3 = "s3-buckets-private-encrypted-versioned-tls-only"


def bucket_setting(run: StackRun, type_suffix: str) -> Captured:
    return next(r for r in run.resources if r.type.startswith("aws:s3/") and r.type.endswith(type_suffix))


@violates(S3)
def test_bucket_without_public_access_block_is_reported(prod: StackRun) -> None:
    block = bucket_setting(prod, ":BucketPublicAccessBlock")
    assert_reported(check_stack(S3, prod, block, None), S3, "llm-prod-models-weights", "BucketPublicAccessBlock")


@violates(S3)
def test_public_access_block_with_a_flag_off_is_reported(prod: StackRun) -> None:
    block = bucket_setting(prod, ":BucketPublicAccessBlock")
    mutated = with_inputs(block, lambda i: i.update(restrictPublicBuckets=False))
    assert_reported(check_stack(S3, prod, block, mutated), S3, "llm-prod-models-weights", "restrictPublicBuckets")


@violates(S3)
def test_bucket_without_default_encryption_is_reported(prod: StackRun) -> None:
    sse = bucket_setting(prod, ":BucketServerSideEncryptionConfiguration")
    assert_reported(check_stack(S3, prod, sse, None), S3, "llm-prod-models-weights", "encryption")


@violates(S3)
def test_bucket_with_suspended_versioning_is_reported(prod: StackRun) -> None:
    versioning = bucket_setting(prod, ":BucketVersioning")
    mutated = with_inputs(versioning, lambda i: i["versioningConfiguration"].update(status="Suspended"))
    assert_reported(check_stack(S3, prod, versioning, mutated), S3, "llm-prod-models-weights", "versioning")


@violates(S3)
def test_bucket_policy_without_tls_deny_is_reported(prod: StackRun) -> None:
    bucket_policy = bucket_setting(prod, ":BucketPolicy")
    mutated = with_inputs(bucket_policy, lambda i: i.update(policy=i["policy"].replace('"false"', '"true"')))
    assert_reported(check_stack(S3, prod, bucket_policy, mutated), S3, "llm-prod-models-weights", "TLS")


def test_settings_of_one_bucket_do_not_cover_another(prod: StackRun) -> None:
    bucket = bucket_setting(prod, ":Bucket")
    other = Captured(
        bucket.type, "scratch", {"forceDestroy": True}, bucket.urn.replace(bucket.name, "scratch"), "", True
    )
    violations = check_stack(S3, prod, None, other)
    assert_reported(violations, S3, "S3 bucket 'scratch'", "BucketPublicAccessBlock")
    assert all("scratch" in v.message for v in violations)


# --- pinned images and revisions ---------------------------------------------------------------

PINNED = "images-and-model-revisions-pinned"


@violates(PINNED)
def test_image_without_tag_is_reported(prod: StackRun) -> None:
    deployment = first(prod, "StatefulSet")
    mutated = with_inputs(deployment, lambda i: i["spec"]["template"]["spec"]["containers"][0].update(image="redis"))
    assert_reported(check(PINNED, [mutated]), PINNED, meta_name(deployment), "image redis has no tag")


@violates(PINNED)
def test_latest_image_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    mutated = with_inputs(isvc, lambda i: serving_container(i).update(image="vllm/vllm-openai:latest"))
    assert_reported(check(PINNED, [mutated]), PINNED, meta_name(isvc), "latest")


@violates(PINNED)
def test_an_image_pinned_by_tag_only_is_reported(prod: StackRun) -> None:
    """A tag can be re-pushed (Docker Official Images rebuild theirs when the base updates)."""
    job = first(prod, "Job")
    mutated = with_inputs(job, lambda i: i["spec"]["template"]["spec"]["containers"][0].update(image="python:3.11"))
    assert_reported(check(PINNED, [mutated]), PINNED, meta_name(job), "python:3.11 is pinned by tag only")


def test_a_stack_that_waives_digests_accepts_an_image_pinned_by_tag(prod: StackRun) -> None:
    job = first(prod, "Job")
    mutated = with_inputs(job, lambda i: i["spec"]["template"]["spec"]["containers"][0].update(image="python:3.11"))
    assert check(PINNED, [mutated], {PINNED: {"requireDigest": False}}) == []


@violates(PINNED)
def test_vllm_image_other_than_the_signals_version_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    mutated = with_inputs(isvc, lambda i: serving_container(i).update(image="vllm/vllm-openai:v0.9.2"))
    assert_reported(check(PINNED, [mutated]), PINNED, meta_name(isvc), "v0.9.2", signals.VLLM_IMAGE_TAG)


@violates(PINNED)
def test_branch_name_as_model_revision_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")

    def main_branch(i: dict[str, Any]) -> None:
        for container in predictor_spec(i)["initContainers"]:
            args = container["args"]
            args[args.index("--revision") + 1] = "main"

    assert_reported(check(PINNED, [with_inputs(isvc, main_branch)]), PINNED, meta_name(isvc), "--revision 'main'")


def test_the_captured_predictor_carries_a_model_revision(prod: StackRun) -> None:
    """The revision rule has something to check on the real predictor (its manifest-wait init container)."""
    isvc = first(prod, "InferenceService")
    assert any("--revision" in c.get("args", []) for c in predictor_spec(isvc.inputs)["initContainers"])


@violates(PINNED)
def test_helm_chart_without_exact_version_is_reported(prod: StackRun) -> None:
    release = prod.of_type("kubernetes:helm.sh/v3:Release")[0]
    mutated = with_inputs(release, lambda i: i.update(version="^1.0"))
    assert_reported(check(PINNED, [mutated]), PINNED, release.name, "'^1.0'")


@violates(PINNED)
def test_floating_node_ami_alias_is_reported() -> None:
    node_class = k8s_object(
        "karpenter.k8s.aws/v1", "EC2NodeClass", {"name": "gpu"}, {"amiSelectorTerms": [{"alias": "al2023@latest"}]}
    )
    assert_reported(check(PINNED, [node_class]), PINNED, "EC2NodeClass gpu", "al2023@latest")


# --- AI routes ---------------------------------------------------------------------------------

ROUTES = "ai-routes-require-api-key-and-rate-limit"


@violates(ROUTES)
def test_security_policy_targeting_a_missing_route_is_reported(prod: StackRun) -> None:
    auth = first(prod, "SecurityPolicy")
    mutated = with_inputs(
        auth,
        lambda i: i["spec"].update(
            targetRefs=[{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "inference-route"}]
        ),
    )
    violations = check_stack(ROUTES, prod, auth, mutated)
    assert_reported(violations, ROUTES, meta_name(auth), "inference-route", "does not exist")
    assert_reported(violations, ROUTES, meta_name(first(prod, "AIGatewayRoute")), "API-key")


@violates(ROUTES)
def test_security_policy_targeting_the_ai_gateway_route_kind_is_reported(prod: StackRun) -> None:
    auth, route = first(prod, "SecurityPolicy"), first(prod, "AIGatewayRoute")
    mutated = with_inputs(
        auth,
        lambda i: i["spec"].update(
            targetRefs=[{"group": "aigateway.envoyproxy.io", "kind": "AIGatewayRoute", "name": meta_name(route)}]
        ),
    )
    violations = check_stack(ROUTES, prod, auth, mutated)
    assert_reported(violations, ROUTES, meta_name(auth), "cannot attach")
    assert_reported(violations, ROUTES, meta_name(route), "API-key")


@violates(ROUTES)
def test_route_without_api_key_policy_is_reported(prod: StackRun) -> None:
    violations = check_stack(ROUTES, prod, first(prod, "SecurityPolicy"), None)
    assert_reported(violations, ROUTES, meta_name(first(prod, "AIGatewayRoute")), "API-key")


@violates(ROUTES)
def test_route_level_policy_without_api_key_overrides_the_gateway_one(prod: StackRun) -> None:
    route = first(prod, "AIGatewayRoute")
    namespace = route.inputs["metadata"]["namespace"]
    cors_only = k8s_object(
        "gateway.envoyproxy.io/v1alpha1",
        "SecurityPolicy",
        {"name": "cors", "namespace": namespace},
        {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": meta_name(route)}],
            "cors": {"allowOrigins": ["https://chat.example.com"]},
        },
    )
    assert_reported(check_stack(ROUTES, prod, None, cors_only), ROUTES, meta_name(route), "SecurityPolicy")


@violates(ROUTES)
def test_http_route_to_a_predictor_on_another_gateway_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    namespace = isvc.inputs["metadata"]["namespace"]
    bypass = k8s_object(
        "gateway.networking.k8s.io/v1",
        "HTTPRoute",
        {"name": "direct", "namespace": namespace},
        {
            "parentRefs": [{"kind": "Gateway", "name": "debug"}],
            "rules": [{"backendRefs": [{"name": f"{meta_name(isvc)}-predictor", "port": 80}]}],
        },
    )
    violations = check_stack(ROUTES, prod, None, bypass)
    assert_reported(violations, ROUTES, f"HTTPRoute {namespace}/direct", "API-key")
    assert_reported(violations, ROUTES, f"HTTPRoute {namespace}/direct", "rate limit")


def test_http_route_to_a_predictor_on_the_protected_gateway_is_covered(prod: StackRun) -> None:
    route = first(prod, "AIGatewayRoute")
    namespace, parent = route.inputs["metadata"]["namespace"], route.inputs["spec"]["parentRefs"][0]
    extra = k8s_object(
        "gateway.networking.k8s.io/v1",
        "HTTPRoute",
        {"name": "extra", "namespace": namespace},
        {
            "parentRefs": [dict(parent)],
            "rules": [{"backendRefs": [{"name": "qwen25-7b-awq-predictor", "port": 80}]}],
        },
    )
    assert check_stack(ROUTES, prod, None, extra) == []


@violates(ROUTES)
def test_route_without_rate_limit_is_reported(prod: StackRun) -> None:
    limits = first(prod, "BackendTrafficPolicy")
    mutated = with_inputs(limits, lambda i: i["spec"].pop("rateLimit"))
    assert_reported(
        check_stack(ROUTES, prod, limits, mutated), ROUTES, meta_name(first(prod, "AIGatewayRoute")), "rate limit"
    )


# --- predictors drain ---------------------------------------------------------------------------

DRAIN = "predictors-probed-drained-and-disruption-budgeted"


@violates(DRAIN)
def test_predictor_without_startup_probe_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    mutated = with_inputs(isvc, lambda i: serving_container(i).pop("startupProbe"))
    assert_reported(check_stack(DRAIN, prod, isvc, mutated), DRAIN, meta_name(isvc), "startupProbe")


@violates(DRAIN)
def test_predictor_without_readiness_probe_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    mutated = with_inputs(isvc, lambda i: serving_container(i).pop("readinessProbe"))
    assert_reported(check_stack(DRAIN, prod, isvc, mutated), DRAIN, meta_name(isvc), "readinessProbe")


@violates(DRAIN)
def test_predictor_without_prestop_hook_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    mutated = with_inputs(isvc, lambda i: serving_container(i).pop("lifecycle"))
    assert_reported(check_stack(DRAIN, prod, isvc, mutated), DRAIN, meta_name(isvc), "preStop")


@violates(DRAIN)
def test_grace_period_shorter_than_the_route_timeout_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    mutated = with_inputs(isvc, lambda i: predictor_spec(i).update(terminationGracePeriodSeconds=30))
    assert_reported(
        check_stack(DRAIN, prod, isvc, mutated),
        DRAIN,
        meta_name(isvc),
        "terminationGracePeriodSeconds 30",
        "timeouts.request",
    )


def test_route_without_timeout_counts_as_the_ai_gateway_default(prod: StackRun) -> None:
    route, isvc = first(prod, "AIGatewayRoute"), first(prod, "InferenceService")

    def no_timeouts(i: dict[str, Any]) -> None:
        for rule in i["spec"]["rules"]:
            rule.pop("timeouts", None)

    resources = swap(
        swap(prod.resources, route, with_inputs(route, no_timeouts)),
        isvc,
        with_inputs(isvc, lambda i: predictor_spec(i).update(terminationGracePeriodSeconds=45)),
    )
    assert_reported(check(DRAIN, resources), DRAIN, meta_name(isvc), "60s")


@violates(DRAIN)
def test_predictor_without_disruption_budget_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    pdb = next(
        p
        for p in of_kind(prod, "PodDisruptionBudget")
        if p.inputs["spec"]["selector"]["matchLabels"].get("serving.kserve.io/inferenceservice") == meta_name(isvc)
    )
    assert_reported(check_stack(DRAIN, prod, pdb, None), DRAIN, meta_name(isvc), "PodDisruptionBudget")


@violates(DRAIN)
def test_disruption_budget_blocking_every_drain_is_reported(prod: StackRun) -> None:
    pdb = first(prod, "PodDisruptionBudget")
    mutated = with_inputs(pdb, lambda i: i["spec"].update(maxUnavailable=0))
    assert_reported(check_stack(DRAIN, prod, pdb, mutated), DRAIN, meta_name(pdb), "blocks every node drain")


# --- EKS control plane ----------------------------------------------------------------------------

EKS = "eks-control-plane-logged-encrypted-private"


def eks_cluster(run: StackRun) -> Captured:
    return run.of_type("eks:index:Cluster")[0]


def as_aws_cluster(component: Captured) -> Captured:
    """The `aws:eks/cluster:Cluster` pulumi_eks creates from these inputs (what a real preview analyzes)."""
    i = component.inputs
    inputs = {
        "name": i["name"],
        "enabledClusterLogTypes": list(i["enabledClusterLogTypes"]),
        "encryptionConfig": {"provider": {"keyArn": i["encryptionConfigKeyArn"]}, "resources": ["secrets"]},
        "vpcConfig": {
            "endpointPrivateAccess": i["endpointPrivateAccess"],
            "endpointPublicAccess": i["endpointPublicAccess"],
            **({"publicAccessCidrs": list(i["publicAccessCidrs"])} if i.get("publicAccessCidrs") else {}),
        },
    }
    return Captured(
        "aws:eks/cluster:Cluster",
        f"{component.name}-eksCluster",
        inputs,
        component.urn + "-eksCluster",
        component.urn,
        True,
    )


@violates(EKS)
def test_cluster_without_audit_logs_is_reported(prod: StackRun) -> None:
    cluster = eks_cluster(prod)
    mutated = with_inputs(cluster, lambda i: i.update(enabledClusterLogTypes=["api"]))
    assert_reported(check(EKS, [mutated]), EKS, cluster.name, "'audit'")


@violates(EKS)
def test_cluster_without_secrets_encryption_is_reported(prod: StackRun) -> None:
    cluster = eks_cluster(prod)
    mutated = with_inputs(cluster, lambda i: i.pop("encryptionConfigKeyArn"))
    assert_reported(check(EKS, [mutated]), EKS, cluster.name, "Secrets")


@violates(EKS)
def test_public_endpoint_without_allowlist_is_reported(prod: StackRun) -> None:
    cluster = eks_cluster(prod)
    mutated = with_inputs(cluster, lambda i: i.update(endpointPublicAccess=True))
    assert_reported(check(EKS, [mutated]), EKS, cluster.name, "without a CIDR allowlist")


@violates(EKS)
def test_public_endpoint_open_to_the_internet_is_reported(prod: StackRun) -> None:
    aws_cluster = as_aws_cluster(eks_cluster(prod))
    mutated = with_inputs(
        aws_cluster, lambda i: i["vpcConfig"].update(endpointPublicAccess=True, publicAccessCidrs=["0.0.0.0/0"])
    )
    assert_reported(check(EKS, [mutated]), EKS, aws_cluster.name, "0.0.0.0/0")


def test_raw_eks_cluster_as_generated_passes(prod: StackRun) -> None:
    assert check(EKS, [as_aws_cluster(eks_cluster(prod))]) == []


def test_raw_eks_cluster_defaults_to_a_public_endpoint(prod: StackRun) -> None:
    aws_cluster = with_inputs(as_aws_cluster(eks_cluster(prod)), lambda i: i["vpcConfig"].pop("endpointPublicAccess"))
    assert_reported(check(EKS, [aws_cluster]), EKS, aws_cluster.name, "without a CIDR allowlist")


def test_public_endpoint_with_an_allowlist_passes(prod: StackRun) -> None:
    cluster = with_inputs(
        eks_cluster(prod), lambda i: i.update(endpointPublicAccess=True, publicAccessCidrs=["203.0.113.0/24"])
    )
    assert check(EKS, [cluster]) == []


@pytest.mark.parametrize(
    ("stack_name", "level"), [("dev", EnforcementLevel.ADVISORY), ("prod", EnforcementLevel.MANDATORY)]
)
def test_eks_rule_is_advisory_in_dev_and_mandatory_in_prod(
    stack_name: str, level: EnforcementLevel, prod: StackRun
) -> None:
    cluster = with_inputs(eks_cluster(prod), lambda i: i.update(endpointPublicAccess=True))
    violations = check(EKS, [cluster], load_config(stack_name))
    assert violations and {v.level for v in violations} == {level}


def test_stack_policies_are_stack_validation_policies() -> None:
    stack_level = {p.name for p in POLICIES if isinstance(p, StackValidationPolicy)}
    assert stack_level == {
        POOLS,
        BUDGET,
        S3,
        ROUTES,
        DRAIN,
        "auto-mode-node-class-tags-permitted",
        "network-policies-enforced",
        "predictors-reachable-only-through-gateway",
        "private-endpoint-has-a-deploy-path",
        "load-balancer-class-has-its-controller",
        "gpu-node-pools-advertise-gpus",
        # The rules that join resources (a role to its policies, a pod to its service account).
        "iam-policies-grant-least-privilege",
        "model-mount-is-read-only",
        "predictors-have-no-aws-identity",
        "platform-pods-mount-no-api-token",
        "platform-workloads-reachable-only-from-named-pods",
        "quotas-charged-to-the-authenticated-client",
        "predictors-accept-only-the-gateway-key",
        "rate-limit-store-authenticated",
        "vpc-flow-logs-capture-all-traffic",
        "token-budgets-charge-recorded-costs",
        "endpoint-picker-highly-available",
        # The rules for the controls issue 24 added (a namespace to its pods, a role to its association).
        "model-store-writes-create-only",
        "model-writer-alone-in-its-namespace",
        "token-budgets-see-streamed-usage",
        "gateway-terminates-tls",
        "platform-namespaces-deny-egress-by-default",
        "predictors-admit-prometheus-on-the-metrics-port-only",
        "rate-limit-service-reachable-only-from-envoy",
        "operator-namespaces-deny-ingress-by-default",
        "platform-namespaces-enforce-pod-security",
        # A trigger's query against the stack's Prometheus release (issue 36's forecasts read a day back).
        "trigger-look-back-within-prometheus-retention",
        "bucket-keys-name-their-users",
        "eks-secrets-key-names-its-users",
    }


# --- the pack as the Pulumi CLI runs it ----------------------------------------------------------


@pytest.fixture(scope="module")
def pack() -> Any:
    """`policies/` started the way the CLI's Python analyzer starts it (`python -m pulumi.policy
    <engine> <pack dir>`, from the pack directory); a gRPC stub to its Analyzer service."""
    import select
    import subprocess
    import sys

    import grpc
    from pulumi.runtime.proto import analyzer_pb2_grpc

    from tests.harness import ROOT

    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", "."],
        cwd=ROOT / "policies",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The pack prints its port once it serves; bounded, so a hung start fails instead of hanging.
        ready, _, _ = select.select([process.stdout], [], [], 60)
        port = process.stdout.readline().strip() if ready else ""
        assert port.isdigit(), (
            f"policy pack did not start: {process.stderr.read() if process.poll() is not None else port}"
        )
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=20)
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
        channel.close()
    finally:
        process.kill()
        process.wait(timeout=10)


def _struct(value: dict[str, Any]) -> Any:
    import json

    from google.protobuf import struct_pb2

    struct = struct_pb2.Struct()
    struct.update(json.loads(json.dumps(value, default=str)))
    return struct


def _configure(pack: Any, stack_name: str) -> None:
    from pulumi.runtime.proto import analyzer_pb2

    levels = {"advisory": analyzer_pb2.ADVISORY, "mandatory": analyzer_pb2.MANDATORY, "disabled": analyzer_pb2.DISABLED}
    config = {}
    for p in POLICIES:
        entry = load_config(stack_name).get(p.name, {})
        level = entry if isinstance(entry, str) else entry.get("enforcementLevel", p.enforcement_level.value)
        props = {k: v for k, v in entry.items() if k != "enforcementLevel"} if isinstance(entry, dict) else {}
        config[p.name] = analyzer_pb2.PolicyConfig(enforcementLevel=levels[level], properties=_struct(props))
    pack.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig=config))


def test_pack_process_lists_every_policy_as_mandatory(pack: Any) -> None:
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import analyzer_pb2

    info = pack.GetAnalyzerInfo(empty_pb2.Empty())
    assert {(p.name, p.enforcementLevel) for p in info.policies} == {(p.name, analyzer_pb2.MANDATORY) for p in POLICIES}


def test_pack_process_reports_a_mutated_scaled_object(pack: Any, prod: StackRun) -> None:
    from pulumi.runtime.proto import analyzer_pb2

    _configure(pack, "prod")
    scaled = with_query(first(prod, "ScaledObject"), "kv-cache", "vllm:kv_cache_usage_perc")
    response = pack.Analyze(
        analyzer_pb2.AnalyzeRequest(
            type=scaled.type, properties=_struct(scaled.inputs), urn=scaled.urn, name=scaled.name
        )
    )
    assert [d.policyName for d in response.diagnostics] == [QUERIES]
    assert response.diagnostics[0].enforcementLevel == analyzer_pb2.MANDATORY


def test_pack_process_finds_prod_clean_and_dev_eks_rule_advisory(pack: Any, prod: StackRun) -> None:
    from pulumi.runtime.proto import analyzer_pb2

    def analyze_stack(resources: list[Captured]) -> Any:
        return pack.AnalyzeStack(
            analyzer_pb2.AnalyzeStackRequest(
                resources=[
                    analyzer_pb2.AnalyzerResource(
                        type=r.type, properties=_struct(r.inputs), urn=r.urn, name=r.name, parent=r.parent
                    )
                    for r in resources
                ]
            )
        )

    _configure(pack, "prod")
    assert list(analyze_stack(prod.resources).diagnostics) == []
    _configure(pack, "dev")
    cluster = with_inputs(eks_cluster(prod), lambda i: i.update(endpointPublicAccess=True))
    response = pack.Analyze(
        analyzer_pb2.AnalyzeRequest(
            type=cluster.type, properties=_struct(cluster.inputs), urn=cluster.urn, name=cluster.name
        )
    )
    assert [(d.policyName, d.enforcementLevel) for d in response.diagnostics] == [(EKS, analyzer_pb2.ADVISORY)]


# --- a first preview: values the engine cannot know yet ---------------------------------------------


def s3_unknowns(run: StackRun) -> dict[str, set[str]]:
    """Before the first update the bucket's id and ARN are unknown: every setting's `bucket`, the policy text."""
    unknown = {r.urn: {"bucket"} for r in run.resources if r.type.startswith("aws:s3/") and "bucket" in r.inputs}
    unknown[bucket_setting(run, ":BucketPolicy").urn] |= {"policy"}
    return unknown


def unparented(resources: list[Captured]) -> list[Captured]:
    """The stack with bucket settings no longer children of their bucket: only the engine's
    property dependencies (their `bucket` input came from the bucket) link them."""
    return [replace(r, parent="") if r.type.startswith("aws:s3/") else r for r in resources]


@pytest.fixture(scope="module")
def prod_linked() -> tuple[StackRun, Dependencies]:
    """Prod with the property dependencies the SDK registers (a bucket setting's `bucket` -> the bucket)."""
    return record_dependencies("prod")


def test_first_preview_with_unknown_bucket_ids_passes_the_model_store(
    prod_linked: tuple[StackRun, Dependencies],
) -> None:
    run, deps = prod_linked
    assert run_policy(policy(S3), unparented(run.resources), None, s3_unknowns(run), deps) == []


def test_first_preview_with_unknown_bucket_ids_still_reports_suspended_versioning(
    prod_linked: tuple[StackRun, Dependencies],
) -> None:
    run, deps = prod_linked
    versioning = bucket_setting(run, ":BucketVersioning")
    mutated = with_inputs(versioning, lambda i: i["versioningConfiguration"].update(status="Suspended"))
    violations = run_policy(
        policy(S3), unparented(swap(run.resources, versioning, mutated)), None, s3_unknowns(run), deps
    )
    assert_reported(violations, S3, "llm-prod-models-weights", "versioning")


def test_without_property_dependencies_or_parents_unknown_bucket_ids_link_nothing(prod: StackRun) -> None:
    """The control for the two tests above: the links, not luck, make them pass."""
    violations = run_policy(policy(S3), unparented(prod.resources), None, s3_unknowns(prod))
    assert_reported(violations, S3, "llm-prod-models-weights", "BucketPublicAccessBlock")


def test_unknown_kms_key_counts_as_secrets_encryption_during_preview(prod: StackRun) -> None:
    cluster = with_inputs(eks_cluster(prod), lambda i: i.update(encryptionConfigKeyArn=UNKNOWN))
    assert check(EKS, [cluster]) == []
    aws_cluster = with_inputs(
        as_aws_cluster(eks_cluster(prod)), lambda i: i["encryptionConfig"]["provider"].update(keyArn=UNKNOWN)
    )
    assert check(EKS, [aws_cluster]) == []


def test_unknown_argument_does_not_hide_a_branch_revision(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")

    def preview(i: dict[str, Any]) -> None:
        for container in predictor_spec(i)["initContainers"]:
            args = container["args"]
            args[args.index("--revision") + 1] = "main"
            args.append(UNKNOWN)

    assert_reported(check(PINNED, [with_inputs(isvc, preview)]), PINNED, meta_name(isvc), "--revision 'main'")
