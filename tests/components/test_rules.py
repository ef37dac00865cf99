"""Recording and alert rules: they pass `promtool check rules`, and `promtool test rules`
proves each alert fires on series that should trigger it and stays silent on series that should not.

Thresholds are the dev stack's SLO and alert settings (Pulumi.dev.yaml and the defaults: TTFT SLO 1 s, TPOT SLO
0.1 s, KV near-full 0.95, GPU memory 0.98, GPU temperature 85 C) with the scaling bounds these cases are written
for, set here (`AUTOSCALING`: queue target 8 per replica at maxReplicas 3), not the planner's committed values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.observability.rules import rule_groups
from contract.manifests.monitored import monitored_models
from contract.settings.stack_file import load_stack, read_stack
from tests.harness import ROOT
from tests.rules.promtool import check_rules, run_rule_tests
from tests.stacks import unplanned_file

MODEL, NAMESPACE = "qwen25-1p5b", "inference"
DEPLOYMENT = f"{MODEL}-predictor"
PODS = [f"{DEPLOYMENT}-7d9f8-{suffix}" for suffix in ("a1", "b2", "c3")]
SAMPLES = 160  # 40 minutes at the 15 s scrape interval
EVAL_TIME = "30m"


# dev's default scope with the bounds the cases below assume (the model's planned block dropped).
AUTOSCALING = {
    "default": {
        **unplanned_file("dev").config["inference-platform:autoscaling"]["default"],
        "maxReplicas": 3,
        "triggers": {"queueDepth": {"targetPerReplica": 8}},
    }
}


def groups(stack: str = "dev") -> list[dict[str, Any]]:
    settings = read_stack(stack, ROOT).settings(AUTOSCALING) if stack == "dev" else load_stack(stack, ROOT)
    return rule_groups(monitored_models(settings), settings.observability)


def vllm(metric: str, pod: str, values: str, **extra: str) -> dict[str, str]:
    labels = {"namespace": NAMESPACE, "model_name": MODEL, "pod": pod, **extra}
    return series(metric, values, **labels)


def series(metric: str, values: str, **labels: str) -> dict[str, str]:
    rendered = ",".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{metric}{{{rendered}}}", "values": values}


def deployment(metric: str, replicas: int) -> dict[str, str]:
    return series(metric, f"{replicas}x{SAMPLES}", namespace=NAMESPACE, deployment=DEPLOYMENT)


def ttft(fast: bool) -> list[dict[str, str]]:
    """Two replicas; every first token under 0.5 s (fast) or between 2.5 s and 5 s (slow)."""
    counts = {"0.5": "0+2" if fast else "0+0", "2.5": "0+2" if fast else "0+0", "5": "0+2", "+Inf": "0+2"}
    return [
        vllm("vllm:time_to_first_token_seconds_bucket", pod, f"{step}x{SAMPLES}", le=le)
        for pod in PODS[:2]
        for le, step in counts.items()
    ]


def tpot(fast: bool) -> list[dict[str, str]]:
    """Two replicas; every request's TPOT under 0.05 s (fast) or between 0.1 s and 0.15 s (slow)."""
    counts = {"0.05": "0+2" if fast else "0+0", "0.1": "0+2" if fast else "0+0", "0.15": "0+2", "+Inf": "0+2"}
    return [
        vllm("vllm:request_time_per_output_token_seconds_bucket", pod, f"{step}x{SAMPLES}", le=le)
        for pod in PODS[:2]
        for le, step in counts.items()
    ]


def gpu(metric: str, values: str, node: str = "ip-10-20-1-5", gpu_index: str = "0") -> dict[str, str]:
    return series(metric, values, node=node, gpu=gpu_index)


def gpu_nodes(exporters_up: tuple[int, int]) -> list[dict[str, str]]:
    nodes = ("ip-10-20-1-5", "ip-10-20-2-7")
    allocatable = [
        series("kube_node_status_allocatable", f"1x{SAMPLES}", node=n, resource="nvidia_com_gpu") for n in nodes
    ]
    up = [series("up", f"{state}x{SAMPLES}", job="dcgm-exporter", node=n) for n, state in zip(nodes, exporters_up)]
    return allocatable + up


# alert -> (series that must make it fire by EVAL_TIME, series that must keep it silent)
CASES: dict[str, tuple[list[dict[str, str]], list[dict[str, str]]]] = {
    "InferenceTtftSloBreach": (ttft(fast=False), ttft(fast=True)),
    "InferenceTpotSloBreach": (tpot(fast=False), tpot(fast=True)),
    "InferenceCapacityExhausted": (
        [
            *(vllm("vllm:num_requests_waiting", p, f"15x{SAMPLES}") for p in PODS),
            deployment("kube_deployment_status_replicas_ready", 3),
        ],
        # The same queue with a replica to spare: KEDA can still scale, capacity is not exhausted.
        [
            *(vllm("vllm:num_requests_waiting", p, f"15x{SAMPLES}") for p in PODS[:2]),
            deployment("kube_deployment_status_replicas_ready", 2),
        ],
    ),
    "InferenceKvCacheNearFull": (
        [
            vllm("vllm:kv_cache_usage_perc", PODS[0], f"0.97x{SAMPLES}"),
            vllm("vllm:kv_cache_usage_perc", PODS[1], f"0.5x{SAMPLES}"),
        ],
        [vllm("vllm:kv_cache_usage_perc", p, f"0.8x{SAMPLES}") for p in PODS[:2]],
    ),
    "InferenceScalingSignalAbsent": (
        [deployment("kube_deployment_spec_replicas", 1)],
        [deployment("kube_deployment_spec_replicas", 1), vllm("vllm:num_requests_waiting", PODS[0], f"0x{SAMPLES}")],
    ),
    "InferenceReplicasNotReady": (
        [deployment("kube_deployment_spec_replicas", 2), deployment("kube_deployment_status_replicas_ready", 1)],
        [deployment("kube_deployment_spec_replicas", 2), deployment("kube_deployment_status_replicas_ready", 2)],
    ),
    "DcgmExporterDown": (gpu_nodes((1, 0)), gpu_nodes((1, 1))),
    "GpuXidError": (
        [gpu("DCGM_FI_DEV_XID_ERRORS", f"0x20 79x{SAMPLES - 21}")],
        [gpu("DCGM_FI_DEV_XID_ERRORS", f"0x{SAMPLES}")],
    ),
    "GpuMemoryHigh": (
        [gpu("DCGM_FI_DEV_FB_USED", f"23000x{SAMPLES}"), gpu("DCGM_FI_DEV_FB_FREE", f"10x{SAMPLES}")],
        # vLLM's normal state: ~90% of the framebuffer pre-allocated.
        [gpu("DCGM_FI_DEV_FB_USED", f"21000x{SAMPLES}"), gpu("DCGM_FI_DEV_FB_FREE", f"1500x{SAMPLES}")],
    ),
    "GpuTemperatureHigh": (
        [gpu("DCGM_FI_DEV_GPU_TEMP", f"90x{SAMPLES}")],
        [gpu("DCGM_FI_DEV_GPU_TEMP", f"70x{SAMPLES}")],
    ),
}


def alert_names(rule_groups_: list[dict[str, Any]]) -> list[str]:
    return [rule["alert"] for group in rule_groups_ for rule in group["rules"] if "alert" in rule]


def fires(alert: str, input_series: list[dict[str, str]], at: str = EVAL_TIME) -> dict[str, Any]:
    """A unit test that passes only if exactly one instance of `alert` is firing at `at`."""
    return {
        "interval": "15s",
        "input_series": input_series,
        "promql_expr_test": [
            {
                "expr": f'count(ALERTS{{alertname="{alert}",alertstate="firing"}})',
                "eval_time": at,
                "exp_samples": [{"labels": "{}", "value": 1}],
            }
        ],
    }


def silent(alert: str, input_series: list[dict[str, str]], at: str = EVAL_TIME) -> dict[str, Any]:
    return {
        "interval": "15s",
        "input_series": input_series,
        "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": []}],
    }


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_rules_pass_promtool_check(stack: str, tmp_path: Path) -> None:
    result = check_rules(groups(stack), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_firing_and_a_silent_case() -> None:
    assert sorted(set(alert_names(groups()))) == sorted(CASES)


@pytest.mark.parametrize("alert", sorted(CASES))
def test_alert_fires_on_series_that_should_trigger_it(alert: str, tmp_path: Path) -> None:
    result = run_rule_tests(groups(), [fires(alert, CASES[alert][0])], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("alert", sorted(CASES))
def test_alert_stays_silent_on_series_that_should_not_trigger_it(alert: str, tmp_path: Path) -> None:
    result = run_rule_tests(groups(), [silent(alert, CASES[alert][1])], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_ttft_breach_shorter_than_its_for_duration_does_not_fire(tmp_path: Path) -> None:
    # Slow first tokens for 3 minutes; with the 5m window the breach lasts ~8m, under the 10m `for`.
    slow_then_fast = [
        vllm("vllm:time_to_first_token_seconds_bucket", PODS[0], values, le=le)
        for le, values in {"0.5": "0x12 0+4x148", "2.5": "0x12 0+4x148", "5": "0+4x160", "+Inf": "0+4x160"}.items()
    ]
    result = run_rule_tests(groups(), [silent("InferenceTtftSloBreach", slow_then_fast, at="14m")], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def tpot_with_share_over_target(over: int) -> list[dict[str, str]]:
    """100 requests per scrape on one replica, `over` of them with a TPOT above the 0.1 s target."""
    counts = {"0.05": f"0+{100 - over}", "0.1": f"0+{100 - over}", "0.15": "0+100", "+Inf": "0+100"}
    return [
        vllm("vllm:request_time_per_output_token_seconds_bucket", PODS[0], f"{step}x{SAMPLES}", le=le)
        for le, step in counts.items()
    ]


def test_a_tpot_miss_within_the_five_percent_the_objective_allows_does_not_fire(tmp_path: Path) -> None:
    result = run_rule_tests(groups(), [silent("InferenceTpotSloBreach", tpot_with_share_over_target(5))], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_tpot_miss_beyond_the_five_percent_the_objective_allows_fires(tmp_path: Path) -> None:
    result = run_rule_tests(groups(), [fires("InferenceTpotSloBreach", tpot_with_share_over_target(6))], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_severity_summary_description_with_value_and_runbook() -> None:
    alerts = [rule for group in groups("prod") for rule in group["rules"] if "alert" in rule]
    for alert in alerts:
        assert alert["labels"]["severity"] in ("critical", "warning"), alert["alert"]
        assert alert["annotations"]["summary"] and alert["annotations"]["runbook"], alert["alert"]
        assert "$value" in alert["annotations"]["description"], alert["alert"]


def test_recording_rules_cover_each_model_signal() -> None:
    recorded = {(r["record"], r["labels"]["model_name"]) for g in groups("prod") for r in g["rules"] if "record" in r}
    for model in ("qwen25-14b-awq", "qwen25-7b-awq"):
        for name in (
            "model:vllm_requests_waiting:avg1m",
            "model:vllm_kv_cache_usage:sum",
            "model:vllm_time_to_first_token_seconds:p95",
            "model:vllm_request_time_per_output_token_seconds:p95",
            "model:vllm_e2e_request_latency_seconds:p99",
            "model:vllm_generation_tokens:rate1m",
            "model:dcgm_gpu_utilization:avg",
        ):
            assert (name, model) in recorded
