"""Grafana dashboards generated from `signals` and the stack's thresholds (never hand-edited JSON).

Each dashboard is a plain dict (Grafana's dashboard JSON model); Observability provisions it
as a ConfigMap that Grafana's dashboard sidecar loads.
"""

from __future__ import annotations

from typing import Any

from contract import signals
from contract.settings import StackSettings

from .rules import E2E_SLO_QUANTILE, TTFT_SLO_QUANTILE, MonitoredModel, monitored_models

# kube-prometheus-stack provisions its Prometheus data source with this uid.
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}
SIDECAR_LABEL = "grafana_dashboard"
QUANTILES = (0.5, 0.95, 0.99)
PANEL_WIDTH, PANEL_HEIGHT, COLUMNS = 8, 8, 3

Target = tuple[str, str]  # (PromQL, legend)


def _timeseries(title: str, targets: list[Target], unit: str) -> dict[str, Any]:
    return {
        "type": "timeseries",
        "title": title,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def _row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


def _layout(sections: list[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Rows of panels, three per line, with ids and grid positions Grafana requires."""
    panels: list[dict[str, Any]] = []
    y = 0
    for title, section in sections:
        panels.append({**_row(title), "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}})
        y += 1
        for i, panel in enumerate(section):
            x = (i % COLUMNS) * PANEL_WIDTH
            panels.append({**panel, "gridPos": {"x": x, "y": y + (i // COLUMNS) * PANEL_HEIGHT,
                                                "w": PANEL_WIDTH, "h": PANEL_HEIGHT}})
        y += -(-len(section) // COLUMNS) * PANEL_HEIGHT
    return [{**panel, "id": i + 1} for i, panel in enumerate(panels)]


def _dashboard(uid: str, title: str, sections: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "tags": ["inference-platform"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": False,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": []},
        "annotations": {"list": []},
        "panels": _layout(sections),
    }


def capacity_panels(m: MonitoredModel) -> list[dict[str, Any]]:
    """Each enabled scaling signal next to its configured threshold, then the replica story."""
    t, scope, w = m.policy.triggers, m.scope, m.workload
    panels = []
    if t.queue_depth.enabled:
        queue = signals.queue_depth(scope, t.queue_depth.window_seconds)
        panels.append(_timeseries("Queue depth per replica (KEDA AverageValue)", [
            (signals.per_replica(queue, w), "waiting per ready replica"),
            (signals.constant(t.queue_depth.target_per_replica), "target per replica"),
        ], "short"))
    if t.kv_cache.enabled:
        panels.append(_timeseries("KV cache per replica (KEDA AverageValue)", [
            (signals.per_replica(signals.kv_cache_usage(scope), w), "KV in use per ready replica"),
            (signals.constant(t.kv_cache.target_per_replica), "target per replica"),
        ], "percentunit"))
    if t.e2e_latency.enabled:
        panels.append(_timeseries(f"End-to-end p{t.e2e_latency.quantile * 100:g} (KEDA Value)", [
            (signals.e2e_latency_quantile(scope, t.e2e_latency.quantile, t.e2e_latency.window_seconds), "latency"),
            (signals.constant(t.e2e_latency.threshold_seconds), "guardrail threshold"),
            (signals.constant(m.policy.slo.e2e_p99_seconds), "SLO p99"),
        ], "s"))
    if t.ttft.enabled:
        panels.append(_timeseries(f"TTFT p{t.ttft.quantile * 100:g} (KEDA Value)", [
            (signals.ttft_quantile(scope, t.ttft.quantile, t.ttft.window_seconds), "TTFT"),
            (signals.constant(t.ttft.threshold_seconds), "threshold"),
        ], "s"))
    panels.append(_timeseries("Replicas: desired vs current vs ready", [
        (signals.desired_replicas(w), "desired (KEDA HPA)"),
        (signals.spec_replicas(w), "current (Deployment)"),
        (signals.ready_replicas(w), "ready"),
        (signals.constant(m.policy.max_replicas), "maxReplicas"),
    ], "short"))
    panels.append(_timeseries("Pending pods and GPUs in use", [
        (signals.pending_pods(w), "pending predictor pods"),
        (signals.gpus_in_use(w), "GPUs in use"),
    ], "short"))
    return panels


def pool_panels(settings: StackSettings) -> list[dict[str, Any]]:
    """GPUs the pools hold against their limits: the ceiling every model's maxReplicas shares."""
    pool_label = f"{{{{{signals.KubeState.POOL_LABEL}}}}}"
    return [
        _timeseries("GPUs per NodePool vs gpuLimit", [
            (signals.gpus_allocatable_by_pool(), pool_label),
            *((signals.constant(p.gpu_limit), f"{p.name} gpuLimit") for p in settings.gpu_capacity.pools),
        ], "short"),
    ]


def latency_panels(m: MonitoredModel, window_seconds: int) -> list[dict[str, Any]]:
    def quantiles(build: Any) -> list[Target]:
        return [(build(m.scope, q, window_seconds), f"p{q * 100:g}") for q in QUANTILES]

    return [
        _timeseries("Time to first token", [
            *quantiles(signals.ttft_quantile),
            (signals.constant(m.policy.slo.ttft_p95_seconds), f"SLO p{TTFT_SLO_QUANTILE * 100:g}"),
        ], "s"),
        _timeseries("Inter-token latency", quantiles(signals.inter_token_latency_quantile), "s"),
        _timeseries("End-to-end latency", [
            *quantiles(signals.e2e_latency_quantile),
            (signals.constant(m.policy.slo.e2e_p99_seconds), f"SLO p{E2E_SLO_QUANTILE * 100:g}"),
        ], "s"),
    ]


def gpu_panels() -> list[dict[str, Any]]:
    node = f"{{{{{signals.NODE_LABEL}}}}}"
    d = signals.Dcgm
    return [
        _timeseries("GPU utilisation (avg per node)", [(signals.gpu_by_node(d.GPU_UTIL), node)], "percent"),
        _timeseries("GPU memory used (fullest GPU per node)",
                    [(signals.gpu_by_node(signals.gpu_memory_used_fraction(), "max"), node)], "percentunit"),
        _timeseries("GPU power (sum per node)", [(signals.gpu_by_node(d.POWER_USAGE, "sum"), node)], "watt"),
        _timeseries("GPU temperature (hottest GPU per node)", [(signals.gpu_by_node(d.GPU_TEMP, "max"), node)],
                    "celsius"),
    ]


def dashboards(settings: StackSettings) -> dict[str, dict[str, Any]]:
    """Dashboard key (also its ConfigMap suffix) -> Grafana dashboard JSON model."""
    models = monitored_models(settings)
    window = settings.observability.latency_window_seconds
    return {
        "capacity": _dashboard("inference-capacity", "Inference / Capacity",
                               [*((m.name, capacity_panels(m)) for m in models), ("GPU pools", pool_panels(settings))]),
        "latency": _dashboard("inference-latency", "Inference / Latency",
                              [(m.name, latency_panels(m, window)) for m in models]),
        "gpu": _dashboard("inference-gpu", "Inference / GPU (DCGM)", [("GPU nodes", gpu_panels())]),
    }


def queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression in a dashboard (tests parse them all)."""
    return [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
