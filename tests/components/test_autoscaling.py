"""Autoscaling: KEDA pinned, one ScaledObject per model built from the stack's config, and every
KEDA query returns exactly one series when a real Prometheus engine (promtool) evaluates it
against series from several predictor pods."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from components.observability.objects import prometheus_url
from contract.manifests.monitored import MonitoredModel, monitored_models
from contract.manifests.scaled_object import KEDA_VERSION, keda_triggers, scaled_object_spec
from contract.settings import StackSettings
from contract.settings.autoscaling import deep_merge
from contract.settings.stack_file import load_stack
from tests.harness import ROOT, StackRun
from tests.k8s_schemas import validate
from tests.rules.promtool import run_rule_tests

URL = "http://prometheus.test:9090"
SAMPLES = 40  # 10 minutes at 15 s


def settings(stack: str) -> StackSettings:
    return load_stack(stack, ROOT)


def with_policy(stack: str, section: dict[str, Any]) -> StackSettings:
    """The stack's `autoscaling.default` with `section` (camelCase scopes) merged on top, and none
    of the stack's per-model blocks: those hold the planner's values, which a test of how config
    becomes a ScaledObject must not depend on."""
    default = deep_merge(settings(stack).autoscaling.get("default", {}), section.get("default", {}))
    return load_stack(stack, ROOT, autoscaling={**section, "default": default})


def model(s: StackSettings, name: str | None = None) -> MonitoredModel:
    models = monitored_models(s)
    return next(m for m in models if name in (None, m.name))


def by_name(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in found}


def all_triggers_enabled() -> MonitoredModel:
    s = with_policy(
        "prod",
        {
            "default": {
                "triggers": {
                    "queueDepth": {"enabled": True},
                    "kvCache": {"enabled": True},
                    "promptTokens": {"enabled": True},
                    "e2eLatency": {"enabled": True},
                    "ttft": {"enabled": True, "thresholdSeconds": 3},
                    "cron": {"enabled": True, "desiredReplicas": 3},
                    "seasonal": {"enabled": True},
                    "trend": {"enabled": True},
                }
            }
        },
    )
    return model(s, "qwen25-14b-awq")


# --- ScaledObjects in the program -----------------------------------------------------


def scaled_objects(run: StackRun) -> list[dict[str, Any]]:
    return [r.inputs for r in run.of_kind("keda.sh/v1alpha1", "ScaledObject")]


def test_keda_chart_is_pinned_to_2_20_2(stack: StackRun) -> None:
    releases = [r.inputs for r in stack.of_type("kubernetes:helm.sh/v3:Release") if r.inputs.get("chart") == "keda"]
    assert [(r["version"], r["repositoryOpts"]["repo"]) for r in releases] == [
        (KEDA_VERSION, "https://kedacore.github.io/charts")
    ]
    assert KEDA_VERSION == "2.20.2"


def test_one_scaled_object_per_model_targets_its_predictor_deployment(prod: StackRun) -> None:
    targets = {(o["metadata"]["namespace"], o["spec"]["scaleTargetRef"]["name"]) for o in scaled_objects(prod)}
    assert targets == {("inference", "qwen25-14b-awq-predictor"), ("inference", "qwen25-7b-awq-predictor")}


def test_scaled_objects_query_the_in_cluster_prometheus(stack: StackRun) -> None:
    addresses = {
        t["metadata"]["serverAddress"]
        for o in scaled_objects(stack)
        for t in o["spec"]["triggers"]
        if t["type"] == "prometheus"
    }
    assert addresses == {prometheus_url("monitoring")}


def test_each_scaled_object_carries_its_models_merged_thresholds(prod: StackRun) -> None:
    def thresholds(triggers: list[dict[str, Any]]) -> dict[str, str | None]:
        return {t["name"]: t["metadata"].get("threshold") for t in triggers}

    deployed = {o["metadata"]["name"]: thresholds(o["spec"]["triggers"]) for o in scaled_objects(prod)}
    url = prometheus_url("monitoring")
    assert deployed == {m.name: thresholds(keda_triggers(m, url)) for m in monitored_models(settings("prod"))}


def test_per_model_override_sets_that_models_threshold_only() -> None:
    s = with_policy(
        "prod",
        {
            "default": {"triggers": {"queueDepth": {"targetPerReplica": 4}}},
            "qwen25-14b-awq": {"triggers": {"queueDepth": {"targetPerReplica": 3}}},
        },
    )
    queue = {
        m.name: by_name(keda_triggers(m, URL))["queue-depth"]["metadata"]["threshold"] for m in monitored_models(s)
    }
    assert queue == {"qwen25-14b-awq": "3", "qwen25-7b-awq": "4"}


# --- Trigger semantics -------------------------------------------------------------------


def test_additive_signals_use_average_value_and_quantiles_use_value() -> None:
    types = {name: t.get("metricType") for name, t in by_name(keda_triggers(all_triggers_enabled(), URL)).items()}
    assert types == {
        "queue-depth": "AverageValue",
        "kv-cache": "AverageValue",
        "prompt-tokens": "AverageValue",
        "forecast-seasonal": "AverageValue",
        "forecast-trend": "AverageValue",
        "e2e-latency": "Value",
        "ttft": "Value",
        "warm-peak": None,
    }


def test_queue_depth_query_is_the_windowed_sum_of_waiting_requests() -> None:
    s = with_policy("dev", {"default": {"triggers": {"queueDepth": {"windowSeconds": 60}}}})
    query = by_name(keda_triggers(model(s), URL))["queue-depth"]["metadata"]["query"]
    assert query == (
        'sum(avg_over_time(vllm:num_requests_waiting{namespace="inference",model_name="qwen25-1p5b"}[60s]))'
    )


def test_kv_cache_query_is_a_sum_over_replicas() -> None:
    s = with_policy("dev", {"default": {"triggers": {"kvCache": {"enabled": True}}}})
    query = by_name(keda_triggers(model(s), URL))["kv-cache"]["metadata"]["query"]
    assert query == 'sum(vllm:kv_cache_usage_perc{namespace="inference",model_name="qwen25-1p5b"})'


def test_a_disabled_trigger_is_left_out() -> None:
    s = with_policy("dev", {"default": {"triggers": {"kvCache": {"enabled": False}}}})
    assert "kv-cache" not in by_name(keda_triggers(model(s), URL))


def test_cron_trigger_warms_capacity_between_start_and_end() -> None:
    cron = by_name(keda_triggers(all_triggers_enabled(), URL))["warm-peak"]
    assert cron["type"] == "cron"
    assert cron["metadata"] == {
        "timezone": "UTC",
        "start": "0 8 * * 1-5",
        "end": "0 20 * * 1-5",
        "desiredReplicas": "3",
    }


def test_an_empty_result_is_an_error_for_interactive_models_so_fallback_applies() -> None:
    for trigger in keda_triggers(model(settings("prod")), URL):
        assert trigger["metadata"]["ignoreNullValues"] == "false"


def test_a_batch_model_scaled_to_zero_reads_an_empty_result_as_zero() -> None:
    s = settings("dev")
    raw_models = [m.model_copy(update={"workload": "batch"}) for m in s.models]
    default = s.autoscaling["default"]
    triggers = {**default.get("triggers", {}), "cron": {**default.get("triggers", {}).get("cron", {}), "enabled": True}}
    s = s.model_copy(update={"models": raw_models}).with_autoscaling(
        {"default": {**default, "minReplicas": 0, "triggers": triggers}}
    )
    spec = scaled_object_spec(model(s), URL)
    assert spec["minReplicaCount"] == 0
    prometheus = [t for t in spec["triggers"] if t["type"] == "prometheus"]
    assert prometheus and {t["metadata"]["ignoreNullValues"] for t in prometheus} == {"true"}


def test_replica_bounds_polling_cooldown_and_fallback_come_from_config() -> None:
    s = with_policy(
        "prod",
        {
            "qwen25-14b-awq": {
                "minReplicas": 2,
                "maxReplicas": 12,
                "fallbackReplicas": 2,
                "pollingIntervalSeconds": 30,
                "cooldownPeriodSeconds": 600,
            }
        },
    )
    spec = scaled_object_spec(model(s, "qwen25-14b-awq"), URL)
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 12)
    assert (spec["pollingInterval"], spec["cooldownPeriod"]) == (30, 600)
    assert spec["fallback"] == {"failureThreshold": 3, "replicas": 2, "behavior": "currentReplicasIfHigher"}


def test_hpa_behavior_scales_up_fast_and_down_slowly_from_config() -> None:
    s = with_policy(
        "dev",
        {
            "default": {
                "behavior": {
                    "scaleUp": {
                        "stabilizationWindowSeconds": 30,
                        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 60}],
                    },
                    "scaleDown": {
                        "stabilizationWindowSeconds": 900,
                        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 600}],
                    },
                }
            }
        },
    )
    behavior = scaled_object_spec(model(s), URL)["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"] == {
        "stabilizationWindowSeconds": 30,
        "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 60}],
    }
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 900
    assert behavior["scaleDown"]["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 600}]


# --- Exactly one series, evaluated by Prometheus' engine -----------------------------------

PODS = ("a1", "b2", "c3")


def _series(metric: str, model_name: str, pod: str, values: str, **extra: str) -> dict[str, str]:
    labels = {"namespace": "inference", "model_name": model_name, "pod": f"{model_name}-predictor-7d9f8-{pod}", **extra}
    rendered = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{rendered}}}", "values": values}


def fleet(model_name: str, busy: bool, samples: int = SAMPLES) -> list[dict[str, str]]:
    """Three replicas of `model_name` (waiting 2/4/6, KV 0.2/0.4/0.6) plus one replica of another
    model that must not leak into the query; counters and histograms flat when idle."""
    series: list[dict[str, str]] = []
    for name, pods in ((model_name, PODS), ("other-model", ("z9",))):
        for i, pod in enumerate(pods, start=1):
            series.append(_series("vllm:num_requests_waiting", name, pod, f"{2 * i}x{samples}"))
            series.append(_series("vllm:kv_cache_usage_perc", name, pod, f"{0.2 * i:.1f}x{samples}"))
            series.append(_series("vllm:prompt_tokens_total", name, pod, f"0+{500 * i if busy else 0}x{samples}"))
            for histogram in ("vllm:e2e_request_latency_seconds", "vllm:time_to_first_token_seconds"):
                for le in ("0.5", "5", "60", "+Inf"):
                    step = "0+3" if busy else "0+0"
                    series.append(_series(f"{histogram}_bucket", name, pod, f"{step}x{samples}", le=le))
    return series


def one_series(query: str, at: str = "9m") -> dict[str, Any]:
    return {"expr": f"count({query})", "eval_time": at, "exp_samples": [{"labels": "{}", "value": 1}]}


# The forecast triggers read a day back (seasonal) or a subquery's range (trend): evaluated after
# a day and ten minutes of samples.
FORECASTS = ("forecast-seasonal", "forecast-trend")
DAY_SAMPLES = 24 * 240 + 40


KEDA_QUERIES = [
    (name, trigger["metadata"]["query"])
    for name, trigger in by_name(keda_triggers(all_triggers_enabled(), URL)).items()
    if trigger["type"] == "prometheus"
]


@pytest.mark.parametrize("busy", [True, False], ids=["busy", "idle"])
@pytest.mark.parametrize(("trigger", "query"), KEDA_QUERIES, ids=[name for name, _ in KEDA_QUERIES])
def test_keda_query_returns_exactly_one_series_across_replicas(
    trigger: str, query: str, busy: bool, tmp_path: Path
) -> None:
    samples, at = (DAY_SAMPLES, "24h10m") if trigger in FORECASTS else (SAMPLES, "9m")
    series = fleet("qwen25-14b-awq", busy, samples)
    test = {"interval": "15s", "input_series": series, "promql_expr_test": [one_series(query, at)]}
    result = run_rule_tests([], [test], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_queue_depth_sums_every_replica_of_the_model_and_nothing_else(tmp_path: Path) -> None:
    query = dict(KEDA_QUERIES)["queue-depth"]
    expected = {"expr": query, "eval_time": "9m", "exp_samples": [{"labels": "{}", "value": 12}]}  # 2 + 4 + 6
    test = {"interval": "15s", "input_series": fleet("qwen25-14b-awq", True), "promql_expr_test": [expected]}
    result = run_rule_tests([], [test], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_scaled_objects_say_whether_the_model_is_interactive_or_batch(dev: StackRun) -> None:
    (scaled,) = scaled_objects(dev)
    assert scaled["metadata"]["labels"]["inference-platform/workload"] == "interactive"


def test_scaled_objects_match_the_keda_2_20_crd_and_a_misplaced_field_is_caught(prod: StackRun) -> None:
    scaled = scaled_objects(prod)[0]
    assert validate(scaled) == []
    broken = copy.deepcopy(scaled)
    broken["spec"]["fallback"]["replica"] = broken["spec"]["fallback"].pop("replicas")
    assert any("replica" in problem for problem in validate(broken))


def test_a_null_fallback_replicas_emits_no_fallback() -> None:
    s = with_policy("dev", {"default": {"fallbackReplicas": None}})
    assert "fallback" not in scaled_object_spec(model(s), URL)


def test_keda_reads_secrets_of_its_own_namespace_only(stack: StackRun) -> None:
    """keda-2.20.2 grants the operator and metrics server cluster-wide Secret read unless
    permissions.*.restrict.secret; no trigger of the platform authenticates with a Secret."""
    (keda,) = [r.inputs for r in stack.of_type("kubernetes:helm.sh/v3:Release") if r.inputs.get("chart") == "keda"]
    permissions = keda["values"]["permissions"]
    assert permissions["operator"]["restrict"]["secret"] is True
    assert permissions["metricServer"]["restrict"]["secret"] is True
    for scaled in stack.of_kind("keda.sh/v1alpha1", "ScaledObject"):
        assert not any("authenticationRef" in t for t in scaled.inputs["spec"]["triggers"])
