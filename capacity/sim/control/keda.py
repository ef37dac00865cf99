"""KEDA's part of the control loop (v2.20.2), as a pure model on top of `capacity.sim.control.hpa`.

KEDA turns each ScaledObject trigger into an External metric of the HPA it owns, and reads every
scaler (`capacity.sim.control.scalers`: a metric and its activity, or an error) in two places:
the metrics server, each time the HPA asks (`GetScaledObjectMetrics`), and the operator's own
loop, every pollingInterval (`checkScalers` -> `RequestScale`). Both go
through `pkg/fallback.GetMetricsWithFallback`, so both count a failure and both reset the count
on success. After more than failureThreshold consecutive failures a trigger of either metric
type reports its fallback value (`doFallback`), and counts as active. The operator loop alone
moves a target between 0 and minReplicaCount, and never while a trigger errors.
Values cross to Kubernetes as quantities of 3 decimals (`quantityFromFloat64`), read back in
milli-units (`milli`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from capacity.sim.control.cron import CronWindow
from capacity.sim.control.hpa import DEFAULT_TOLERANCE, HorizontalPodAutoscaler, average_value_replicas, value_replicas
from capacity.sim.control.scalers import MetricsAndActivity
from contract.signals import Query

MetricType = Literal["AverageValue", "Value"]
FallbackBehavior = Literal["static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"]

# KEDA's documented example threshold; the stack config fixes only fallback.replicas.
DEFAULT_FAILURE_THRESHOLD = 3


def milli(value: float) -> int:
    """A float as the HPA reads it from KEDA: `quantityFromFloat64` formats it with `%.3f`
    (NaN, Inf and negatives become 0), `Quantity.MilliValue()` reads that decimal exactly."""
    if not math.isfinite(value) or value < 0:
        return 0
    return int(f"{value:.3f}".replace(".", ""))


@dataclass(frozen=True)
class KedaTrigger:
    """One ScaledObject trigger as the HPA sees it, and what its scaler reads: a Prometheus
    query or a cron window (None when the caller feeds metric values itself)."""

    name: str
    metric_type: MetricType
    target: float
    activation_threshold: float = 0.0
    source: Query | CronWindow | None = None
    # The Prometheus scaler's `ignoreNullValues`: an empty, NaN or ±Inf result reads 0 instead
    # of failing (`prometheus_scaler.go`, ExecutePromQuery; KEDA's default is true).
    ignore_null_values: bool = False
    # The query selector's equality label matchers, (label, value): a series lacking a match is
    # not read (`capacity.sim.simulator` checks them against the labels its series carry).
    matchers: tuple[tuple[str, str], ...] = ()

    @property
    def target_milli(self) -> int:
        """The target quantity in milli-units (`GetMetricTargetMili`; cron's 1 is whole)."""
        return milli(self.target)


@dataclass(frozen=True)
class Fallback:
    replicas: int
    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD
    behavior: FallbackBehavior = "static"


def fallback_replicas(fallback: Fallback, spec_replicas: int) -> int:
    """The replica count a failing trigger falls back to (`doFallback`); the `currentReplicas*`
    behaviours read the Deployment's spec replicas (`resolver.GetCurrentReplicas`)."""
    if fallback.behavior == "currentReplicas":
        return spec_replicas
    if fallback.behavior == "currentReplicasIfHigher":
        return max(spec_replicas, fallback.replicas)
    if fallback.behavior == "currentReplicasIfLower":
        return min(spec_replicas, fallback.replicas)
    return fallback.replicas


def fallback_metric(trigger: KedaTrigger, fallback: Fallback, spec_replicas: int, ready_replicas: int) -> int | None:
    """`doFallback`: the milli-value that makes the HPA compute the fallback replicas:
    target x replicas for AverageValue, target x replicas / ready pods for Value (None, an
    error, when no pod is ready). The target is not truncated; the product is (`int64`)."""
    replicas = float(fallback_replicas(fallback, spec_replicas))
    if trigger.metric_type == "Value":
        if ready_replicas == 0:
            return None
        replicas /= ready_replicas
    target = trigger.target_milli * 1e-3  # Quantity.AsApproximateFloat64 of a milli quantity
    return int(target * 1000 * replicas)


def proposal(
    trigger: KedaTrigger,
    usage: int,
    spec_replicas: int,
    status_replicas: int,
    ready_replicas: int,
    tolerance: float = DEFAULT_TOLERANCE,
) -> int:
    """The HPA's replica proposal for one External metric (`computeStatusForExternalMetric`)."""
    if trigger.metric_type == "AverageValue":
        return average_value_replicas(usage, trigger.target_milli, status_replicas, tolerance)
    return value_replicas(usage, trigger.target_milli, spec_replicas, ready_replicas, tolerance)


@dataclass
class ScaledObject:
    """A ScaledObject with its HPA; feed it each trigger's scaler reading (by trigger name), get
    the replica count to set."""

    triggers: tuple[KedaTrigger, ...]
    hpa: HorizontalPodAutoscaler
    min_replica_count: int
    polling_interval_seconds: float = 30.0
    cooldown_period_seconds: float = 300.0
    fallback: Fallback | None = None
    tolerance: float = DEFAULT_TOLERANCE
    failures: dict[str, int] = field(default_factory=dict)  # status.health[*].numberOfFailures
    last_active: float | None = None  # status.lastActiveTime

    def read(
        self, trigger: KedaTrigger, value: float | None, spec_replicas: int, ready_replicas: int
    ) -> tuple[int | None, bool]:
        """`GetMetricsWithFallback`: (the milli-value, or None for an error; on fallback)."""
        if self.fallback is None:  # health is tracked only with a fallback
            return (None if value is None else milli(value)), False
        if value is not None:
            self.failures[trigger.name] = 0
            return milli(value), False
        failures = self.failures[trigger.name] = self.failures.get(trigger.name, 0) + 1
        if failures <= self.fallback.failure_threshold:
            return None, False
        metric = fallback_metric(trigger, self.fallback, spec_replicas, ready_replicas)
        return metric, metric is not None

    def hpa_sync(
        self,
        now: float,
        spec_replicas: int,
        status_replicas: int,
        ready_replicas: int,
        readings: Mapping[str, MetricsAndActivity],
    ) -> int:
        """One HPA sync period: the desired replica count. The HPA asks KEDA's metrics server
        for every trigger's metric only when it scales on metrics (activity plays no part)."""

        def proposals() -> list[int | None]:
            found: list[int | None] = []
            for t in self.triggers:
                usage, _ = self.read(t, readings[t.name].value, spec_replicas, ready_replicas)
                if usage is None:
                    found.append(None)
                else:
                    found.append(proposal(t, usage, spec_replicas, status_replicas, ready_replicas, self.tolerance))
            return found

        return self.hpa.reconcile(now, spec_replicas, proposals)

    def poll(
        self, now: float, spec_replicas: int, ready_replicas: int, readings: Mapping[str, MetricsAndActivity]
    ) -> int:
        """The operator's pollingInterval loop: the replica count after `RequestScale`.

        A trigger is active when its scaler says so or it is on fallback (`getScalerState`:
        `fallbackActive || isMetricActive`); an error without fallback makes the object erroring."""
        active = error = False
        for t in self.triggers:
            reading = readings[t.name]
            usage, on_fallback = self.read(t, reading.value, spec_replicas, ready_replicas)
            if usage is None:
                error = True
            elif on_fallback or reading.active:
                active = True
        return self._request_scale(now, spec_replicas, active, error)

    def _request_scale(self, now: float, current: int, active: bool, error: bool) -> int:
        """`scaleExecutor.RequestScale` for a ScaledObject without idleReplicaCount."""
        if active:
            if current == 0:  # scaleFromZeroOrIdle
                self._mark_active(now)
                return max(self.min_replica_count, 1)
            if not error:  # a partial trigger error leaves lastActiveTime alone
                self._mark_active(now)
            return current
        if error and (self.fallback is None or self.fallback.replicas != 0):
            return current  # never to zero nor up to minReplicaCount while a trigger errors
        if current > 0 and self.min_replica_count == 0:
            # scaleToZeroOrIdle: lastActiveTime + cooldownPeriod strictly before now; a ScaledObject
            # never active counts from its creation (t = 0) + initialCooldownPeriod (default 0).
            deadline = 0.0 if self.last_active is None else self.last_active + self.cooldown_period_seconds
            return 0 if deadline < now else current
        if current < self.min_replica_count:
            return self.min_replica_count
        return current

    def _mark_active(self, now: float) -> None:
        self.last_active = float(math.floor(now))  # a metav1.Time in the status keeps whole seconds
