"""Recording and alerting rules, built from `signals` with thresholds from the stack config.

Pure functions: `rule_groups(models, observability)` returns the `spec.groups` of the
platform's PrometheusRule; tests feed the same groups to `promtool check rules` and `promtool test rules`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contract import names, signals
from contract.manifests.monitored import MonitoredModel
from contract.settings import ModelAutoscaling
from contract.settings.autoscaling import Slo
from contract.settings.observability import ObservabilitySettings
from contract.signals import Query, Vllm
from contract.triggers import TRIGGERS, Trigger

RECORDING_WINDOW_SECONDS = 60  # the "1m" of the recording rule names below
# The quantiles the SLO keys name: slo.ttftP95Seconds and slo.tpotP95Seconds (the objective: 95% of
# requests meet both), slo.e2eP99Seconds. Each SLO alert sees one histogram: its quantile above the
# target means more than 5% of requests miss that target, so the objective is missed (exactly when the
# target is one of vLLM's bucket bounds; between bounds histogram_quantile interpolates).
TTFT_SLO_QUANTILE = TPOT_SLO_QUANTILE = Slo.OBJECTIVE
E2E_SLO_QUANTILE = 0.99


def _record(name: str, expr: str, m: MonitoredModel) -> dict[str, Any]:
    return {"record": name, "expr": expr, "labels": {"model_name": m.name, "namespace": m.scope.namespace}}


def recording_rules(m: MonitoredModel, obs: ObservabilitySettings) -> list[dict[str, Any]]:
    """Per-model series for dashboards and ad-hoc queries (KEDA queries the raw signals)."""
    window, latency = RECORDING_WINDOW_SECONDS, obs.latency_window_seconds
    return [
        _record(
            "model:vllm_requests_waiting:avg1m",
            Query(Vllm.REQUESTS_WAITING, "sum_avg_over_time", window).promql(m.scope),
            m,
        ),
        _record("model:vllm_kv_cache_usage:sum", signals.kv_cache_usage(m.scope), m),
        _record(
            "model:vllm_time_to_first_token_seconds:p95", signals.ttft_quantile(m.scope, TTFT_SLO_QUANTILE, latency), m
        ),
        _record(
            "model:vllm_request_time_per_output_token_seconds:p95",
            signals.tpot_quantile(m.scope, TPOT_SLO_QUANTILE, latency),
            m,
        ),
        _record(
            "model:vllm_e2e_request_latency_seconds:p99",
            signals.e2e_latency_quantile(m.scope, E2E_SLO_QUANTILE, latency),
            m,
        ),
        _record("model:vllm_generation_tokens:rate1m", signals.generation_tokens_per_second(m.scope, window), m),
        _record("model:dcgm_gpu_utilization:avg", signals.model_gpu_utilization(m.workload), m),
    ]


def _alert(
    name: str,
    expr: str,
    for_minutes: int,
    severity: str,
    summary: str,
    description: str,
    runbook: str,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_minutes:
        rule["for"] = f"{for_minutes}m"
    rule["labels"] = {"severity": severity, **(labels or {})}
    rule["annotations"] = {"summary": summary, "description": description, "runbook": runbook}
    return rule


def waiting_target(policy: ModelAutoscaling, triggers: Sequence[Trigger] = TRIGGERS) -> float:
    """The target per replica of the trigger that scales on waiting requests: capacity is
    exhausted when more wait than maxReplicas absorb at it."""
    return next(
        t.target(policy)
        for t in triggers
        if (signal := t.signal(policy)) is not None and signal.metric == Vllm.REQUESTS_WAITING
    )


def model_alerts(m: MonitoredModel, obs: ObservabilitySettings) -> list[dict[str, Any]]:
    a, p, name = obs.alerts, m.policy, m.name
    labels = {"model_name": name, "namespace": m.workload.namespace}
    waiting = waiting_target(p)
    return [
        _alert(
            "InferenceTtftSloBreach",
            signals.ttft_slo_breach(m.scope, TTFT_SLO_QUANTILE, obs.latency_window_seconds, p.slo.ttft_p95_seconds),
            a.ttft_breach_for_minutes,
            "critical",
            f"{name}: time to first token above its SLO",
            f"TTFT p95 of {name} is {{{{ $value | humanizeDuration }}}} "
            f"(SLO {p.slo.ttft_p95_seconds:g}s) for {a.ttft_breach_for_minutes}m.",
            "Check the Capacity dashboard: if replicas are at maxReplicas raise it (GPU budget permitting); "
            "if replicas are pending, GPU nodes are not launching; otherwise lower the queue/KV targets.",
            labels,
        ),
        _alert(
            "InferenceTpotSloBreach",
            signals.tpot_slo_breach(m.scope, TPOT_SLO_QUANTILE, obs.latency_window_seconds, p.slo.tpot_p95_seconds),
            a.tpot_breach_for_minutes,
            "critical",
            f"{name}: time per output token above its SLO",
            f"TPOT p95 of {name} (per request, after the first token) is {{{{ $value | humanizeDuration }}}} "
            f"(SLO {p.slo.tpot_p95_seconds:g}s) for {a.tpot_breach_for_minutes}m.",
            "Decode is slowed by full batches or by long prompts' prefill chunks interleaved with decode: "
            "lower the KV target (fewer sequences per replica) or the queue target so replicas are added "
            "earlier; if replicas are at maxReplicas raise it; a lower engine.maxNumBatchedTokens shortens "
            "the prefill chunks that stall decoding.",
            labels,
        ),
        _alert(
            "InferenceCapacityExhausted",
            signals.capacity_exhausted(m.scope, m.workload, RECORDING_WINDOW_SECONDS, waiting, p.max_replicas),
            a.capacity_exhausted_for_minutes,
            "critical",
            f"{name}: queue keeps growing at maxReplicas",
            f"{{{{ $value }}}} requests wait on {name}, more than {p.max_replicas} replicas x "
            f"{waiting:g} absorb, and all {p.max_replicas} replicas are already ready.",
            f"Raise autoscaling.{name}.maxReplicas (and gpuCapacity.pools[].gpuLimit), or shed load at the gateway.",
            labels,
        ),
        _alert(
            "InferenceKvCacheNearFull",
            signals.kv_cache_near_full(m.scope, a.kv_cache_near_full_fraction),
            a.kv_cache_near_full_for_minutes,
            "warning",
            f"{name}: a replica's KV cache is nearly full",
            f"The fullest {name} replica uses {{{{ $value | humanizePercentage }}}} of its KV cache; "
            "vLLM preempts requests beyond this.",
            "Lower autoscaling triggers.kvCache.targetPerReplica so replicas are added earlier, "
            "or reduce engine.maxNumSeqs / maxModelLen.",
            labels,
        ),
        _alert(
            "InferenceScalingSignalAbsent",
            signals.scaling_signal_absent(m.scope, m.workload),
            a.signal_absent_for_minutes,
            "critical",
            f"{name}: no vLLM metrics while replicas are wanted",
            f"{{{{ $value }}}} {name} replicas are wanted but Prometheus has no {signals.Vllm.REQUESTS_WAITING} "
            "series for them; KEDA is scaling blind (it holds fallback replicas).",
            f"Check the {name} PodMonitor target in Prometheus (/targets), the predictor's /metrics, "
            "and that the served model name matches.",
            labels,
        ),
        _alert(
            "InferenceReplicasNotReady",
            signals.replicas_not_ready(m.workload),
            a.replicas_not_ready_for_minutes,
            "warning",
            f"{name}: predictor replicas not ready",
            f"{{{{ $value }}}} {m.workload.deployment} replicas have not become ready "
            f"for {a.replicas_not_ready_for_minutes}m.",
            f"kubectl -n {m.workload.namespace} describe pods -l {names.MODEL_LABEL}={name}: "
            "look for Pending (GPU limit, no capacity), image pull or model-load errors.",
            labels,
        ),
    ]


def gpu_alerts(obs: ObservabilitySettings) -> list[dict[str, Any]]:
    a = obs.alerts
    return [
        _alert(
            "DcgmExporterDown",
            signals.dcgm_exporters_missing(),
            a.exporter_down_for_minutes,
            "warning",
            "GPU nodes without a working DCGM exporter",
            "Fewer DCGM exporters are up than the {{ $value }} nodes offering GPUs; GPU metrics are missing.",
            f"kubectl -n {obs.exporters_namespace} get pods -l app.kubernetes.io/name=dcgm-exporter -o wide; "
            "check tolerations and the NVIDIA runtime on the node.",
        ),
        _alert(
            "GpuXidError",
            signals.gpu_xid_errors(),
            0,
            "critical",
            "GPU reported an XID error",
            "GPU {{ $labels.gpu }} on node {{ $labels.node }} reported XID {{ $value }}.",
            "Look the XID up in NVIDIA's XID catalogue; for 48/63/64/74/79/94/95 cordon and drain the node "
            "so Karpenter replaces it.",
        ),
        _alert(
            "GpuMemoryHigh",
            signals.gpu_memory_high(a.gpu_memory_used_fraction),
            a.gpu_for_minutes,
            "warning",
            "GPU framebuffer nearly exhausted",
            "GPU {{ $labels.gpu }} on node {{ $labels.node }} uses {{ $value | humanizePercentage }} of its memory.",
            "Lower engine.gpuMemoryUtilization of the model on this node, or check for a second process on the GPU.",
        ),
        _alert(
            "GpuTemperatureHigh",
            signals.gpu_temperature_high(a.gpu_temperature_celsius),
            a.gpu_for_minutes,
            "warning",
            "GPU running hot",
            "GPU {{ $labels.gpu }} on node {{ $labels.node }} is at {{ $value }} C.",
            "Sustained heat throttles clocks and raises latency; drain the node if it persists.",
        ),
    ]


def rule_groups(models: Sequence[MonitoredModel], obs: ObservabilitySettings) -> list[dict[str, Any]]:
    """The `spec.groups` of the platform's PrometheusRule."""
    return [
        {"name": "inference-recording", "rules": [r for m in models for r in recording_rules(m, obs)]},
        {"name": "inference-alerts", "rules": [r for m in models for r in model_alerts(m, obs)]},
        {"name": "gpu-alerts", "rules": gpu_alerts(obs)},
    ]
