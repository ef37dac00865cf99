"""The Kubernetes HorizontalPodAutoscaler algorithm (autoscaling/v2), as a pure model.

Follows `pkg/controller/podautoscaler` (replica_calculator.go, horizontal.go) for the
metric sources KEDA creates (type External):

- AverageValue: desired = ceil(sum / target); skipped while sum / (target x status
  replicas) is within the tolerance of 1 (`GetExternalPerPodMetricReplicas`).
- Value: desired = ceil(value / target x ready pods); skipped within the tolerance
  (`GetExternalMetricReplicas` -> `getUsageRatioReplicaCount`). Not-ready pods do not count.
- Several metrics: the largest proposal wins; invalid metrics block any scale-down.
- Behavior: stabilization windows over past recommendations, then rate limits from the
  scaling policies (Pods/Percent per periodSeconds, selectPolicy Max/Min/Disabled),
  then minReplicas/maxReplicas.
Times are plain seconds (floats); the controller records everything at `now`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

# The controller-manager flag `--horizontal-pod-autoscaler-tolerance` default.
DEFAULT_TOLERANCE = 0.1
# `--horizontal-pod-autoscaler-sync-period` default (fixed on EKS).
SYNC_PERIOD_SECONDS = 15.0

PolicyType = Literal["Pods", "Percent"]
SelectPolicy = Literal["Max", "Min", "Disabled"]


@dataclass(frozen=True)
class HpaScalingPolicy:
    type: PolicyType
    value: int
    period_seconds: int


@dataclass(frozen=True)
class HpaScalingRules:
    stabilization_window_seconds: int
    select_policy: SelectPolicy
    policies: tuple[HpaScalingPolicy, ...]


@dataclass(frozen=True)
class HpaBehavior:
    scale_up: HpaScalingRules
    scale_down: HpaScalingRules


# API defaults (autoscaling/v2 `SetDefaults_HorizontalPodAutoscalerBehavior`).
DEFAULT_SCALE_UP = HpaScalingRules(
    0, "Max", (HpaScalingPolicy("Pods", 4, 15), HpaScalingPolicy("Percent", 100, 15))
)
DEFAULT_SCALE_DOWN = HpaScalingRules(300, "Max", (HpaScalingPolicy("Percent", 100, 15),))
DEFAULT_BEHAVIOR = HpaBehavior(DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN)


# --- replica_calculator.go ---------------------------------------------------------


def average_value_replicas(
    total: float, target: float, status_replicas: int, tolerance: float = DEFAULT_TOLERANCE
) -> int:
    """External metric with an AverageValue target: ceil(sum / target), unless the
    per-replica average is within the tolerance of the target."""
    if target <= 0:
        raise ValueError(f"an AverageValue target must be > 0, got {target}")
    if status_replicas > 0:
        usage_ratio = total / (target * status_replicas)
        if abs(1.0 - usage_ratio) <= tolerance:
            return status_replicas
    return math.ceil(total / target)


def value_replicas(
    value: float,
    target: float,
    current_replicas: int,
    ready_replicas: int,
    tolerance: float = DEFAULT_TOLERANCE,
) -> int:
    """External metric with a Value target: ceil(value / target x ready pods)."""
    if target <= 0:
        raise ValueError(f"a Value target must be > 0, got {target}")
    usage_ratio = value / target
    if current_replicas == 0:
        return math.ceil(usage_ratio)
    if abs(1.0 - usage_ratio) <= tolerance:
        return current_replicas
    return math.ceil(usage_ratio * ready_replicas)


def replicas_for_metrics(proposals: Sequence[int | None], spec_replicas: int) -> int | None:
    """The largest proposal; None (no scaling this sync) when every metric is invalid, or
    when some are invalid and the valid ones would scale down (`computeReplicasForMetrics`)."""
    valid = [p for p in proposals if p is not None]
    if not valid:
        return None
    best = max(valid)
    if len(valid) < len(proposals) and best < spec_replicas:
        return None
    return best


# --- horizontal.go: behavior ----------------------------------------------------------


@dataclass(frozen=True)
class TimedValue:
    time: float
    value: int


def _change_in_period(events: Sequence[TimedValue], now: float, period_seconds: int) -> int:
    cutoff = now - period_seconds
    return sum(e.value for e in events if e.time > cutoff)


def _period_start(
    current: int, up_events: Sequence[TimedValue], down_events: Sequence[TimedValue], period_seconds: int, now: float
) -> int:
    """Replicas at the start of a policy's period (`periodStartReplicas` upstream)."""
    return current - _change_in_period(up_events, now, period_seconds) + _change_in_period(down_events, now, period_seconds)


def scale_up_limit(
    current: int,
    up_events: Sequence[TimedValue],
    down_events: Sequence[TimedValue],
    rules: HpaScalingRules,
    now: float,
) -> int:
    """`calculateScaleUpLimitWithScalingRules`: the most replicas the policies allow now."""
    if rules.select_policy == "Disabled":
        return current
    proposals = []
    for policy in rules.policies:
        start = _period_start(current, up_events, down_events, policy.period_seconds, now)
        if policy.type == "Pods":
            proposals.append(start + policy.value)
        else:  # rounded up, or a small fleet could never grow
            proposals.append(math.ceil(start * (1 + policy.value / 100)))
    return min(proposals) if rules.select_policy == "Min" else max(proposals)


def scale_down_limit(
    current: int,
    up_events: Sequence[TimedValue],
    down_events: Sequence[TimedValue],
    rules: HpaScalingRules,
    now: float,
) -> int:
    """`calculateScaleDownLimitWithBehaviors`: the fewest replicas the policies allow now."""
    if rules.select_policy == "Disabled":
        return current
    proposals = []
    for policy in rules.policies:
        start = _period_start(current, up_events, down_events, policy.period_seconds, now)
        if policy.type == "Pods":
            proposals.append(start - policy.value)
        else:  # truncated, as int32(float64(...)) does
            proposals.append(int(start * (1 - policy.value / 100)))
    # "Min" selects the smallest change, i.e. the largest floor.
    return max(proposals) if rules.select_policy == "Min" else min(proposals)


def stabilize(
    recommendations: Sequence[TimedValue],
    now: float,
    desired: int,
    current: int,
    behavior: HpaBehavior,
) -> int:
    """`stabilizeRecommendationWithBehaviors`: scale up only to the lowest and down only
    to the highest recommendation seen inside the respective window."""
    up_cutoff = now - behavior.scale_up.stabilization_window_seconds
    down_cutoff = now - behavior.scale_down.stabilization_window_seconds
    up_bound = desired
    down_bound = desired
    for rec in recommendations:
        if rec.time > up_cutoff:
            up_bound = min(up_bound, rec.value)
        if rec.time > down_cutoff:
            down_bound = max(down_bound, rec.value)
    return min(max(current, up_bound), down_bound)


def limit_rate(
    desired: int,
    current: int,
    min_replicas: int,
    max_replicas: int,
    up_events: Sequence[TimedValue],
    down_events: Sequence[TimedValue],
    behavior: HpaBehavior,
    now: float,
) -> int:
    """`convertDesiredReplicasWithBehaviorRate`: apply the policies and min/max."""
    if desired > current:
        up_limit = max(
            scale_up_limit(current, up_events, down_events, behavior.scale_up, now), current
        )
        return min(desired, max_replicas, up_limit)
    if desired < current:
        down_limit = min(
            scale_down_limit(current, up_events, down_events, behavior.scale_down, now), current
        )
        return max(desired, min_replicas, down_limit)
    return desired


@dataclass
class HorizontalPodAutoscaler:
    """One HPA object with the controller's per-HPA memory (recommendations, scale events)."""

    min_replicas: int
    max_replicas: int
    behavior: HpaBehavior = DEFAULT_BEHAVIOR
    recommendations: list[TimedValue] = field(default_factory=list)
    up_events: list[TimedValue] = field(default_factory=list)
    down_events: list[TimedValue] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 <= self.min_replicas <= self.max_replicas:
            raise ValueError(
                f"maxReplicas ({self.max_replicas}) must be >= minReplicas ({self.min_replicas}) >= 0"
            )

    def reconcile(self, now: float, current: int, proposals: Sequence[int | None]) -> int:
        """One sync: the replica count to set on the scale target (`reconcileAutoscaler`)."""
        if current == 0 and self.min_replicas != 0:
            return 0  # scaling is disabled while the target is scaled to zero
        if current > self.max_replicas:
            desired = self.max_replicas
        elif current < self.min_replicas:
            desired = self.min_replicas
        else:
            metric_desired = replicas_for_metrics(proposals, current)
            if metric_desired is None:
                return current
            desired = self._normalize(now, current, metric_desired)
        if desired != current:
            self._record_scale_event(now, current, desired)
        return desired

    def _normalize(self, now: float, current: int, desired: int) -> int:
        stabilized = stabilize(self.recommendations, now, desired, current, self.behavior)
        self._record_recommendation(now, desired)
        return limit_rate(
            stabilized,
            current,
            self.min_replicas,
            self.max_replicas,
            self.up_events,
            self.down_events,
            self.behavior,
            now,
        )

    def _record_recommendation(self, now: float, desired: int) -> None:
        # The controller overwrites one sample older than both windows, else appends.
        up = now - self.behavior.scale_up.stabilization_window_seconds
        down = now - self.behavior.scale_down.stabilization_window_seconds
        for i, rec in enumerate(self.recommendations):
            if rec.time < up and rec.time < down:
                self.recommendations[i] = TimedValue(now, desired)
                return
        self.recommendations.append(TimedValue(now, desired))

    def _record_scale_event(self, now: float, current: int, desired: int) -> None:
        rules = self.behavior.scale_up if desired > current else self.behavior.scale_down
        events = self.up_events if desired > current else self.down_events
        longest = max((p.period_seconds for p in rules.policies), default=0)
        events[:] = [e for e in events if e.time > now - longest]
        events.append(TimedValue(now, abs(desired - current)))
