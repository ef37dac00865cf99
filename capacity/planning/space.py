"""The planner's search space: each parameter it searches, as the Optuna distribution it is
drawn from, and the stack's committed policy as a point of that space.

One TPE study per GPU type draws every parameter in `SPACE` order (so a seed gives the same
search); `plan.edits_of` turns a point into the `pulumi config set --path` edits that deploy it.
The committed policy is enqueued as the first trial of its GPU type's study: its values snapped
to the nearest the space holds, since Optuna refuses a categorical value it was not given and the
sampler learns only from points of the space (the planner still runs the committed policy as it
is; the snapped point is where the sampler files its result).

Not searched, by the planner's rules (`guardrails`): maxReplicas (the pools' replica budget) and,
unless the guardrails may be dropped, whether the kvCache and e2eLatency triggers are on (they
are); their thresholds are drawn relative to what healthy traffic reaches: `kvHeadroom` places
the KV target between a full replica's KV and the ceiling, `e2eFactor` scales the latency bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from capacity.engine.measured import EngineFlags
from capacity.planning.guardrails import KV_CEILING
from capacity.planning.stack import StackModel
from capacity.sim.control.hpa import HpaScalingRules
from capacity.sim.scaledobject import Manifest
from contract.signals import Query, Vllm

MAX_NUM_SEQS = (16, 24, 32, 48, 64, 96, 128)
MAX_NUM_BATCHED_TOKENS = (1024, 2048, 4096, 8192)
GPU_MEMORY_UTILIZATION = (0.85, 0.90, 0.95)
ROUTINGS = ("least-request", "endpoint-picker")  # serving.routing
LMCACHE = ("none", "8Gi", "16Gi", "32Gi")  # engine.lmcache: LMCache's CPU tier per replica ("none": unset)
CONSOLIDATE_AFTER_S = {"1m": 60, "5m": 300, "15m": 900}  # the pools' consolidateAfter choices, in seconds
# How far ahead the forecast triggers look (seconds): about a replica's start, with and without
# the fast-start features, up to a quarter hour (a ramp seen that early is bought in time).
SEASONAL_LEADS = (120, 300, 600, 900)
TREND_LEADS = (120, 300, 600)
ROUNDED = ("kvHeadroom", "kvTarget", "e2eFactor", "ttftFactor")  # floats kept to two decimals, as printed
# The reference ScaledObjects (the designs this project grew from): `compare` replays them, and
# every study of `plan` is seeded with them after the committed policy.
REFERENCE_DESIGNS = Path(__file__).resolve().parents[1] / "policies" / "reference"


def distributions(
    budget: int,
    search_pools: bool,
    down_windows: Sequence[int],
    guardrails: bool = True,
    routing: bool = False,
    lmcache: bool = False,
    min_warm: int = 1,
    forecasts: bool = False,
) -> dict[str, BaseDistribution]:
    """Every searched parameter and what it is drawn from, in the order drawn. `budget`: the
    replicas the pools hold (minReplicas is drawn up to it). `guardrails`: the kvCache and
    e2eLatency triggers stay on (else each may be drawn off, the KV target down to 0.05).
    `routing`: `serving.routing` is drawn too (the traces know their prefixes); `lmcache`:
    `engine.lmcache` too ("none" or a CPU tier; the model's image ships LMCache). `min_warm`: the
    fewest warm replicas the stack's policy pack allows (minReplicas is drawn from it).
    `forecasts`: the forecast triggers too (on, target, lead), when the traffic has a history to
    read (days after the first of a multi-day trace)."""
    space: dict[str, BaseDistribution] = {
        "maxNumSeqs": CategoricalDistribution(MAX_NUM_SEQS),
        "maxNumBatchedTokens": CategoricalDistribution(MAX_NUM_BATCHED_TOKENS),
        "gpuMemoryUtilization": CategoricalDistribution(GPU_MEMORY_UTILIZATION),
        "minReplicas": IntDistribution(max(1, min(min_warm, budget)), budget),
        "queueTarget": IntDistribution(1, 12),
        "queueWindow": CategoricalDistribution((30, 60, 120)),
        **(_kept_guardrails() if guardrails else _droppable_guardrails()),
        "promptEnabled": CategoricalDistribution((True, False)),
        "promptTarget": IntDistribution(200, 3000, step=100),
        "promptWindow": CategoricalDistribution((30, 60, 120)),
        "e2eFactor": FloatDistribution(1.05, 2.0, step=0.05),
        "ttftEnabled": CategoricalDistribution((True, False)),
        "ttftFactor": FloatDistribution(1.1, 3.0, step=0.1),
        "scaleUpWindow": CategoricalDistribution((0, 30, 60)),
        "scaleUpPods": IntDistribution(1, 8),
        "scaleUpPeriod": CategoricalDistribution((15, 30, 60)),
        "scaleDownWindow": CategoricalDistribution(tuple(down_windows)),
        "scaleDownPods": IntDistribution(1, 4),
        "scaleDownPeriod": CategoricalDistribution((60, 120, 300)),
    }
    if forecasts:
        space.update(
            seasonalEnabled=CategoricalDistribution((True, False)),
            seasonalTarget=IntDistribution(200, 3000, step=100),
            seasonalLead=CategoricalDistribution(SEASONAL_LEADS),
            trendEnabled=CategoricalDistribution((True, False)),
            trendTarget=IntDistribution(200, 3000, step=100),
            trendLead=CategoricalDistribution(TREND_LEADS),
        )
    if search_pools:  # else the pools' own value: they are not this model's alone to tune
        space["consolidateAfter"] = CategoricalDistribution(tuple(CONSOLIDATE_AFTER_S))
    if routing:
        space["routing"] = CategoricalDistribution(ROUTINGS)
    if lmcache:
        space["lmcache"] = CategoricalDistribution(LMCACHE)
    return space


def with_fixed_engine_flags(space: dict[str, BaseDistribution], flags: EngineFlags) -> dict[str, BaseDistribution]:
    """`space` with the vLLM flags held at a measured profile's: the profile is that replica as
    swept, so other flags would not change what is simulated, only what is deployed."""
    fixed = {
        "maxNumSeqs": flags.max_num_seqs,
        "maxNumBatchedTokens": flags.max_num_batched_tokens,
        "gpuMemoryUtilization": flags.gpu_memory_utilization,
    }
    return {name: CategoricalDistribution((fixed[name],)) if name in fixed else d for name, d in space.items()}


def _kept_guardrails() -> dict[str, BaseDistribution]:
    # Where the KV target sits between what a full replica holds (0) and the ceiling (1).
    return {"kvHeadroom": FloatDistribution(0.0, 1.0, step=0.1)}


def _droppable_guardrails() -> dict[str, BaseDistribution]:
    return {
        "kvEnabled": CategoricalDistribution((True, False)),
        # Low targets too: a replica's KV use tracks its tokens in flight, so a target far below
        # a full cache scales in proportion to load before any queue forms.
        "kvTarget": FloatDistribution(0.05, 0.95, step=0.05),
        "e2eEnabled": CategoricalDistribution((True, False)),
    }


def suggest(trial: Any, space: dict[str, BaseDistribution]) -> dict[str, Any]:
    """A point of `space` drawn by an Optuna trial (an enqueued trial returns its fixed values)."""
    return _rounded({name: _draw(trial, name, distribution) for name, distribution in space.items()})


def _rounded(point: dict[str, Any]) -> dict[str, Any]:
    return {name: round(value, 2) if name in ROUNDED else value for name, value in point.items()}


def _draw(trial: Any, name: str, distribution: BaseDistribution) -> Any:
    if isinstance(distribution, CategoricalDistribution):
        return trial.suggest_categorical(name, list(distribution.choices))
    if isinstance(distribution, IntDistribution):
        return trial.suggest_int(name, distribution.low, distribution.high, step=distribution.step)
    assert isinstance(distribution, FloatDistribution)
    return trial.suggest_float(name, distribution.low, distribution.high, step=distribution.step)


def snap(value: Any, distribution: BaseDistribution) -> Any:
    """The value of `distribution` nearest to `value`: a choice (a number by distance, anything
    else as it is or the first choice), or a step of a range clamped to its ends."""
    if isinstance(distribution, CategoricalDistribution):
        choices = distribution.choices
        if value in choices and type(value) is type(choices[choices.index(value)]):
            return value
        numbers = [c for c in choices if isinstance(c, (int, float)) and not isinstance(c, bool)]
        if numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
            return min(numbers, key=lambda c: abs(c - value))
        return choices[0]
    assert isinstance(distribution, (IntDistribution, FloatDistribution))
    step = distribution.step or 1
    steps = round((min(max(value, distribution.low), distribution.high) - distribution.low) / step)
    point = distribution.low + steps * step
    return int(point) if isinstance(distribution, IntDistribution) else round(point, 6)


def committed_values(sm: StackModel, kv_floor: float, e2e_base: float) -> dict[str, Any]:
    """The stack's policy for the model, by the planner's parameter names (before snapping):
    `kv_floor` and `e2e_base` are what its KV target and latency threshold are drawn relative to."""
    policy, engine = sm.policy, sm.model.engine
    triggers, up, down = policy.triggers, policy.behavior.scale_up, policy.behavior.scale_down
    consolidate = sm.pools[0].consolidate_after_s if sm.pools else 0.0
    kv = triggers.kv_cache.target_per_replica
    return {
        "maxNumSeqs": engine.max_num_seqs,
        "maxNumBatchedTokens": engine.max_num_batched_tokens,
        "gpuMemoryUtilization": engine.gpu_memory_utilization,
        "minReplicas": policy.min_replicas,
        "queueTarget": triggers.queue_depth.target_per_replica,
        "queueWindow": triggers.queue_depth.window_seconds,
        "kvHeadroom": (kv - kv_floor) / (KV_CEILING - kv_floor) if kv_floor < KV_CEILING else 0.0,
        "kvEnabled": triggers.kv_cache.enabled,
        "kvTarget": kv,
        "promptEnabled": triggers.prompt_tokens.enabled,
        "promptTarget": triggers.prompt_tokens.target_per_replica,
        "promptWindow": triggers.prompt_tokens.window_seconds,
        "e2eEnabled": triggers.e2e_latency.enabled,
        "e2eFactor": triggers.e2e_latency.threshold_seconds / e2e_base,
        "ttftEnabled": triggers.ttft.enabled,
        "ttftFactor": triggers.ttft.threshold_seconds / policy.slo.ttft_p95_seconds,
        "scaleUpWindow": up.stabilization_window_seconds,
        "scaleUpPods": up.policies[0].value,
        "scaleUpPeriod": up.policies[0].period_seconds,
        "scaleDownWindow": down.stabilization_window_seconds,
        "scaleDownPods": down.policies[0].value,
        "scaleDownPeriod": down.policies[0].period_seconds,
        "seasonalEnabled": triggers.seasonal.enabled,
        "seasonalTarget": triggers.seasonal.target_per_replica,
        "seasonalLead": triggers.seasonal.lead_seconds,
        "trendEnabled": triggers.trend.enabled,
        "trendTarget": triggers.trend.target_per_replica,
        "trendLead": triggers.trend.lead_seconds,
        "consolidateAfter": min(CONSOLIDATE_AFTER_S, key=lambda k: abs(CONSOLIDATE_AFTER_S[k] - consolidate)),
        "routing": sm.routing,
        "lmcache": sm.model.engine.lmcache or "none",
    }


def committed_point(
    sm: StackModel, space: dict[str, BaseDistribution], kv_floor: float, e2e_base: float
) -> dict[str, Any]:
    """The committed policy as the point of `space` nearest to it (what a study is given first)."""
    values = committed_values(sm, kv_floor, e2e_base)
    return _rounded({name: snap(values[name], distribution) for name, distribution in space.items()})


def reference_values(manifest: Manifest, base: dict[str, Any], kv_floor: float, e2e_base: float) -> dict[str, Any]:
    """A reference ScaledObject's thresholds by the planner's parameter names, over `base` (the
    committed policy's `committed_values`) where the reference has no counterpart.

    Counterparts: minReplicaCount (snapped up to the warm-replica floor); a trigger on vLLM's
    waiting requests (its threshold the queue target; its `avg_over_time` window, else none,
    which snaps to the shortest window), on the KV cache (its threshold the KV target, read as
    the planner's per-replica target whatever its aggregation: the karpenter-article's `avg` and
    local-lab's `max` under AverageValue divide differently than the planner's `sum`), on the
    e2e latency (its threshold over the healthy-traffic bound); the triggers it lacks are off (the
    guardrails stay on when kept); the HPA behavior as the API defaults it: each direction's
    stabilization window, and a `Pods` policy's pods and period (a `Percent` policy's period).
    No counterpart, so the stack's own values stay: maxReplicaCount (the planner's ceiling is the
    pools' budget), pollingInterval and cooldownPeriod (the stack's KEDA settings), `Percent`
    policy values (the planner searches pods per period), the engine flags, routing, LMCache
    and the pools' consolidateAfter."""
    values = dict(base)
    values["minReplicas"] = manifest.min_replicas
    values.update(
        promptEnabled=False,
        ttftEnabled=False,
        kvEnabled=False,
        e2eEnabled=False,
        seasonalEnabled=False,
        trendEnabled=False,
    )
    for trigger in manifest.triggers:
        query = trigger.source
        if not isinstance(query, Query):
            continue
        if query.metric == Vllm.REQUESTS_WAITING:
            values.update(queueTarget=trigger.target, queueWindow=query.window_seconds or 0)
        elif query.metric == Vllm.KV_CACHE_USAGE:
            kv = trigger.target
            headroom = (kv - kv_floor) / (KV_CEILING - kv_floor) if kv_floor < KV_CEILING else 0.0
            values.update(kvEnabled=True, kvTarget=kv, kvHeadroom=headroom)
        elif query.metric == Vllm.E2E_LATENCY:
            values.update(e2eEnabled=True, e2eFactor=trigger.target / e2e_base)
    for direction, rules in (("scaleUp", manifest.behavior.scale_up), ("scaleDown", manifest.behavior.scale_down)):
        values.update(_behavior_values(direction, rules))
    return values


def _behavior_values(direction: str, rules: HpaScalingRules) -> dict[str, Any]:
    out: dict[str, Any] = {f"{direction}Window": rules.stabilization_window_seconds}
    pods = next((p for p in rules.policies if p.type == "Pods"), None)
    if pods is not None:
        out.update({f"{direction}Pods": pods.value, f"{direction}Period": pods.period_seconds})
    elif rules.policies:
        out[f"{direction}Period"] = rules.policies[0].period_seconds
    return out


def reference_point(
    manifest: Manifest, sm: StackModel, space: dict[str, BaseDistribution], kv_floor: float, e2e_base: float
) -> dict[str, Any]:
    """A reference design as the point of `space` nearest to it (a study's seed after the committed policy)."""
    values = reference_values(manifest, committed_values(sm, kv_floor, e2e_base), kv_floor, e2e_base)
    return _rounded({name: snap(values[name], distribution) for name, distribution in space.items()})
