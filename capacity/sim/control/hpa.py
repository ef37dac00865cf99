"""The Kubernetes HorizontalPodAutoscaler algorithm (autoscaling/v2), as a pure model.

Follows `pkg/controller/podautoscaler` (replica_calculator.go, horizontal.go) at the 1.34 rules
for the metric sources KEDA creates (type External). Metric values and targets are whole
milli-units, as the controller reads them (`Quantity.MilliValue()`), and every ratio divides
those integers: `ceil(2100 / 700)` is 3 where `ceil(2.1 / 0.7)` would be 4.

- AverageValue: desired = ceil(usage / target); skipped while usage / (target x status
  replicas) is within the tolerance (`GetExternalPerPodMetricReplicas`).
- Value: desired = ceil(usage / target x ready pods); skipped within the tolerance
  (`GetExternalMetricReplicas` -> `getUsageRatioReplicaCount`, with the spec replicas).
- The tolerance is inclusive at both ends since 1.33 (`Tolerances.isWithin`).
- Several metrics: the largest proposal wins; invalid metrics block any scale-down.
- Behavior: stabilization windows over past recommendations (seeded with the current replicas on
  the first sync), then rate limits from the scaling policies (Pods/Percent per periodSeconds,
  selectPolicy Max/Min/Disabled) over the stored scale events, then minReplicas/maxReplicas.
Times are plain seconds (floats); the controller records everything at `now`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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
DEFAULT_SCALE_UP = HpaScalingRules(0, "Max", (HpaScalingPolicy("Pods", 4, 15), HpaScalingPolicy("Percent", 100, 15)))
DEFAULT_SCALE_DOWN = HpaScalingRules(300, "Max", (HpaScalingPolicy("Percent", 100, 15),))
DEFAULT_BEHAVIOR = HpaBehavior(DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN)


# --- replica_calculator.go ---------------------------------------------------------


def within_tolerance(usage_ratio: float, tolerance: float = DEFAULT_TOLERANCE) -> bool:
    """`Tolerances.isWithin`: (1 - tolerance) <= ratio <= (1 + tolerance), both ends included."""
    return 1.0 - tolerance <= usage_ratio <= 1.0 + tolerance


def average_value_replicas(usage: int, target: int, status_replicas: int, tolerance: float = DEFAULT_TOLERANCE) -> int:
    """`GetExternalPerPodMetricReplicas` (milli-units): ceil(usage / target), unless the
    per-replica average is within the tolerance of the target."""
    if target <= 0:
        raise ValueError(f"an AverageValue target must be > 0, got {target}")
    # With no status replicas the ratio is +Inf or NaN upstream: never within the tolerance.
    if status_replicas > 0 and within_tolerance(usage / (target * status_replicas), tolerance):
        return status_replicas
    return math.ceil(usage / target)


def value_replicas(
    usage: int,
    target: int,
    spec_replicas: int,
    ready_replicas: int,
    tolerance: float = DEFAULT_TOLERANCE,
) -> int:
    """`GetExternalMetricReplicas` (milli-units): ceil(usage / target x ready pods); from zero
    spec replicas, ceil(usage / target) regardless of the tolerance."""
    if target <= 0:
        raise ValueError(f"a Value target must be > 0, got {target}")
    usage_ratio = usage / target
    if spec_replicas == 0:
        return math.ceil(usage_ratio)
    if within_tolerance(usage_ratio, tolerance):
        return spec_replicas
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
    """A recommendation (`timestampedRecommendation`)."""

    time: float
    value: int


@dataclass
class ScaleEvent:
    """A stored scale event (`timestampedScaleEvent`): kept after it is outdated, until a
    newer event of its direction reuses its slot."""

    time: float
    value: int  # replicas added or removed, >= 0
    outdated: bool = False


def _change_in_period(events: Sequence[ScaleEvent], now: float, period_seconds: int) -> int:
    """`getReplicasChangePerPeriod`: outdated or not, every event inside the period counts."""
    cutoff = now - period_seconds
    return sum(e.value for e in events if e.time > cutoff)


def _period_start(
    current: int, up_events: Sequence[ScaleEvent], down_events: Sequence[ScaleEvent], period_seconds: int, now: float
) -> int:
    """Replicas at the start of a policy's period (`periodStartReplicas` upstream)."""
    return (
        current
        - _change_in_period(up_events, now, period_seconds)
        + _change_in_period(down_events, now, period_seconds)
    )


def scale_up_limit(
    current: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
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
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
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
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    behavior: HpaBehavior,
    now: float,
) -> int:
    """`convertDesiredReplicasWithBehaviorRate`: apply the policies and min/max."""
    if desired > current:
        up_limit = max(scale_up_limit(current, up_events, down_events, behavior.scale_up, now), current)
        return min(desired, max_replicas, up_limit)
    if desired < current:
        down_limit = min(scale_down_limit(current, up_events, down_events, behavior.scale_down, now), current)
        return max(desired, min_replicas, down_limit)
    return desired


def store_scale_event(events: list[ScaleEvent], rules: HpaScalingRules, now: float, change: int) -> None:
    """`storeScaleEvent` for one direction: mark the events older than the longest policy
    period outdated (`markScaleEventsOutdated`), put the new one in the last outdated slot,
    else append. Nothing is deleted: an outdated event still counts toward a longer period of
    the other direction's policies until its slot is reused."""
    longest = max((p.period_seconds for p in rules.policies), default=0)
    slot = None
    for i, event in enumerate(events):
        if event.time < now - longest:
            event.outdated = True
        if event.outdated:
            slot = i
    if slot is None:
        events.append(ScaleEvent(now, change))
    else:
        events[slot] = ScaleEvent(now, change)


@dataclass
class HorizontalPodAutoscaler:
    """One HPA object with the controller's per-HPA memory (recommendations, scale events)."""

    min_replicas: int
    max_replicas: int
    behavior: HpaBehavior = DEFAULT_BEHAVIOR
    recommendations: list[TimedValue] = field(default_factory=list)
    up_events: list[ScaleEvent] = field(default_factory=list)
    down_events: list[ScaleEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 <= self.min_replicas <= self.max_replicas:
            raise ValueError(f"maxReplicas ({self.max_replicas}) must be >= minReplicas ({self.min_replicas}) >= 0")

    def reconcile(self, now: float, spec_replicas: int, proposals: Callable[[], Sequence[int | None]]) -> int:
        """One sync: the replica count to set on the scale target (`reconcileAutoscaler`).

        `proposals` fetches the metrics and computes one proposal per metric (None: invalid);
        the controller asks for them only when it scales on metrics."""
        current = spec_replicas
        if not self.recommendations:  # `recordInitialRecommendation`, before any other check
            self.recommendations.append(TimedValue(now, current))
        if current == 0 and self.min_replicas != 0:
            return 0  # scaling is disabled while the target is scaled to zero
        if current > self.max_replicas:
            desired = self.max_replicas
        elif current < self.min_replicas:
            desired = self.min_replicas
        else:
            metric_desired = replicas_for_metrics(proposals(), current)
            if metric_desired is None:
                return current
            desired = self._normalize(now, current, metric_desired)
        if desired > current:
            store_scale_event(self.up_events, self.behavior.scale_up, now, desired - current)
        elif desired < current:
            store_scale_event(self.down_events, self.behavior.scale_down, now, current - desired)
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
        # The controller overwrites the last sample older than both windows, else appends.
        up = now - self.behavior.scale_up.stabilization_window_seconds
        down = now - self.behavior.scale_down.stabilization_window_seconds
        slot = None
        for i, rec in enumerate(self.recommendations):
            if rec.time < up and rec.time < down:
                slot = i
        if slot is None:
            self.recommendations.append(TimedValue(now, desired))
        else:
            self.recommendations[slot] = TimedValue(now, desired)
