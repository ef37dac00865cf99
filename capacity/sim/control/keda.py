"""KEDA's part of the control loop, as a pure model on top of `capacity.sim.control.hpa`.

KEDA turns each ScaledObject trigger into an External metric of the HPA it owns. With
minReplicaCount >= 1 the HPA does all the scaling; KEDA only serves metric values, and on
a failing scaler substitutes the fallback value (`pkg/fallback`): after more than
failureThreshold consecutive failures an AverageValue trigger reports target x replicas,
so the HPA computes exactly fallback.replicas. Value triggers have no fallback; their
failure makes the metric invalid, which blocks scale-down. With minReplicaCount 0 the KEDA
operator itself activates 0 -> 1 when any trigger is above its activation threshold (checked
every pollingInterval) and deactivates to 0 after cooldownPeriod without activity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from capacity.sim.control.cron import CronWindow
from capacity.sim.control.hpa import DEFAULT_TOLERANCE, HorizontalPodAutoscaler, average_value_replicas, value_replicas
from contract.signals import Query

MetricType = Literal["AverageValue", "Value"]
FallbackBehavior = Literal["static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"]

# KEDA's documented example threshold; the stack config fixes only fallback.replicas.
DEFAULT_FAILURE_THRESHOLD = 3


@dataclass(frozen=True)
class KedaTrigger:
    """One ScaledObject trigger as the HPA sees it, and what its scaler reads: a Prometheus
    query or a cron window (None when the caller feeds metric values itself)."""

    name: str
    metric_type: MetricType
    target: float
    activation_threshold: float = 0.0
    source: Query | CronWindow | None = None
    # The Prometheus scaler's `ignoreNullValues`: an empty or NaN result reads 0 instead of
    # failing (`prometheus_scaler.go`, ExecutePromQuery; KEDA's default is true).
    ignore_null_values: bool = False


@dataclass(frozen=True)
class Fallback:
    replicas: int
    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD
    behavior: FallbackBehavior = "static"


def fallback_replicas(fallback: Fallback, current_replicas: int) -> int:
    """The replica count a failing trigger falls back to (`doFallback`)."""
    if fallback.behavior == "currentReplicas":
        return current_replicas
    if fallback.behavior == "currentReplicasIfHigher":
        return max(current_replicas, fallback.replicas)
    if fallback.behavior == "currentReplicasIfLower":
        return min(current_replicas, fallback.replicas)
    return fallback.replicas


def fallback_value(trigger: KedaTrigger, replicas: int) -> float:
    """The metric value that makes an AverageValue HPA compute `replicas`.

    KEDA truncates the target to an integer (`int64(AverageValue.AsApproximateFloat64())`)
    before multiplying; we keep it exact so the HPA result is `replicas` for fractional
    targets such as a KV fraction of 0.7 (in KEDA that case reports 0: a known sharp edge).
    """
    return trigger.target * replicas


def proposal(
    trigger: KedaTrigger,
    value: float,
    status_replicas: int,
    ready_replicas: int,
    tolerance: float = DEFAULT_TOLERANCE,
) -> int:
    """The HPA's replica proposal for one External metric value."""
    if trigger.metric_type == "AverageValue":
        return average_value_replicas(value, trigger.target, status_replicas, tolerance)
    return value_replicas(value, trigger.target, status_replicas, ready_replicas, tolerance)


@dataclass
class ScaledObject:
    """A ScaledObject with its HPA; feed it metric values, get the replica count to set."""

    triggers: tuple[KedaTrigger, ...]
    hpa: HorizontalPodAutoscaler
    min_replica_count: int
    polling_interval_seconds: float = 30.0
    cooldown_period_seconds: float = 300.0
    fallback: Fallback | None = None
    tolerance: float = DEFAULT_TOLERANCE
    failures: dict[str, int] = field(default_factory=dict)
    last_active: float | None = None
    in_fallback: bool = False

    def metric_values(
        self, values: Mapping[str, float | None], current_replicas: int
    ) -> dict[str, float | None]:
        """What KEDA's metrics server answers per trigger; None = a failed query passed through."""
        answered: dict[str, float | None] = {}
        self.in_fallback = False
        for trigger in self.triggers:
            value = values.get(trigger.name)
            if value is not None and math.isfinite(value):
                self.failures[trigger.name] = 0
                answered[trigger.name] = value
                continue
            self.failures[trigger.name] = self.failures.get(trigger.name, 0) + 1
            answered[trigger.name] = None
            if (
                self.fallback is not None
                and trigger.metric_type == "AverageValue"
                and self.failures[trigger.name] > self.fallback.failure_threshold
            ):
                replicas = fallback_replicas(self.fallback, current_replicas)
                answered[trigger.name] = fallback_value(trigger, replicas)
                self.in_fallback = True
        return answered

    def hpa_sync(
        self, now: float, status_replicas: int, ready_replicas: int, values: Mapping[str, float | None]
    ) -> int:
        """One HPA sync period: the desired replica count."""
        answered = self.metric_values(values, status_replicas)
        proposals: Sequence[int | None] = [
            None
            if answered[t.name] is None
            else proposal(t, answered[t.name], status_replicas, ready_replicas, self.tolerance)  # type: ignore[arg-type]
            for t in self.triggers
        ]
        return self.hpa.reconcile(now, status_replicas, proposals)

    def is_active(self, values: Mapping[str, float | None], reported: Mapping[str, bool] | None = None) -> bool:
        """Any trigger active. `reported`: activity a scaler reports itself rather than by
        threshold: the cron scaler is active inside its window only, though it reports a metric
        of 1 outside it."""
        reported = reported or {}
        return any(
            reported[t.name] if t.name in reported else (v := values.get(t.name)) is not None and v > t.activation_threshold
            for t in self.triggers
        )  # fmt: skip

    def poll(self, now: float, current_replicas: int, values: Mapping[str, float | None],
             reported: Mapping[str, bool] | None = None) -> int:  # fmt: skip
        """KEDA operator's pollingInterval check: activation and scale to/from zero."""
        active = self.is_active(values, reported)
        if active:
            self.last_active = now
        if self.min_replica_count > 0:
            return max(current_replicas, self.min_replica_count)
        if current_replicas == 0:
            return 1 if active else 0
        idle_since = self.last_active if self.last_active is not None else -math.inf
        if not active and now - idle_since >= self.cooldown_period_seconds:
            return 0
        return current_replicas
