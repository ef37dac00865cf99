"""A model's autoscaling settings turned into the ScaledObject the platform deploys."""

from __future__ import annotations

from dataclasses import dataclass

from capacity.hpa import Behavior, HorizontalPodAutoscaler, ScalingPolicy, ScalingRules
from capacity.keda import Fallback, ScaledObject, Trigger
from contract.settings.autoscaling import ModelAutoscaling
from contract.settings.autoscaling import ScalingRules as RulesSettings


@dataclass(frozen=True)
class Signals:
    """The PromQL windows and quantiles the triggers evaluate."""

    queue_window_s: float
    e2e_quantile: float
    e2e_window_s: float
    ttft_quantile: float
    ttft_window_s: float
    cron: tuple[str, str, str, int] | None = None  # start, end, timezone, desiredReplicas


def _rules(rules: RulesSettings) -> ScalingRules:
    return ScalingRules(
        rules.stabilization_window_seconds,
        rules.select_policy,
        tuple(ScalingPolicy(p.type, p.value, p.period_seconds) for p in rules.policies),
    )


def triggers_of(policy: ModelAutoscaling) -> tuple[Trigger, ...]:
    """Enabled triggers with their HPA metric types (additive -> AverageValue, quantile -> Value)."""
    t = policy.triggers
    found = []
    if t.queue_depth.enabled:
        found.append(Trigger("queueDepth", "AverageValue", t.queue_depth.target_per_replica))
    if t.kv_cache.enabled:
        found.append(Trigger("kvCache", "AverageValue", t.kv_cache.target_per_replica))
    if t.e2e_latency.enabled:
        found.append(Trigger("e2eLatency", "Value", t.e2e_latency.threshold_seconds))
    if t.ttft.enabled:
        found.append(Trigger("ttft", "Value", t.ttft.threshold_seconds))
    if t.cron.enabled:  # KEDA's cron scaler: desiredReplicas (in window) or 1 against AverageValue 1
        found.append(Trigger("cron", "AverageValue", 1.0))
    return tuple(found)


def signals_of(policy: ModelAutoscaling) -> Signals:
    t = policy.triggers
    return Signals(
        float(t.queue_depth.window_seconds),
        t.e2e_latency.quantile,
        float(t.e2e_latency.window_seconds),
        t.ttft.quantile,
        float(t.ttft.window_seconds),
        (t.cron.start, t.cron.end, t.cron.timezone, t.cron.desired_replicas) if t.cron.enabled else None,
    )


def scaled_object(policy: ModelAutoscaling) -> ScaledObject:
    """A fresh (stateless) ScaledObject + HPA for one simulation run."""
    behavior = Behavior(_rules(policy.behavior.scale_up), _rules(policy.behavior.scale_down))
    return ScaledObject(
        triggers=triggers_of(policy),
        # KEDA gives the HPA minReplicas >= 1 and handles 0 <-> 1 itself.
        hpa=HorizontalPodAutoscaler(max(policy.min_replicas, 1), policy.max_replicas, behavior),
        min_replica_count=policy.min_replicas,
        polling_interval_seconds=policy.polling_interval_seconds,
        cooldown_period_seconds=policy.cooldown_period_seconds,
        fallback=None
        if policy.fallback_replicas is None
        else Fallback(policy.fallback_replicas, policy.fallback_failure_threshold, policy.fallback_behavior),
    )
