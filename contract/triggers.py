"""The scaling triggers, declared once.

Everything that enumerates triggers iterates `TRIGGERS`: the ScaledObjects (components/
autoscaling), the capacity dashboards, the capacity collector, the simulator, its report and
the tuner. A new trigger is one `Trigger` here plus its settings field in
`contract.settings.autoscaling.Triggers` (whose camelCase key is `Trigger.key`).

Why each metric type (the HPA's two formulas, `replica_calculator.go`):
- `AverageValue`: desired = ceil(sum / target). Right for additive signals, whose sum over
  replicas means something (waiting requests, replicas' worth of KV cache in use).
- `Value`: desired = ceil(current x value / target). Right for a fleet-wide quantile, which does
  not add up: dividing a p99 by the replica count, as AverageValue would, is meaningless.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .settings.autoscaling import ModelAutoscaling, TriggerSection
from .signals import Query, Trend, Vllm

MetricType = Literal["AverageValue", "Value"]


@dataclass(frozen=True)
class Trigger:
    """One scaling trigger: its config key, its name in the ScaledObject, how KEDA compares it
    with its target, the query it reads and where its target lives in the settings."""

    key: str  # under `autoscaling.<scope>.triggers`, as `pulumi config set --path` spells it
    keda_name: str  # the trigger's `name` in the ScaledObject
    metric_type: MetricType
    why: str  # why this metric type, in one line
    target_key: str  # the settings key of its target (`targetPerReplica`, `thresholdSeconds`)
    # The signal it reads; None for a trigger that reads no metric (cron).
    query: Callable[[Any], Query] | None
    label: str  # what the signal is, for dashboards and reports
    unit: str  # Grafana unit of the signal
    # Targets the tuner tries, given the merged policy; empty: the tuner leaves it alone.
    search: Callable[[ModelAutoscaling], Sequence[float]] = lambda policy: ()
    # The target KEDA's metric is compared with when it is fixed by the scaler, not configured
    # (cron: 1, against a metric of desiredReplicas inside the window).
    fixed_target: float | None = None

    def settings(self, policy: ModelAutoscaling) -> TriggerSection:
        """This trigger's settings section in a merged policy (`triggers.<key>`)."""
        sections = policy.triggers.sections()
        if self.key not in sections:
            raise KeyError(f"trigger {self.key!r} has no settings field in {type(policy.triggers).__name__}")
        return sections[self.key]

    def enabled(self, policy: ModelAutoscaling) -> bool:
        return bool(self.settings(policy).enabled)

    def target(self, policy: ModelAutoscaling) -> float:
        """The configured value at `target_key` (for cron, its desiredReplicas)."""
        settings = self.settings(policy)
        return float(
            next(getattr(settings, n) for n, f in type(settings).model_fields.items() if f.alias == self.target_key)
        )

    def target_path(self) -> str:
        """The target's key path relative to a scope, e.g. `triggers.queueDepth.targetPerReplica`."""
        return f"triggers.{self.key}.{self.target_key}"

    def metric_target(self, policy: ModelAutoscaling) -> float:
        """What the HPA compares the trigger's metric with."""
        return self.fixed_target if self.fixed_target is not None else self.target(policy)

    def signal(self, policy: ModelAutoscaling) -> Query | None:
        return self.query(self.settings(policy)) if self.query is not None else None


def _guardrail_candidates(policy: ModelAutoscaling) -> tuple[float, ...]:
    """End-to-end guardrails to try: above slo.e2eP99Seconds when one is set (the settings rule),
    else around the configured threshold."""
    slo = policy.slo.e2e_p99_seconds
    if slo is not None:
        return tuple(round(slo * f, 1) for f in (1.05, 1.25, 1.5, 2.0))
    return tuple(round(policy.triggers.e2e_latency.threshold_seconds * f, 1) for f in (0.5, 0.75, 1.0, 1.5, 2.0))


TRIGGERS: tuple[Trigger, ...] = (
    Trigger(
        key="queueDepth",
        keda_name="queue-depth",
        metric_type="AverageValue",
        why="waiting requests add up across replicas; the HPA divides the sum by the replicas",
        target_key="targetPerReplica",
        query=lambda t: Query(Vllm.REQUESTS_WAITING, "sum_avg_over_time", t.window_seconds),
        label="Queue depth",
        unit="short",
        search=lambda policy: (1, 2, 3, 4, 6, 8, 12),
    ),
    Trigger(
        key="kvCache",
        keda_name="kv-cache",
        metric_type="AverageValue",
        why="KV fractions add up to replicas' worth of cache in use, which stays high after a new "
        "replica drains the queue, so capacity in use is not given back too early",
        target_key="targetPerReplica",
        query=lambda t: Query(Vllm.KV_CACHE_USAGE, "sum"),
        label="KV cache",
        unit="percentunit",
        search=lambda policy: (0.5, 0.6, 0.7, 0.8, 0.9),
    ),
    # A rate over a counter vLLM bumps when a prompt's prefill completes: it tracks offered
    # load while replicas keep up, and lags it once they saturate (served, not offered, work),
    # so it scales with load before a queue forms and leaves saturation to the queue trigger.
    Trigger(
        key="promptTokens",
        keda_name="prompt-tokens",
        metric_type="AverageValue",
        why="prompt tokens per second add up across replicas; the HPA divides the sum by the replicas",
        target_key="targetPerReplica",
        query=lambda t: Query(Vllm.PROMPT_TOKENS, "sum_rate", t.window_seconds),
        label="Prompt tokens/s",
        unit="short",
        search=lambda policy: (400, 600, 800, 1000, 1200),
    ),
    # The forecasts: the same prompt-token signal read ahead from the history Prometheus holds.
    # The HPA takes the largest proposal of all triggers, so a forecast only ever raises the
    # fleet (AIBrix's predictive autoscaler is built the same way).
    Trigger(
        key="seasonal",
        keda_name="forecast-seasonal",
        metric_type="AverageValue",
        why="prompt tokens per second a period ago add up across replicas, as today's do",
        target_key="targetPerReplica",
        query=lambda t: Query(Vllm.PROMPT_TOKENS, "sum_rate", t.window_seconds, offset_seconds=t.offset_seconds),
        label="Prompt tokens/s a period ago, lead ahead",
        unit="short",
        search=lambda policy: (400, 600, 800, 1000, 1200),
    ),
    Trigger(
        key="trend",
        keda_name="forecast-trend",
        metric_type="AverageValue",
        why="an extrapolated prompt-token rate adds up across replicas, as the rate does",
        target_key="targetPerReplica",
        query=lambda t: Query(
            Vllm.PROMPT_TOKENS,
            "sum_rate",
            t.window_seconds,
            trend=Trend(t.range_seconds, t.step_seconds, t.lead_seconds),
        ),
        label="Prompt tokens/s, trend lead ahead",
        unit="short",
        search=lambda policy: (400, 600, 800, 1000, 1200),
    ),
    Trigger(
        key="e2eLatency",
        keda_name="e2e-latency",
        metric_type="Value",
        why="a quantile is not additive; dividing it by the replica count would be meaningless",
        target_key="thresholdSeconds",
        query=lambda t: Query(Vllm.E2E_LATENCY, "quantile", t.window_seconds, t.quantile),
        label="End-to-end",
        unit="s",
        search=lambda policy: _guardrail_candidates(policy),
    ),
    Trigger(
        key="ttft",
        keda_name="ttft",
        metric_type="Value",
        why="same reason as the end-to-end latency guardrail",
        target_key="thresholdSeconds",
        query=lambda t: Query(Vllm.TTFT, "quantile", t.window_seconds, t.quantile),
        label="TTFT",
        unit="s",
    ),
    # KEDA's cron scaler reports desiredReplicas inside its window (0 outside, since 2.18) against
    # an AverageValue target of 1: warm capacity before a known peak, no metric read.
    Trigger(
        key="cron",
        keda_name="warm-peak",
        metric_type="AverageValue",
        why="KEDA's cron scaler is an AverageValue metric of desiredReplicas against a target of 1",
        target_key="desiredReplicas",
        query=None,
        label="Scheduled warm capacity",
        unit="short",
        fixed_target=1.0,
    ),
)

BY_KEY = {t.key: t for t in TRIGGERS}


def enabled_triggers(policy: ModelAutoscaling, triggers: Sequence[Trigger] = TRIGGERS) -> list[Trigger]:
    """The model's enabled triggers, in declaration order."""
    return [t for t in triggers if t.enabled(policy)]
