"""Grafana dashboards generated from `signals` and the stack's thresholds (never hand-edited JSON).

Each dashboard is a plain dict (Grafana's dashboard JSON model); Observability provisions it
as a ConfigMap that Grafana's dashboard sidecar loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contract import signals
from contract.manifests.monitored import MonitoredModel
from contract.settings import ModelAutoscaling
from contract.settings.gpu_capacity import NodePoolSettings
from contract.settings.observability import ObservabilitySettings
from contract.signals import Vllm
from contract.triggers import TRIGGERS, Trigger, enabled_triggers

from .rules import E2E_SLO_QUANTILE, TPOT_SLO_QUANTILE, TTFT_SLO_QUANTILE

# kube-prometheus-stack provisions its Prometheus data source with this uid.
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}
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
            panels.append(
                {
                    **panel,
                    "gridPos": {"x": x, "y": y + (i // COLUMNS) * PANEL_HEIGHT, "w": PANEL_WIDTH, "h": PANEL_HEIGHT},
                }
            )
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


def _slo_lines(metric: str, policy: ModelAutoscaling) -> list[Target]:
    """The SLO a latency histogram is held to (`slo.*` of the policy) as a flat line; none
    for a metric without an SLO (or an unset optional one: slo.e2eP99Seconds)."""
    slos = {
        Vllm.TTFT: (policy.slo.ttft_p95_seconds, TTFT_SLO_QUANTILE),
        Vllm.REQUEST_TPOT: (policy.slo.tpot_p95_seconds, TPOT_SLO_QUANTILE),
        Vllm.E2E_LATENCY: (policy.slo.e2e_p99_seconds, E2E_SLO_QUANTILE),
    }
    seconds, quantile = slos.get(metric, (None, None))
    if seconds is None:
        return []
    return [(signals.constant(seconds), f"SLO p{quantile * 100:g}")]


def trigger_panel(trigger: Trigger, m: MonitoredModel) -> dict[str, Any] | None:
    """One scaling signal as KEDA compares it with its target: per ready replica for an
    AverageValue trigger, as is for a Value one (`contract/triggers.py` says why each has its
    type); None for a trigger that reads no metric (cron)."""
    signal = trigger.signal(m.policy)
    if signal is None:
        return None
    query = signal.promql(m.scope)
    target = signals.constant(trigger.target(m.policy))
    if trigger.metric_type == "AverageValue":
        return _timeseries(
            f"{trigger.label} per replica (KEDA AverageValue)",
            [
                (signals.per_replica(query, m.workload), f"{trigger.label} per ready replica"),
                (target, "target per replica"),
            ],
            trigger.unit,
        )
    quantile = f" p{signal.quantile * 100:g}" if signal.quantile is not None else ""
    return _timeseries(
        f"{trigger.label}{quantile} (KEDA Value)",
        [
            (query, trigger.label),
            (target, "guardrail threshold"),
            *_slo_lines(signal.metric, m.policy),
        ],
        trigger.unit,
    )


def forecast_panel(m: MonitoredModel) -> dict[str, Any] | None:
    """The forecasts against what came: the prompt-token rate now beside what each enabled
    forecast trigger predicted for now, `leadSeconds` ago. The seasonal one read the rate a
    period before now; the trend one, the line fitted `leadSeconds` ago (`offset` on its
    subquery) read at now (`predict_linear`'s line is in absolute time: ahead 0 is its value at
    the evaluation time). None when no forecast trigger is on."""
    triggers = m.policy.triggers
    seasonal, trend = triggers.seasonal, triggers.trend
    lines: list[Target] = []
    if seasonal.enabled:
        then = signals.Query(
            Vllm.PROMPT_TOKENS, "sum_rate", seasonal.window_seconds, offset_seconds=seasonal.period_seconds
        )
        lines.append((then.promql(m.scope), f"seasonal forecast (made {seasonal.lead_seconds} s before)"))
    if trend.enabled:
        rate = signals.Query(Vllm.PROMPT_TOKENS, "sum_rate", trend.window_seconds).promql(m.scope)
        subquery = f"({rate})[{signals.duration(trend.range_seconds)}:{signals.duration(trend.step_seconds)}]"
        made = f"predict_linear({subquery} offset {signals.duration(trend.lead_seconds)}, 0)"
        lines.append((made, f"trend forecast (made {trend.lead_seconds} s before)"))
    if not lines:
        return None
    actual = signals.Query(Vllm.PROMPT_TOKENS, "sum_rate", 60).promql(m.scope)
    return _timeseries("Forecast against actual: prompt tokens/s", [(actual, "actual (1m rate)"), *lines], "short")


def capacity_panels(m: MonitoredModel, triggers: Sequence[Trigger] = TRIGGERS) -> list[dict[str, Any]]:
    """Each enabled scaling signal next to its configured threshold, the forecasts against what
    came, then the replica story."""
    w = m.workload
    panels = [p for t in enabled_triggers(m.policy, triggers) if (p := trigger_panel(t, m)) is not None]
    forecast = forecast_panel(m)
    if forecast is not None:
        panels.append(forecast)
    panels.append(
        _timeseries(
            "Replicas: desired vs current vs ready",
            [
                (signals.desired_replicas(w), "desired (KEDA HPA)"),
                (signals.spec_replicas(w), "current (Deployment)"),
                (signals.ready_replicas(w), "ready"),
                (signals.constant(m.policy.max_replicas), "maxReplicas"),
            ],
            "short",
        )
    )
    panels.append(
        _timeseries(
            "Pending pods and GPUs in use",
            [
                (signals.pending_pods(w), "pending predictor pods"),
                (signals.gpus_in_use(w), "GPUs in use"),
            ],
            "short",
        )
    )
    return panels


def pool_panels(pools: Sequence[NodePoolSettings]) -> list[dict[str, Any]]:
    """GPUs the pools hold against their limits: the ceiling every model's maxReplicas shares."""
    pool_label = f"{{{{{signals.KubeState.POOL_LABEL}}}}}"
    return [
        _timeseries(
            "GPUs per NodePool vs gpuLimit",
            [
                (signals.gpus_allocatable_by_pool(), pool_label),
                *((signals.constant(p.gpu_limit), f"{p.name} gpuLimit") for p in pools),
            ],
            "short",
        ),
    ]


def latency_panels(m: MonitoredModel, window_seconds: int) -> list[dict[str, Any]]:
    def quantiles(build: Any) -> list[Target]:
        return [(build(m.scope, q, window_seconds), f"p{q * 100:g}") for q in QUANTILES]

    return [
        _timeseries("Time to first token", [*quantiles(signals.ttft_quantile), *_slo_lines(Vllm.TTFT, m.policy)], "s"),
        _timeseries(
            "Time per output token (per request)",
            [*quantiles(signals.tpot_quantile), *_slo_lines(Vllm.REQUEST_TPOT, m.policy)],
            "s",
        ),
        _timeseries("Inter-token latency (per token)", quantiles(signals.inter_token_latency_quantile), "s"),
        _timeseries(
            "End-to-end latency",
            [*quantiles(signals.e2e_latency_quantile), *_slo_lines(Vllm.E2E_LATENCY, m.policy)],
            "s",
        ),
    ]


def gpu_panels() -> list[dict[str, Any]]:
    node = f"{{{{{signals.NODE_LABEL}}}}}"
    d = signals.Dcgm
    return [
        _timeseries("GPU utilisation (avg per node)", [(signals.gpu_by_node(d.GPU_UTIL), node)], "percent"),
        _timeseries(
            "GPU memory used (fullest GPU per node)",
            [(signals.gpu_by_node(signals.gpu_memory_used_fraction(), "max"), node)],
            "percentunit",
        ),
        _timeseries("GPU power (sum per node)", [(signals.gpu_by_node(d.POWER_USAGE, "sum"), node)], "watt"),
        _timeseries(
            "GPU temperature (hottest GPU per node)", [(signals.gpu_by_node(d.GPU_TEMP, "max"), node)], "celsius"
        ),
    ]


def dashboards(
    models: Sequence[MonitoredModel],
    obs: ObservabilitySettings,
    pools: Sequence[NodePoolSettings],
    triggers: Sequence[Trigger] = TRIGGERS,
) -> dict[str, dict[str, Any]]:
    """Dashboard key (also its ConfigMap suffix) -> Grafana dashboard JSON model."""
    window = obs.latency_window_seconds
    return {
        "capacity": _dashboard(
            "inference-capacity",
            "Inference / Capacity",
            [
                *((m.name, capacity_panels(m, triggers)) for m in models),
                ("GPU pools", pool_panels(pools)),
            ],
        ),
        "latency": _dashboard(
            "inference-latency", "Inference / Latency", [(m.name, latency_panels(m, window)) for m in models]
        ),
        "gpu": _dashboard("inference-gpu", "Inference / GPU (DCGM)", [("GPU nodes", gpu_panels())]),
    }


def queries(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression in a dashboard (tests parse them all)."""
    return [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
