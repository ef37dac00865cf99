"""Dashboards: generated from `signals`, provisioned as ConfigMaps Grafana's sidecar loads,
valid JSON whose every query parses, thresholds drawn from the stack's config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.observability.dashboards import dashboards, queries
from components.observability.objects import SIDECAR_LABEL
from contract import signals
from contract.manifests.monitored import monitored_models
from contract.settings.stack_file import load_stack
from tests.harness import ROOT, StackRun
from tests.rules.promtool import parse_queries, run_rule_tests


def provisioned(run: StackRun) -> dict[str, dict[str, Any]]:
    """Dashboard file name -> parsed JSON, from the ConfigMaps the program emits."""
    found = {}
    for config_map in run.of_kind("v1", "ConfigMap"):
        if config_map.inputs["metadata"].get("labels", {}).get(SIDECAR_LABEL) == "1":
            for file_name, text in config_map.inputs["data"].items():
                found[file_name] = json.loads(text)
    return found


def generated(stack: str, autoscaling: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The stack's dashboards; `autoscaling` replaces the stack's section (the planner's values)."""
    settings = load_stack(stack, ROOT, autoscaling)
    return dashboards(monitored_models(settings), settings.observability, settings.gpu_capacity.pools)


def model_rows(dashboard: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            current = rows.setdefault(panel["title"], [])
        else:
            current.append(panel)
    return rows


def exprs(panels: list[dict[str, Any]]) -> list[str]:
    return [t["expr"] for p in panels for t in p["targets"]]


def test_capacity_latency_and_gpu_dashboards_are_provisioned_as_valid_json(stack: StackRun) -> None:
    found = provisioned(stack)
    assert sorted(found) == ["capacity.json", "gpu.json", "latency.json"]
    assert all(d["uid"] and d["panels"] for d in found.values())


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_dashboard_query_parses(stack: str, tmp_path: Path) -> None:
    all_queries = [q for d in generated(stack).values() for q in queries(d)]
    result = parse_queries(all_queries, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_panel_ids_are_unique_within_each_dashboard() -> None:
    for dashboard in generated("prod").values():
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids))


def test_capacity_draws_each_scaling_signal_next_to_its_configured_threshold() -> None:
    policy = {
        "default": {
            "triggers": {
                "queueDepth": {"targetPerReplica": 4},
                "kvCache": {"targetPerReplica": 0.7},
                "e2eLatency": {"thresholdSeconds": 40},
            }
        },
        "qwen25-14b-awq": {"triggers": {"queueDepth": {"targetPerReplica": 3}}},
    }
    rows = model_rows(generated("prod", policy)["capacity"])
    big = exprs(rows["qwen25-14b-awq"])
    assert signals.constant(3) in big  # queueDepth.targetPerReplica override for this model
    assert signals.constant(0.7) in big  # kvCache.targetPerReplica
    assert signals.constant(40) in big  # e2eLatency.thresholdSeconds
    assert signals.constant(4) in exprs(rows["qwen25-7b-awq"])  # the default queue target


FORECASTS = {
    "qwen25-14b-awq": {
        "triggers": {
            "seasonal": {"enabled": True, "leadSeconds": 600},
            "trend": {"enabled": True, "leadSeconds": 300, "rangeSeconds": 900, "stepSeconds": 60},
        }
    }
}


def forecast_exprs(autoscaling: dict[str, Any] | None) -> list[str]:
    rows = model_rows(generated("prod", autoscaling)["capacity"])
    panels = [p for p in rows["qwen25-14b-awq"] if p["title"].startswith("Forecast against actual")]
    return exprs(panels)


def test_capacity_draws_each_forecast_for_now_beside_the_actual_rate() -> None:
    drawn = forecast_exprs(FORECASTS)
    assert len(drawn) == 3
    assert drawn[0].startswith("sum(rate(vllm:prompt_tokens_total") and "offset" not in drawn[0]
    assert drawn[1].endswith("[300s] offset 86400s)) or vector(0)")  # what the seasonal trigger read a lead ago
    assert drawn[2].startswith("predict_linear((sum(rate(") and drawn[2].endswith("[900s:60s] offset 300s, 0)")


def test_no_forecast_panel_without_a_forecast_trigger() -> None:
    no_forecast = {"qwen25-14b-awq": {"triggers": {"seasonal": {"enabled": False}, "trend": {"enabled": False}}}}
    assert forecast_exprs(no_forecast) == []


def test_the_forecast_panel_queries_parse(tmp_path: Path) -> None:
    result = parse_queries(forecast_exprs(FORECASTS), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_capacity_shows_desired_current_ready_replicas_pending_pods_and_gpus() -> None:
    panel_exprs = exprs(model_rows(generated("dev")["capacity"])["qwen25-1p5b"])
    for name in (
        signals.KubeState.HPA_DESIRED_REPLICAS,
        signals.KubeState.DEPLOYMENT_SPEC_REPLICAS,
        signals.KubeState.DEPLOYMENT_READY_REPLICAS,
        signals.KubeState.POD_PHASE,
        signals.KubeState.POD_RESOURCE_REQUESTS,
    ):
        assert any(name in e for e in panel_exprs), name


def test_latency_shows_ttft_tpot_itl_and_end_to_end_quantiles_per_model() -> None:
    rows = model_rows(generated("prod")["latency"])
    assert sorted(rows) == ["qwen25-14b-awq", "qwen25-7b-awq"]
    for panels in rows.values():
        assert [p["title"] for p in panels] == [
            "Time to first token",
            "Time per output token (per request)",
            "Inter-token latency (per token)",
            "End-to-end latency",
        ]
        for panel in panels:
            assert {t["legendFormat"] for t in panel["targets"]} >= {"p50", "p95", "p99"}


def slo_lines(panel: dict[str, Any]) -> list[str]:
    return [t["expr"] for t in panel["targets"] if t["legendFormat"].startswith("SLO")]


def test_latency_draws_the_ttft_and_tpot_targets_and_no_unset_end_to_end_one() -> None:
    ttft, tpot, itl, e2e = model_rows(generated("prod")["latency"])["qwen25-14b-awq"]
    assert slo_lines(ttft) == [signals.constant(2.5)]  # slo.ttftP95Seconds
    assert slo_lines(tpot) == [signals.constant(0.1)]  # slo.tpotP95Seconds
    assert slo_lines(itl) == [] and slo_lines(e2e) == []  # prod sets no slo.e2eP99Seconds


def test_the_tpot_panel_reads_the_per_request_histogram() -> None:
    tpot = model_rows(generated("prod")["latency"])["qwen25-14b-awq"][1]
    assert all(signals.Vllm.REQUEST_TPOT in e for e in exprs([tpot]) if "histogram_quantile" in e)


def test_gpu_dashboard_plots_dcgm_utilisation_memory_power_and_temperature_per_node() -> None:
    panels = [p for p in generated("dev")["gpu"]["panels"] if p["type"] != "row"]
    metrics = (signals.Dcgm.GPU_UTIL, signals.Dcgm.FB_USED, signals.Dcgm.POWER_USAGE, signals.Dcgm.GPU_TEMP)
    for metric, panel in zip(metrics, panels, strict=True):
        (target,) = panel["targets"]
        assert metric in target["expr"] and f"by ({signals.NODE_LABEL})" in target["expr"]
        assert target["legendFormat"] == "{{node}}"


def test_capacity_compares_gpus_per_pool_with_each_pools_gpu_limit() -> None:
    pools = exprs(model_rows(generated("prod")["capacity"])["GPU pools"])
    assert signals.gpus_allocatable_by_pool() in pools
    limits = {signals.constant(pool.gpu_limit) for pool in load_stack("prod", ROOT).gpu_capacity.pools}
    assert len(limits) == 2 and limits <= set(pools)  # gpu-spot's and gpu-on-demand's


def test_gpus_per_pool_sums_the_gpus_of_each_pools_nodes(tmp_path: Path) -> None:
    nodes = {"ip-1": ("gpu-spot", 1), "ip-2": ("gpu-spot", 4), "ip-3": ("gpu-on-demand", 1)}
    series = []
    for node, (pool, gpus) in nodes.items():
        series.append(
            {
                "series": f'kube_node_status_allocatable{{node="{node}",resource="nvidia_com_gpu"}}',
                "values": f"{gpus}x10",
            }
        )
        series.append({"series": f'kube_node_status_allocatable{{node="{node}",resource="cpu"}}', "values": "8x10"})
        series.append(
            {
                "series": f'kube_node_labels{{node="{node}",label_inference_platform_gpu_pool="{pool}"}}',
                "values": "1x10",
            }
        )
    expected = [
        {"labels": '{label_inference_platform_gpu_pool="gpu-spot"}', "value": 5},
        {"labels": '{label_inference_platform_gpu_pool="gpu-on-demand"}', "value": 1},
    ]
    test = {
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [{"expr": signals.gpus_allocatable_by_pool(), "eval_time": "5m", "exp_samples": expected}],
    }
    result = run_rule_tests([], [test], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
