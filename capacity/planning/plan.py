"""The capacity planner: the cheapest GPU type, engine flags and scaling policy of one model that
meet an SLO-attainment target on traffic it was not fitted on.

Optuna's TPE sampler proposes candidates, one study per GPU type the model's pools allow, each with
an even share of the budget; a candidate is that GPU (its engine profile derived from physics with
the candidate's vLLM flags), priced per GPU-hour, and an autoscaling block held to every settings
rule. The search traffic is a list of parts (`capacity.planning.days`): the first days of a
multi-day trace, each one run from a warm fleet, or the first `search_fraction` of a shorter one
(optionally x `margin` the rate); the winner is then replayed on the held-out days (or the rest of
the trace) and on any extra validation trace, and reported per day and side by side.

Optuna is used as designed: the objective (`Objectives.run`) suggests a candidate, runs it day by
day, reports its `penalised_cost` after each day (`trial.report(value, step=day)`) and stops when
the pruner says so (`trial.should_prune()`, successive halving); cost is its value and the target
and the rules are constraints (`trial.set_constraint`). Each study's first trials are its seeds
(`study.enqueue_trial`): the stack's committed policy on the GPU it runs on, then the reference
designs. The studies live in an Optuna storage (a journal file, or an RDB such as SQLite or
PostgreSQL) named after a digest of every input, and `workers` processes each run
`study.optimize` on it (`capacity.planning.studies`); workers on other machines join the same
study with the same inputs. The coordinator picks the winner over every trial in the storage.

What a seed guarantees: every trial's result is a deterministic function of its parameters (the
simulation is seeded by `--seed`, not by the process or machine running it), so a candidate
scores the same whichever worker runs it. With one worker the whole search is reproducible: the
same seed proposes the same candidates in the same order and picks the same winner. With several
workers (local or remote) each samples with its own seed and they share the study's history as
it grows, so which candidates are proposed, and so the winner, depends on the order trials finish:
the search is as good, not the same twice. A resumed search continues from the kept history.
"""

from __future__ import annotations

import functools
import json
import math
import os
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from capacity.engine import EngineProfile, measured
from capacity.engine.hardware import checkpoint, gpus
from capacity.engine.trust import Trust, trust_of
from capacity.planning import journal
from capacity.planning.days import Part
from capacity.planning.evaluator import Candidate, Evaluated
from capacity.planning.guardrails import KV_CEILING, Guardrails, guardrails
from capacity.planning.journal import StorageSpec
from capacity.planning.run import (
    CombinedSummary,
    RunOptions,
    RunSummary,
    combined,
    feasible_requests,
    held_out,
    held_out_parts,
    per_trace,
    run_oracle,
    run_policy,
    run_static,
    slo_targets,
    summarize,
    warmed,
)
from capacity.planning.stack import (
    ConfigEdit,
    ConfigRemove,
    StackModel,
    apply_config_set,
    gpu_type_edits,
    headroom_edits,
    landing,
    model_index,
    pool_families,
    rendered_behavior,
)
from capacity.planning.studies import StudySpec, run_workers
from capacity.runtime import ctrl_c_held
from capacity.sim.scaledobject import Manifest, read_scaled_object
from capacity.workload.traces import Trace, rate_scale
from contract.gpu import GPU_OF_FAMILY
from contract.instances import instance_sizes
from contract.scale_down import MIN_SCALE_DOWN_WINDOW_S, scale_down_problems
from contract.warm_replicas import DEFAULT_MIN_WARM_REPLICAS, warm_replica_problem
from contract.warm_replicas import POLICY as WARM_POLICY

PRICES = Path(__file__).parent / "data" / "aws_gpu_prices.yaml"
SEARCH_FRACTION = 0.7  # the first 70% of each trace's time is searched, the rest held out
COMMITTED = "committed"  # the parameter marking the trial that runs the stack's own policy
RULES_BROKEN = "rulesBroken"  # the committed policy's: which of the planner's rules it breaks
SEED = "seed"  # a seeded trial's attribute: which policy it is ("committed", "reference NAME")
SCALE_DOWN_WINDOWS = (60, 120, 300, 600, 900, 1200)
ENGINE_FLAGS = ("maxNumSeqs", "maxNumBatchedTokens", "gpuMemoryUtilization")  # the vLLM flags searched
# A candidate whose engine profile is at one of these trust levels (capacity/engine/trust.py) is
# simulated, and so ranked, at its pessimistic bound: step times x (1 + its error in BAND_REGIME).
# Extrapolated only: a measured or validated profile's error is a held-out median on its own GPU,
# centred on the measurements, while an extrapolated one has no measurement to be centred on.
PESSIMISTIC_LEVELS = ("extrapolated",)
BAND_REGIME = "saturated"  # the error that bounds it: the regime that sets a replica's capacity
STEP_TIME_SCALE = "stepTimeScale"  # a candidate's parameter overriding the scale it is simulated at
MAX_HEADROOM = 4  # the most warm placeholder nodes a plan draws (gpuCapacity.headroom.placeholders)


@dataclass(frozen=True)
class GpuType:
    family: str
    gpu: str
    # USD per GPU-hour of a replica: the hourly price of the instance size it lands on
    # (`instance_size`) over its GPUs, so a node bills the whole instance (capacity/sim/fleet.py).
    on_demand_usd: float
    spot_usd: float
    instance_size: str
    # How far the engine profile of this GPU is checked (capacity/engine/trust.py): measured,
    # validated on published data, or extrapolated; None when the model has no profile there.
    trust: Trust | None = None


@functools.cache
def listed_prices() -> dict[str, float]:
    """The cited on-demand USD per instance-hour of every size (data/aws_gpu_prices.yaml), read once:
    every candidate the planner deploys is priced from it."""
    return {
        size: float(usd) for size, usd in yaml.safe_load(PRICES.read_text())["on_demand_usd_per_instance_hour"].items()
    }


def gpu_types(sm: StackModel, prices: dict[str, float] | None = None) -> list[GpuType]:
    """The GPU types the model's pools allow, each priced as the instance size a replica lands on
    (`stack.landing`: the smallest size of the family holding the predictor's requests and the
    GPU node's DaemonSets): `prices` (on-demand per GPU-hour) where given, else the stack's own
    prices for a family it prices (`gpuHourlyPriceUsd.families`) or for the model's current GPU
    (they price what its replicas run on now), else the cited on-demand list; a spot price the
    stack does not give is estimated with the stack's spot/on-demand ratio (spot prices vary).
    A family no size of which holds the replica is left out."""
    listed, given = listed_prices(), prices or {}
    on_demand = next((p.price_per_gpu_hour for p in sm.pools if p.capacity_type == "on-demand"), None)
    spot = next((p.price_per_gpu_hour for p in sm.pools if p.capacity_type == "spot"), None)
    ratio = (spot / on_demand) if spot and on_demand else 1.0
    current = current_gpu(sm)
    families = sorted({f for fams in pool_families(sm).values() for f in fams})
    out = []
    for family in families:
        name = GPU_OF_FAMILY.get(family)
        size = landing(sm, family).size if name else None
        if name is None or size is None:
            continue
        own = sm.gpu_prices.families.get(family)
        sp: float | None = None  # estimated from the ratio unless the stack gives it
        if family in given:
            od = float(given[family])
        elif own is not None:
            od, sp = own.on_demand, own.spot
        elif name == current and on_demand:
            od = on_demand
        elif size.name in listed:
            od = float(listed[size.name]) / sm.model.gpus_per_replica
        else:
            raise ValueError(
                f"no price for instance size {size.name} (family {family!r}, where a replica of "
                f"{sm.model.name} lands): pass --price {family}=USD_PER_GPU_HOUR"
            )
        out.append(GpuType(family, name, od, od * ratio if sp is None else sp, size.name, gpu_trust(sm, name)))
    if not out:
        raise ValueError(f"the pools of {sm.model.name} allow no instance family with an engine profile: {families}")
    return out


def priced_where_it_lands(kind: GpuType, deployed: StackModel) -> GpuType:
    """`kind` priced as the size a replica of `deployed` lands on. A candidate's own requests
    (LMCache's pinned host memory counts in the pod's memory) can need a bigger size of the family
    than the stack's replicas, and the node bills the whole instance: the GPU type's price (the
    stack's, `--price`'s or the list's) moves by the listed ratio of the two sizes' prices
    (ValueError, so the candidate is refused with the reason: a size without a listed price)."""
    size = landing(deployed, kind.family).size
    if size is None:
        raise ValueError(f"no {kind.family} size holds a replica of {deployed.model.name} with these requests")
    if size.name == kind.instance_size:
        return kind
    listed = listed_prices()
    missing = [name for name in (size.name, kind.instance_size) if name not in listed]
    if missing:
        raise ValueError(f"no listed price for instance size {missing[0]} ({PRICES.name}), where this candidate lands")
    scale = listed[size.name] / listed[kind.instance_size]
    return replace(
        kind, on_demand_usd=kind.on_demand_usd * scale, spot_usd=kind.spot_usd * scale, instance_size=size.name
    )


def gpu_trust(sm: StackModel, gpu: str) -> Trust | None:
    """The trust level of the profile the model would run with on `gpu` (its own engine flags)."""
    edits = gpu_edits(sm, gpu)
    try:
        profile = apply_config_set(sm, edits).profile if edits else sm.profile
    except ValueError:
        return None  # that GPU's profile would not deploy: the search refuses its candidates anyway
    return trust_of(profile)


def ranking_scale(trust: Trust | None) -> float:
    """The step-time scale a candidate is simulated and ranked at: its profile's pessimistic bound
    when the profile is at a PESSIMISTIC_LEVELS level, else 1 (the nominal figure)."""
    if trust is None or trust.level not in PESSIMISTIC_LEVELS:
        return 1.0
    return round(trust.pessimistic_factor(BAND_REGIME), 4)


def current_gpu(sm: StackModel) -> str:
    """The GPU the model runs on now: its pinned families' GPU, else its profile's (`<gpu>-...`)."""
    if sm.model.instance_families:
        return GPU_OF_FAMILY[sm.model.instance_families[0]]
    return max((g for g in gpus() if sm.profile.name.startswith(f"{g}-")), key=len, default="")


def pool_indices(sm: StackModel) -> list[int]:
    """Positions in `gpuCapacity.pools` of the pools the model runs on."""
    pools = sm.source.settings(sm.raw_autoscaling).gpu_capacity.pools
    return [i for i, pool in enumerate(pools) if pool.name in sm.model.pools]


def _families(sm: StackModel) -> set[str]:
    return {f for fams in pool_families(sm).values() for f in fams}


def policy_min_scale_down_window(sm: StackModel) -> float:
    """The shortest scale-down stabilization window the stack's policy config allows
    (`scale-down-slower-than-scale-up.minScaleDownStabilizationSeconds`)."""
    return float(
        _policy_setting(
            sm, "scale-down-slower-than-scale-up", "minScaleDownStabilizationSeconds", MIN_SCALE_DOWN_WINDOW_S
        )
    )


def policy_min_warm_replicas(sm: StackModel) -> int:
    """The fewest warm replicas the stack's policy config lets an interactive model keep
    (`interactive-models-keep-a-warm-replica.minReplicas`); a batch model may scale to zero."""
    if sm.model.workload == "batch":
        return 0
    return int(_policy_setting(sm, WARM_POLICY, "minReplicas", DEFAULT_MIN_WARM_REPLICAS))


def _policy_setting(sm: StackModel, policy: str, key: str, default: float) -> Any:
    """A policy's property in `policies/config/<stack>.json` beside the stack file, else the
    policy's default (also where the file gives the policy only an enforcement level)."""
    rule = _policy_config(sm.source.path.parent / "policies" / "config" / f"{sm.stack}.json").get(policy)
    value = rule.get(key) if isinstance(rule, dict) else None
    return default if value is None else value


@functools.cache
def _policy_config(path: Path) -> dict[str, Any]:
    """A policy pack config file, read once per process (every candidate consults it)."""
    return json.loads(path.read_text()) if path.is_file() else {}


def policy_problem(sm: StackModel) -> str | None:
    """Why `pulumi preview` with the policy pack would refuse the stack model's ScaledObject as
    rendered, if it would (scale-down-slower-than-scale-up, `contract.scale_down`;
    interactive-models-keep-a-warm-replica, `contract.warm_replicas`)."""
    problems = []
    down = scale_down_problems(*rendered_behavior(sm), policy_min_scale_down_window(sm))
    if down:
        problems.append(f"policy scale-down-slower-than-scale-up: {'; '.join(down)}")
    warm = warm_replica_problem("minReplicas", sm.policy.min_replicas, policy_min_warm_replicas(sm))
    if warm:
        problems.append(f"policy {WARM_POLICY}: {warm}")
    return "; ".join(problems) or None


def sharing_models(sm: StackModel) -> list[str]:
    """The stack's other models that run on any of this model's pools."""
    settings = sm.source.settings(sm.raw_autoscaling)
    return sorted(m.name for m in settings.models if m.name != sm.model.name and set(m.pools) & set(sm.model.pools))


def deployment_notes(sm: StackModel, p: Mapping[str, Any]) -> list[str]:
    """What the winner's commands change beyond this model, and what its profile rests on."""
    notes = []
    sharing = sharing_models(sm)
    if sharing and p["consolidateAfter"] is not None:
        notes.append(
            f"consolidateAfter {p['consolidateAfter']} is set on the pools {', '.join(sm.model.pools)}, "
            f"which {', '.join(sharing)} also run on: plan them after it (without --search-pools)"
        )
    if p["gpu"] != current_gpu(sm):
        trust = gpu_trust(sm, p["gpu"])
        level = trust.level if trust else "unknown"
        warning = "warning: " if level != "validated" else ""
        rests = f" ({trust.basis})" if trust else ""
        bound = ranking_scale(trust)
        ranked = f"; it was ranked by its pessimistic bound (step times x{bound:g})" if bound != 1 else ""
        notes.append(
            f"{warning}the winner moves {sm.model.name} from {current_gpu(sm) or 'its profile'} to {p['gpu']}, "
            f"whose engine profile is {level}{rests}, not measured on this replica{ranked}; run `python -m "
            f"capacity sweep` against one {p['gpu']} replica before moving production"
        )
    # The size the winner's own requests land on: its LMCache tier's host memory may need a bigger one.
    cache = lmcache_edits(sm, p)
    notes.append(landing_note(apply_config_set(sm, cache) if cache else sm, family_of(sm, p["gpu"])))
    stale = stack_price_note(sm)
    if stale and p["gpu"] == current_gpu(sm):
        notes.append(stale)
    return notes


def stack_price_note(sm: StackModel) -> str | None:
    """When the stack's own on-demand price (what the current GPU type is priced at) is not the
    cited price of the size its replicas land on: a discount, or a price of the wrong size."""
    on_demand = next((p.price_per_gpu_hour for p in sm.pools if p.capacity_type == "on-demand"), None)
    if on_demand is None or not current_gpu(sm):
        return None
    size = landing(sm, family_of(sm, current_gpu(sm))).size
    listed = listed_prices()
    if size is None or size.name not in listed:
        return None
    cited = float(listed[size.name]) / sm.model.gpus_per_replica
    if math.isclose(on_demand, cited, rel_tol=1e-3):
        return None
    return (
        f"capacityPlanning.gpuHourlyPriceUsd.{price_key(sm)}onDemand ({on_demand}) is not the cited ${cited:.4f} per GPU-hour "
        f"of {size.name}, where replicas of {sm.model.name} land ({PRICES.name}); the plan used the stack's"
    )


def price_key(sm: StackModel) -> str:
    """Where under gpuHourlyPriceUsd the model's own price sits: `families.<family>.` or the top."""
    pinned = sm.model.instance_families
    return f"families.{pinned[0]}." if pinned and pinned[0] in sm.gpu_prices.families else ""


def family_of(sm: StackModel, gpu: str) -> str:
    """The instance family that runs `gpu` for the model: its pinned one, else the first its pools allow."""
    pinned = [f for f in sm.model.instance_families or [] if GPU_OF_FAMILY.get(f) == gpu]
    return pinned[0] if pinned else next(f for f, g in GPU_OF_FAMILY.items() if g == gpu and f in _families(sm))


def landing_note(sm: StackModel, family: str) -> str:
    """Which instance size a replica lands on, and why not a smaller one: what the plan priced."""
    land = landing(sm, family)
    if land.size is None:
        return f"no {family} size holds a replica of {sm.model.name}"
    need = land.pod + land.overhead
    sizes = instance_sizes(family)
    smaller = sizes[: sizes.index(land.size)]
    why = (
        f"; the smaller {smaller[-1].name} allocates {smaller[-1].allocatable_cpu_milli}m / "
        f"{smaller[-1].allocatable_memory_mib}Mi / {smaller[-1].gpus} GPU"
        if smaller
        else ""
    )
    return (
        f"each replica of {sm.model.name} lands on {land.size.name} and is priced as one: it requests "
        f"{land.pod.cpu_milli}m CPU / {land.pod.memory_mib}Mi / {land.pod.gpus} GPU, the GPU node's DaemonSets "
        f"{land.overhead.cpu_milli}m / {land.overhead.memory_mib}Mi, together {need.cpu_milli}m / "
        f"{need.memory_mib}Mi{why} (Karpenter v1.14.1's instance-type reference, contract/instances.py)"
    )


# --- one candidate -------------------------------------------------------------------------


def gpu_edits(sm: StackModel, gpu: str) -> list[ConfigEdit]:
    """The edits that run the model on `gpu` with that GPU's physics profile (a pin to one of its
    families when it moves; the stack then derives the profile with the model's own engine
    flags, from_stack.with_engine_flags); none when it already runs so, or when it stays on the
    GPU of a measured profile (`profile --from-sweep`: a sweep of this replica beats its physics)."""
    profile = f"{gpu}-{checkpoint(sm.model.hugging_face_id).short}"
    if gpu == current_gpu(sm) and measured.find(sm.profile.name) is not None:
        return []
    if gpu != current_gpu(sm):
        family = next(f for f, g in GPU_OF_FAMILY.items() if g == gpu and f in _families(sm))
        return gpu_type_edits(sm, family, profile)
    if sm.model.capacity_profile != profile:
        return [(f"models[{model_index(sm)}].capacityProfile", profile)]
    return []


def lmcache_edits(sm: StackModel, p: Mapping[str, Any]) -> list[ConfigEdit]:
    """The edits setting candidate `p`'s LMCache tier (none unless searched: the image ships LMCache)."""
    if "lmcache" not in p:
        return []
    if p["lmcache"] != "none":
        return [(f"models[{model_index(sm)}].engine.lmcache", p["lmcache"])]
    return [ConfigRemove(f"models[{model_index(sm)}].engine.lmcache")] if sm.model.engine.lmcache else []


def edits_of(sm: StackModel, p: Mapping[str, Any]) -> list[ConfigEdit]:
    """The `pulumi config set --path` edits (key, value) that deploy candidate `p` (and the
    `pulumi config rm --path` a GPU-type change may need), in the order they must run."""
    scope = f"autoscaling.{sm.model.name}"
    index = model_index(sm)
    edits = gpu_edits(sm, p["gpu"])
    edits += [(f"models[{index}].engine.{k}", p[k]) for k in ENGINE_FLAGS]
    if "routing" in p:  # searched: the traces know their prefixes
        edits.append((f"models[{index}].serving.routing", p["routing"]))
    edits += lmcache_edits(sm, p)
    # Karpenter's consolidateAfter: how long an emptied node stays billed (and reusable, image cached).
    if p["consolidateAfter"] is not None:
        edits += [(f"gpuCapacity.pools[{i}].consolidateAfter", p["consolidateAfter"]) for i in pool_indices(sm)]
    if "headroom" in p:  # searched: warm placeholder nodes shaped like this model's replica
        edits += headroom_edits(sm, p["headroom"])
    edits += [(f"{scope}.minReplicas", p["minReplicas"]), (f"{scope}.maxReplicas", p["maxReplicas"])]
    edits.append((f"{scope}.fallbackReplicas", min(max(p["minReplicas"], 1), p["maxReplicas"])))
    edits += [
        (f"{scope}.triggers.queueDepth.targetPerReplica", p["queueTarget"]),
        (f"{scope}.triggers.queueDepth.windowSeconds", p["queueWindow"]),
        (f"{scope}.triggers.kvCache.enabled", p["kvEnabled"]),
        (f"{scope}.triggers.promptTokens.enabled", p["promptEnabled"]),
        (f"{scope}.triggers.e2eLatency.enabled", p["e2eEnabled"]),
        (f"{scope}.triggers.ttft.enabled", p["ttftEnabled"]),
    ]
    if p["kvEnabled"]:
        edits.append((f"{scope}.triggers.kvCache.targetPerReplica", p["kvTarget"]))
    if p["promptEnabled"]:
        edits.append((f"{scope}.triggers.promptTokens.targetPerReplica", p["promptTarget"]))
        edits.append((f"{scope}.triggers.promptTokens.windowSeconds", p["promptWindow"]))
    if p["e2eEnabled"]:
        edits.append((f"{scope}.triggers.e2eLatency.thresholdSeconds", p["e2eThreshold"]))
    if p["ttftEnabled"]:
        edits.append(
            (f"{scope}.triggers.ttft.thresholdSeconds", round(sm.policy.slo.ttft_p95_seconds * p["ttftFactor"], 2))
        )
    edits += forecast_edits(scope, p)
    for direction in ("scaleUp", "scaleDown"):
        base = f"{scope}.behavior.{direction}"
        edits += [
            (f"{base}.stabilizationWindowSeconds", p[f"{direction}Window"]),
            (f"{base}.policies[0].type", "Pods"),
            (f"{base}.policies[0].value", p[f"{direction}Pods"]),
            (f"{base}.policies[0].periodSeconds", p[f"{direction}Period"]),
        ]
    return edits


def forecast_edits(scope: str, p: Mapping[str, Any]) -> list[ConfigEdit]:
    """The forecast triggers' edits when they were searched (the traffic has days to look back on)."""
    edits: list[ConfigEdit] = []
    for trigger in ("seasonal", "trend"):
        if f"{trigger}Enabled" not in p:
            continue
        edits.append((f"{scope}.triggers.{trigger}.enabled", p[f"{trigger}Enabled"]))
        if p[f"{trigger}Enabled"]:
            edits.append((f"{scope}.triggers.{trigger}.targetPerReplica", p[f"{trigger}Target"]))
            edits.append((f"{scope}.triggers.{trigger}.leadSeconds", p[f"{trigger}Lead"]))
    return edits


def lmcache_deploys(sm: StackModel) -> bool:
    """Would the stack's settings take an LMCache tier for the model (its image ships LMCache:
    settings refuse `engine.lmcache` on the stock vLLM image)?"""
    try:
        apply_config_set(sm, [(f"models[{model_index(sm)}].engine.lmcache", "8Gi")])
    except ValueError:
        return False
    return True


def candidate_of(sm: StackModel, p: dict[str, Any]) -> Candidate:
    """The planner's parameters `p` as a candidate: the edits that deploy them, and `p` itself.
    The committed policy's point deploys the stack as it is (on its GPU's physics profile, as
    every candidate of that GPU type runs), not the nearest point of the space."""
    if p.get(COMMITTED):
        return Candidate(tuple(gpu_edits(sm, p["gpu"])), p)
    return Candidate(tuple(edits_of(sm, p)), p)


def deploy(sm: StackModel, candidate: Candidate, types: dict[str, GpuType]) -> StackModel:
    """The stack model deploying `candidate`: validated settings and policies, its profile (step
    times at the candidate's `STEP_TIME_SCALE`, else at `ranking_scale` of its trust), its GPU
    type's prices on the pools (ValueError: why it would not deploy)."""
    deployed = apply_config_set(sm, candidate.edits)
    refused = policy_problem(deployed)
    if refused:
        raise ValueError(refused)
    kind = priced_where_it_lands(types[candidate.params["gpu"]], deployed)
    pools = tuple(
        replace(pool, price_per_gpu_hour=kind.spot_usd if pool.capacity_type == "spot" else kind.on_demand_usd)
        for pool in deployed.pools
    )
    # The stack re-derives the physics profile of `p`'s GPU with `p`'s flags as it loads; the
    # scale goes into that profile's step cost, which every simulated engine step reads.
    scale = candidate.params.get(STEP_TIME_SCALE) or ranking_scale(trust_of(deployed.profile))
    return replace(deployed, pools=pools, profile=deployed.profile.with_step_time_scale(scale))


def on_gpu(sm: StackModel, kind: GpuType) -> StackModel:
    """The stack model with its own engine flags on GPU type `kind`, as a candidate of that type
    runs it (its physics profile)."""
    edits = gpu_edits(sm, kind.gpu)
    return apply_config_set(sm, edits) if edits else sm


def servable(sm: StackModel, trace: Trace, types: dict[str, GpuType]) -> np.ndarray:
    """Per request: some GPU type of the search, with the stack's engine flags, serves it within
    the SLO alone on a warm replica. Every candidate's attainment is over these same requests, so
    none scores better by making hard requests unservable (a slower GPU, a smaller KV cache): it
    misses them instead. Remembered per trace."""

    def union() -> np.ndarray:
        mask = np.zeros(len(trace), dtype=bool)
        for kind in types.values():
            try:
                mask |= feasible_requests(on_gpu(sm, kind), trace)
            except ValueError:  # the stack's flags do not deploy on that GPU: its candidates are refused too
                continue
        return mask

    return per_trace(trace, ("servable", sm.profile, tuple(types), slo_targets(sm)), union)


@dataclass(frozen=True)
class PlanJob:
    """A candidate deployed with its GPU type's prices, run over every searched part (each day,
    or each trace's searched time, from the fleet the oracle needs for its first interval) and
    scored over the requests some GPU type of the search serves (`servable`)."""

    sm: StackModel
    parts: tuple[Part, ...]
    options: RunOptions
    types: dict[str, GpuType]

    def deploy(self, candidate: Candidate) -> StackModel:
        return deploy(self.sm, candidate, self.types)

    def runs(self, deployed: StackModel) -> Iterator[RunSummary]:
        """The deployed candidate's run on each part, in order, one at a time (so a pruner can
        stop it between days)."""
        for part in self.parts:
            trace = part.trace
            run = run_policy(deployed, trace, warmed(deployed, trace, self.options))
            yield summarize(run, deployed, servable(self.sm, trace, self.types))

    def combine(self, deployed: StackModel, runs: Sequence[RunSummary]) -> CombinedSummary:
        """The runs of the first `len(runs)` parts scored together."""
        parts = self.parts[: len(runs)]
        tokens = float(sum(p.trace.output_tokens.sum() for p in parts))
        return combined(runs, tokens, deployed.profile.step_time_scale, [p.label for p in parts])

    def score(self, deployed: StackModel) -> CombinedSummary:
        return self.combine(deployed, list(self.runs(deployed)))


# --- the search ----------------------------------------------------------------------------


def violations(result: Evaluated[CombinedSummary], target: float) -> dict[str, float]:
    """The search's constraints as Optuna reads them (a candidate is feasible when every value is
    <= 0): it deploys, its attainment on the search traffic reaches the target (a refused
    candidate attains nothing), and it keeps the planner's rules (`guardrails`; only the
    committed policy, which the search did not draw, can break them)."""
    rules = float(len(result.params.get(RULES_BROKEN, ())))
    if result.summary is None:
        return {"deploys": 1.0, "attainment": target, "rules": rules}
    return {"deploys": 0.0, "attainment": round(target - result.summary.slo_attainment, 6), "rules": rules}


def meets(result: Evaluated[CombinedSummary], target: float) -> bool:
    return all(value <= 0 for value in violations(result, target).values())


def ceiling_usd_per_hour(deployed: StackModel) -> float:
    """What the pools' whole ceiling fleet costs an hour: every replica their GPU limits hold, at
    each pool's price. The simulator never places a node beyond a pool's limit, so no run of the
    candidate costs more an hour than this."""
    g = deployed.model.gpus_per_replica
    return sum((pool.gpu_limit // g) * g * pool.price_per_gpu_hour for pool in deployed.pools)


def penalised_cost(runs: Sequence[RunSummary], target: float, ceiling_usd_per_hour: float) -> float:
    """The one value per day Optuna's pruner compares: the candidate's cost over the days run so
    far, and, when its worst day so far misses the target, that cost plus the pools' ceiling fleet
    over those days (`ceiling`) plus the shortfall priced at the ceiling per whole error budget:
    value = cost + ceiling x (1 + (target - worst) / (1 - target)).
    Why this shape: a pruner ranks one number, while the search minimises cost under an attainment
    constraint. No run costs more than the ceiling fleet, so a candidate meeting the target so far
    (value <= ceiling) always ranks before one missing it (value > ceiling), whatever their costs;
    among the misses, a miss of the whole error budget (1 - target) costs one ceiling fleet more,
    so a candidate nearer the target ranks better. The worst day, not the mean, because the
    constraint is on the worst part (`combined`): once a day misses, the candidate cannot meet it."""
    cost = sum(r.cost_usd for r in runs)
    worst = min(r.slo_attainment for r in runs)
    if worst >= target:
        return cost
    ceiling = ceiling_usd_per_hour * sum(r.simulated_s for r in runs) / 3600
    return cost + ceiling * (1 + (target - worst) / max(1 - target, 1e-6))


def pruner() -> Any:
    """Optuna's SuccessiveHalvingPruner (asynchronous successive halving), one rung per day.
    Optuna 5.0's docs (optuna.pruners.SuccessiveHalvingPruner): a trial is never pruned before
    `min_resource x reduction_factor ** min_early_stopping_rate` steps (here 1: its first day); at
    each rung's step (1, 2, 4, ... days) it goes on only if its value at that step is in the top
    1/reduction_factor of every trial that reached the step, so it compares the same day's value,
    which suits a cost that adds up day by day (MedianPruner compares a trial's best value over its
    steps, the first day's for a growing cost, so a candidate that misses on a later day would
    never be stopped there). It has no startup trials: `bootstrap_count` 0 lets the first trial at
    a rung through, and the study's first trials are its seeds. `min_resource` is set (one day)
    rather than 'auto', which waits for a trial to complete. Halving (2) rather than the default
    quarter keeps half the candidates at each rung: days differ more than training epochs do."""
    import optuna

    return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=2, min_early_stopping_rate=0)


Trial = Evaluated[CombinedSummary]  # one evaluated candidate of the search


@dataclass(frozen=True)
class Objectives:
    """Each GPU type's objective, as every worker process runs it (`studies.optimize`)."""

    job: PlanJob
    points: Points
    target: float

    def objective(self, gpu: str) -> Callable[[Any], float]:
        return functools.partial(self.run, gpu)

    def pruner(self) -> Any:
        return pruner()

    def run(self, gpu: str, trial: Any) -> float:
        """Optuna's objective: the trial's candidate run day by day, each day's `penalised_cost`
        reported (`trial.report(value, step=days run)`) and the trial pruned when the pruner says
        so (`trial.should_prune()` -> `optuna.TrialPruned`); its cost returned, its constraints
        set (`violations`), the candidate and its result kept on the trial (`journal.record`).
        The committed policy is never pruned: the plan reports it whole beside the winner (its
        values still enter the pruner's rungs)."""
        import optuna

        p = journal.plain(self.points.of(trial, gpu))
        candidate = candidate_of(self.job.sm, p)
        trial.set_user_attr(journal.WORKER, f"{socket.gethostname()}/{os.getpid()}")
        try:
            deployed = self.job.deploy(candidate)
        except ValueError as refusal:
            return _told(trial, Evaluated(candidate, None, str(refusal)), self.target)
        ceiling = ceiling_usd_per_hour(deployed)
        runs: list[RunSummary] = []
        for run in self.job.runs(deployed):
            runs.append(run)
            trial.report(penalised_cost(runs, self.target, ceiling), step=len(runs))
            if len(runs) < len(self.job.parts) and trial.should_prune() and not p.get(COMMITTED):
                partial = Evaluated(candidate, self.job.combine(deployed, runs))
                for name, value in violations(partial, self.target).items():
                    trial.set_constraint(name, value)  # what is known: a missed day never un-misses
                trial.set_user_attr(journal.CANDIDATE, p)
                trial.set_user_attr(journal.PRUNED_AFTER, len(runs))
                raise optuna.TrialPruned(f"stopped after {len(runs)} of {len(self.job.parts)} days")
        return _told(trial, Evaluated(candidate, self.job.combine(deployed, runs)), self.target)


def _told(trial: Any, result: Trial, target: float) -> float:
    """Keep the candidate and its result on the trial and set its constraints; its cost is the
    objective (infinite for a candidate that never ran)."""
    journal.record(trial, result)
    for name, value in violations(result, target).items():
        trial.set_constraint(name, value)
    return result.summary.cost_usd if result.summary else math.inf


@dataclass(frozen=True)
class PlanResult:
    trials: list[Trial]  # evaluated to the end (or refused), in trial order, study by study
    best: Trial | None  # cheapest meeting the target in search, else the closest
    committed: Trial | None  # the stack's own policy on its GPU type (None: that type was not searched)
    target: float
    types: dict[str, GpuType]
    rules: Guardrails
    resumed: int = 0  # finished trials the storage held before this run (not evaluated again)
    pruned: int = 0  # trials the pruner stopped before their last day
    studies: tuple[str, ...] = ()  # the studies' names in the storage, one per GPU type


def seeds(
    sm: StackModel, points: Points, gpu: str, seed_policies: Sequence[tuple[str, StackModel]] = ()
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """A study's first trials, (point, user attributes): on the GPU type the model runs on, the
    committed policy first; then, on every type, each of the operator's seed policies
    (`seed_policies`: a name and the stack model running it, `plan --seed-policy`) and each
    reference design (`REFERENCE_DESIGNS`) as the nearest point of the space. A reference that
    cannot be read is left out: it is the search's starting point, not its subject."""
    from capacity.planning.space import REFERENCE_DESIGNS

    out = [(points.committed(gpu), {COMMITTED: True, SEED: "committed"})] if gpu == current_gpu(sm) else []
    out += [(points.committed(gpu, seeded), {SEED: f"seed policy {name}"}) for name, seeded in seed_policies]
    for path in sorted(REFERENCE_DESIGNS.glob("*.yaml")):
        try:
            manifest = read_scaled_object(path)
        except ValueError:
            continue
        out.append((points.reference(gpu, manifest), {SEED: f"reference {manifest.name}"}))
    return out


def search(
    sm: StackModel,
    parts: Sequence[Part],
    target: float,
    trials: int,
    seed: int,
    workers: int,
    options: RunOptions,
    prices: dict[str, float] | None = None,
    progress: Callable[[int], None] | None = None,
    only: Sequence[str] = (),
    search_pools: bool | None = None,
    storage: StorageSpec | None = None,
    keep_guardrails: bool = True,
    search_routing: bool = False,
    search_lmcache: bool = False,
    join: bool = False,
    ready: Callable[[str], None] | None = None,
    seed_policies: Sequence[tuple[str, StackModel]] = (),
) -> PlanResult:
    """`parts`: the searched days (or time-split parts), each one step of a trial.
    `only`: search just these GPU types (names as `gpu_types` gives them); empty: all.
    `search_pools`: search the pools' consolidateAfter too; None: only when no other model of
    the stack runs on them (a shared pool's value is planned once, with one of its models).
    `storage`: where the studies live (a journal file or an RDB URL), named after a digest of
    every input (`journal.run_key`), so a rerun with the same inputs resumes and workers elsewhere
    join; None: a temporary journal, gone after the search. `workers`: processes each running
    `study.optimize` on the shared storage. `join`: run trials in studies a coordinator created
    (ValueError when there are none for these inputs) and return without a winner. `ready(where)`:
    called once the studies exist in `storage` (from then on workers elsewhere can join).
    `keep_guardrails`: every candidate keeps the guardrail triggers on above healthy traffic
    (`capacity.planning.guardrails`); False lets them be drawn off, as before they were kept.
    `search_routing`: draw `serving.routing` (least-request or the endpoint picker) too;
    `search_lmcache`: draw `engine.lmcache` (LMCache's CPU tier) too. `seed_policies`: the
    operator's policies (a name and the stack model running each) a new study tries first, after
    the committed one (`seeds`)."""
    if search_pools is None:
        search_pools = not sharing_models(sm)
    import optuna  # imported when a search runs: it takes a third of a second

    from capacity.planning.space import distributions, with_fixed_engine_flags

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    types = {t.gpu: t for t in gpu_types(sm, prices)}
    unknown = sorted(set(only) - set(types))
    if unknown:
        raise ValueError(f"--gpu {', '.join(unknown)}: the pools of {sm.model.name} allow only {', '.join(types)}")
    if only:
        types = {name: kind for name, kind in types.items() if name in only}
    # One TPE study per GPU type with an even share of the budget: a single study settles on a
    # type early and leaves the others barely tried, and "which GPU" would compare unequals.
    # Windows the stack's policy pack allows (the rest would be refused at `pulumi preview`).
    down_windows = [w for w in SCALE_DOWN_WINDOWS if w >= policy_min_scale_down_window(sm)] or [max(SCALE_DOWN_WINDOWS)]
    shares = [trials // len(types) + (i < trials % len(types)) for i in range(len(types))]
    traces = [part.trace for part in parts]
    rules = guardrails(sm, traces, keep_guardrails)
    min_warm = policy_min_warm_replicas(sm)  # fewer would be refused at `pulumi preview` too
    # The forecasts read the traffic before a part: searched when some part has a history (a day after the first).
    forecasts = any(part.trace.history is not None for part in parts)
    # Warm headroom: up to a quarter of the model's ceiling, at most MAX_HEADROOM placeholder nodes.
    headroom = min(MAX_HEADROOM, rules.max_replicas // 4)
    space = distributions(
        rules.max_replicas,
        search_pools,
        down_windows,
        keep_guardrails,
        search_routing,
        search_lmcache,
        min_warm,
        forecasts,
        headroom,
    )
    swept = measured.find(sm.profile.name)  # kept on its GPU (gpu_edits), with the flags it was swept at
    spaces = {
        name: with_fixed_engine_flags(space, swept.flags) if swept and name == current_gpu(sm) else space
        for name in types
    }
    points = Points(sm, rules, spaces)
    first_trials = {name: seeds(sm, points, name, seed_policies) for name in types}
    key = journal.run_key(
        sm,
        traces,
        target,
        seed,
        options,
        types,
        search_pools,
        down_windows,
        keep_guardrails,
        min_warm,
        seeded=[point for name in types for point, _ in first_trials[name]],
    )
    studies = [
        StudySpec(f"plan-{key}-{name}", name, share, None if join else seed + i)
        for i, (name, share) in enumerate(zip(types, shares))
    ]
    objectives = Objectives(PlanJob(sm, tuple(parts), options, types), points, target)
    with tempfile.TemporaryDirectory(prefix="plan-") as scratch:
        spec = storage or StorageSpec(journal=Path(scratch) / "plan.journal")
        opened = spec.open()
        with ctrl_c_held():  # never cut a storage write in half (Optuna's file lock is not interrupt-safe)
            resumed = _join(opened, studies, spec) if join else _create(opened, studies, spec, first_trials)
        journal.release(opened)
        if ready and storage:
            ready(spec.flag)
        # A joining machine's workers sample unseeded (`StudySpec.seed` None), as any but worker 0.
        run_workers(spec, studies, objectives, workers, progress, first_worker=1 if join else 0)
        if join:
            return PlanResult([], None, None, target, types, rules, resumed, studies=tuple(s.name for s in studies))
        return _result(spec.open(), studies, sm, target, types, rules, resumed)


def _create(
    opened: Any,
    studies: Sequence[StudySpec],
    spec: StorageSpec,
    first_trials: Mapping[str, Sequence[tuple[dict[str, Any], dict[str, Any]]]],
) -> int:
    """Create (or load) each study, seed a new one with its GPU type's `first_trials` (`seeds`),
    fail what an interrupted run of this machine left running; the finished trials the storage
    already held."""
    import optuna

    resumed = 0
    for s in studies:
        study = optuna.create_study(direction="minimize", storage=opened, study_name=s.name, load_if_exists=True)
        if not study.get_trials(deepcopy=False):  # new: its first trials are the seeds
            for point, attrs in first_trials[s.gpu]:
                study.enqueue_trial(point, user_attrs=attrs)
        elif not spec.shared_by_machines:
            journal.fail_interrupted(study)
        resumed += journal.finished(study)
    return resumed


def _join(opened: Any, studies: Sequence[StudySpec], spec: StorageSpec) -> int:
    import optuna

    resumed = 0
    for s in studies:
        try:
            resumed += journal.finished(optuna.load_study(study_name=s.name, storage=opened))
        except KeyError:
            raise ValueError(
                f"--join: {spec.flag} holds no study for these inputs ({s.name}): start the coordinator "
                "first (the same command without --join), with the same arguments and tool version"
            ) from None
    return resumed


def _result(
    opened: Any,
    studies: Sequence[StudySpec],
    sm: StackModel,
    target: float,
    types: dict[str, GpuType],
    rules: Guardrails,
    resumed: int,
) -> PlanResult:
    """Every finished trial in the storage (this machine's and any other's), and the winner among them."""
    import optuna

    rebuild = functools.partial(candidate_of, sm)
    done: list[Trial] = []
    pruned = 0
    for s in studies:
        study = optuna.load_study(study_name=s.name, storage=opened)
        done += journal.evaluated(study, rebuild)
        pruned += journal.pruned(study)
    committed = next((t for t in done if t.params.get(COMMITTED)), None)
    names = tuple(s.name for s in studies)
    return PlanResult(done, winner(done, target), committed, target, types, rules, resumed, pruned, names)


class Points:
    """The planner's parameters of a trial: the values its study drew, then those the rules set
    (maxReplicas; with the guardrails kept, both on and the KV target from its headroom over what
    a full replica of the candidate's engine flags holds), and the e2e threshold in seconds."""

    def __init__(self, sm: StackModel, rules: Guardrails, spaces: dict[str, dict[str, Any]]) -> None:
        self.sm, self.rules, self.spaces = sm, rules, spaces  # each GPU type's search space
        self._profiles: dict[tuple[Any, ...], EngineProfile | None] = {}

    def of(self, trial: Any, gpu: str) -> dict[str, Any]:
        from capacity.planning.space import suggest

        p = {"gpu": gpu, **suggest(trial, self.spaces[gpu])}
        p.setdefault("consolidateAfter", None)  # not searched: the pools keep their own value
        # The placeholders hold GPUs of the same pools: the model's ceiling gives them up.
        p["maxReplicas"] = self.rules.max_replicas - p.get("headroom", 0)
        if self.rules.kept:
            profile = self._profile(gpu, p)
            p["kvEnabled"], p["e2eEnabled"] = True, True
            p["kvTarget"] = self.rules.kv_target(profile, p["kvHeadroom"]) if profile else KV_CEILING
        p["e2eThreshold"] = round(self._e2e_base() * p["e2eFactor"], 1)
        if trial.user_attrs.get(COMMITTED):
            p.update(self._as_committed(gpu))
        return p

    def committed(self, gpu: str, policy: StackModel | None = None) -> dict[str, Any]:
        """The committed policy (or `policy`: the stack model running another one) as the nearest
        point of the space: the study's first trials."""
        from capacity.planning.space import committed_point

        space = self.spaces[gpu]
        kv_floor = self.rules.kv_floor(self._committed_profile(gpu))
        return committed_point(policy or self.sm, space, kv_floor, self._e2e_base())

    def reference(self, gpu: str, manifest: Manifest) -> dict[str, Any]:
        """A reference design as the nearest point of the space (`space.reference_values`)."""
        from capacity.planning.space import reference_point

        profile = self._committed_profile(gpu)
        return reference_point(manifest, self.sm, self.spaces[gpu], self.rules.kv_floor(profile), self._e2e_base())

    def _as_committed(self, gpu: str) -> dict[str, Any]:
        """What the committed trial reports as it is, not as its nearest point."""
        policy = self.sm.policy
        return {
            COMMITTED: True,
            "maxReplicas": policy.max_replicas,
            RULES_BROKEN: self.rules.breaks(policy, self._committed_profile(gpu)),
        }

    def _e2e_base(self) -> float:
        """The seconds e2eFactor scales: the healthy-traffic bound, or (guardrails droppable, as the
        search did before it kept them) the e2e target, else the stack's own threshold."""
        if self.rules.kept:
            return self.rules.e2e_bound_s
        return self.sm.policy.slo.e2e_p99_seconds or self.sm.policy.triggers.e2e_latency.threshold_seconds

    def _committed_profile(self, gpu: str) -> EngineProfile:
        edits = gpu_edits(self.sm, gpu)
        return apply_config_set(self.sm, edits).profile if edits else self.sm.profile

    def _profile(self, gpu: str, p: dict[str, Any]) -> EngineProfile | None:
        """The engine profile of `p`'s GPU and flags (None: they would not deploy), once each."""
        flags = tuple(p[k] for k in ENGINE_FLAGS)
        if (gpu, *flags) not in self._profiles:
            index = model_index(self.sm)
            edits = gpu_edits(self.sm, gpu) + [(f"models[{index}].engine.{k}", p[k]) for k in ENGINE_FLAGS]
            try:
                self._profiles[gpu, *flags] = apply_config_set(self.sm, edits).profile
            except ValueError:
                self._profiles[gpu, *flags] = None
        return self._profiles[gpu, *flags]


def winner(trials: Sequence[Trial], target: float) -> Trial | None:
    """The cheapest candidate meeting every constraint (of equal cost, the one attaining the most,
    then the first found), else the one attaining the most. Every drawn candidate has the same
    maxReplicas, the pools' budget."""
    feasible = [t for t in trials if meets(t, target)]
    if feasible:
        return min(feasible, key=lambda t: (t.summary.cost_usd, -t.summary.slo_attainment))  # type: ignore[union-attr]  # only candidates that ran
    ran = [t for t in trials if t.summary is not None]
    return max(ran, key=lambda t: (t.summary.slo_attainment, -t.summary.cost_usd), default=None)  # type: ignore[union-attr]  # only candidates that ran


def frontier(trials: Sequence[Trial]) -> list[Trial]:
    """The Pareto frontier of cost against attainment over the candidates that ran, cheapest
    first: the best trials of a two-objective Optuna view of them (minimize cost, maximize
    attainment), one per point (the first found). The search itself is one objective, cost, under
    constraints: a two-objective search would spend its budget along the whole front, down to the
    cheap policies far below the target that are never deployed."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    ran = [t for t in trials if t.summary is not None]
    view = optuna.create_study(directions=["minimize", "maximize"])
    view.add_trials(
        [
            optuna.trial.create_trial(
                values=[t.summary.cost_usd, t.summary.slo_attainment],  # type: ignore[union-attr]  # only candidates that ran
                user_attrs={"index": i},
            )
            for i, t in enumerate(ran)
        ]
    )
    points: dict[tuple[float, ...], Trial] = {}
    for best in sorted(view.best_trials, key=lambda b: b.user_attrs["index"]):
        points.setdefault(tuple(best.values), ran[best.user_attrs["index"]])
    return sorted(points.values(), key=lambda t: (t.summary.cost_usd, -t.summary.slo_attainment))  # type: ignore[union-attr]  # only candidates that ran


@dataclass(frozen=True)
class GpuTypeRow:
    """Which GPU: one type's prices, how many candidates ran on it, and its pick (None: none ran)."""

    kind: GpuType
    trials: int
    meets_target: bool
    pick: CombinedSummary | None

    def as_dict(self) -> dict[str, Any]:
        kind, pick = self.kind, self.pick
        picked = (
            {
                "slo_attainment": pick.slo_attainment,
                "gpu_hours": pick.gpu_hours,
                "cost_usd": pick.cost_usd,
                "usd_per_million_output_tokens": pick.usd_per_million_output_tokens,
            }
            if pick
            else {}
        )
        return {
            "gpu": kind.gpu,
            "family": kind.family,
            "instance_size": kind.instance_size,
            "trust": kind.trust.level if kind.trust else None,
            "trust_saturated_error": kind.trust.saturated_error if kind.trust else None,
            "trust_basis": kind.trust.basis if kind.trust else None,
            # The figure that ranked its candidates: step times x this (1: nominal; above: the
            # pessimistic bound of an extrapolated profile, `ranking_scale`).
            "ranked_step_time_scale": pick.step_time_scale if pick else ranking_scale(kind.trust),
            "on_demand_usd_per_gpu_hour": kind.on_demand_usd,
            "spot_usd_per_gpu_hour": round(kind.spot_usd, 4),
            "trials": self.trials,
            "meets_target": self.meets_target,
            **picked,
        }


def per_gpu_type(result: PlanResult) -> list[GpuTypeRow]:
    """Which GPU: each type's winner by the search's own rule (`winner`: the cheapest candidate
    meeting every constraint, else the closest)."""
    rows = []
    for name, kind in result.types.items():
        ran = [t for t in result.trials if t.summary and t.params["gpu"] == name]
        pick = winner(ran, result.target)
        rows.append(
            GpuTypeRow(kind, len(ran), any(meets(t, result.target) for t in ran), pick.summary if pick else None)
        )
    return rows


def validate(
    sm: StackModel, best: Trial, types: dict[str, GpuType], held: Sequence[Part], options: RunOptions
) -> CombinedSummary:
    """The winner on traffic it never saw: each held-out part (a day, a time split's rest, a
    validation trace) scored after its `scored_from` share of time, with the oracle's GPU-hours
    there; per part (`days`) and together."""
    return held_out_parts(deploy(sm, best.candidate, types), held, options, lambda t: servable(sm, t, types))


@dataclass(frozen=True)
class StaticFleet:
    """A fleet of warm replicas of the winner's deployment, never scaled: the fewest meeting the
    target on the traffic it was chosen on (`chosen_on`: "searched", as a plan made ahead would
    choose it, or "held out", in hindsight), with its held-out numbers; `replicas` None when even
    the pools' whole fleet (`budget`) misses there, `summary` then that fleet's."""

    chosen_on: str
    replicas: int | None
    budget: int
    summary: CombinedSummary

    def as_dict(self) -> dict[str, Any]:
        return {
            "chosen_on": self.chosen_on,
            "replicas": self.replicas,
            "pools_replicas": self.budget,
            "validation": self.summary.as_dict(),
        }


def static_fleets(
    sm: StackModel,
    best: Trial,
    types: dict[str, GpuType],
    searched: Sequence[Part],
    held: Sequence[Part],
    target: float,
    options: RunOptions,
    oracle_gpu_hours: float,
) -> tuple[StaticFleet, StaticFleet]:
    """What a plan that scales must beat: the winner's deployment as a static fleet, its size
    bisected over 1 to the replicas its pools hold for the fewest whose worst part meets `target`
    (the planner's bar), chosen on the searched parts (planned ahead: the fair rival) and on the
    held-out ones (hindsight: a bound no plan made ahead reaches), each with its held-out numbers.
    It assumes attainment does not fall as the fleet grows (more idle replicas under the same
    router); a count is dropped at its first part that misses. The oracle's GPU-hours are the
    winner's validation's: the same traffic, feasibility and objective."""
    deployed = deploy(sm, best.candidate, types)
    budget = deployed.pool_replicas

    def feasible(trace: Trace) -> np.ndarray:
        return servable(sm, trace, types)

    def fewest(parts: Sequence[Part]) -> int | None:
        def meets_with(replicas: int) -> bool:
            return all(
                held_out(deployed, p.trace, p.scored_from, options, False, feasible(p.trace), replicas).slo_attainment
                >= target
                for p in parts
            )

        if not meets_with(budget):
            return None
        missing, found = 0, budget  # a fleet of `missing` misses (none serves nothing), `found` meets
        while found - missing > 1:
            middle = (missing + found) // 2
            missing, found = (missing, middle) if meets_with(middle) else (middle, found)
        return found

    def fleet(chosen_on: str, replicas: int | None) -> StaticFleet:
        summary = held_out_parts(deployed, held, options, feasible, oracle=False, static=replicas or budget)
        return StaticFleet(chosen_on, replicas, budget, summary.with_oracle(oracle_gpu_hours))

    return fleet("searched", fewest(searched)), fleet("held out", fewest(held))


def static_notes(static: dict[str, Any], validation: dict[str, Any], target: float) -> list[str]:
    """The plan's lines on the static fleets beside the winner, on the held-out traffic."""
    return [_ahead_note(static["ahead"], validation, target), _hindsight_note(static["hindsight"], validation, target)]


def _numbers(v: dict[str, Any]) -> str:
    return f"{v['slo_attainment']:.2%} at ${v['cost_usd']:.2f} ({v['gpu_hours']:.2f} GPU-h, {v['oracle_ratio']}x the oracle)"


def _none_within(fleet: dict[str, Any], target: float, traffic: str) -> str:
    return (
        f"no static fleet within the pools' {fleet['pools_replicas']} replicas meets {target:.1%} on the {traffic} "
        f"traffic (all of them attain {fleet['validation']['slo_attainment']:.2%} held out)"
    )


def _share(validation: dict[str, Any], v: dict[str, Any]) -> str:
    """What the winner costs held out over what the static fleet `v` does."""
    return f"the winner costs {validation['cost_usd'] / v['cost_usd'] if v['cost_usd'] else 1.0:.2f}x that"


def _ahead_note(ahead: dict[str, Any], validation: dict[str, Any], target: float) -> str:
    v = ahead["validation"]
    if ahead["replicas"] is None:
        return _none_within(ahead, target, "searched")
    words = (
        f"a static fleet planned ahead, the fewest replicas meeting {target:.1%} on the searched traffic "
        f"({ahead['replicas']}), attains {_numbers(v)} held out"
    )
    if v["slo_attainment"] >= target and v["cost_usd"] < validation["cost_usd"]:
        return f"warning: {words}, less than the winner's ${validation['cost_usd']:.2f}: scaling does not pay here"
    missed = "; it misses the target held out" if v["slo_attainment"] < target else ""
    return f"{words}{missed}; {_share(validation, v)}"


def _hindsight_note(hindsight: dict[str, Any], validation: dict[str, Any], target: float) -> str:
    v = hindsight["validation"]
    if hindsight["replicas"] is None:
        return _none_within(hindsight, target, "held-out")
    return (
        f"in hindsight, the fewest static replicas meeting {target:.1%} on the held-out traffic are "
        f"{hindsight['replicas']}: {_numbers(v)}, a bound no fleet chosen ahead reaches (its day-long attainment "
        f"may spend the error budget at the peak); {_share(validation, v)}"
    )


def cache_value(
    planned: StackModel, validation: CombinedSummary, held: Sequence[Part], options: RunOptions
) -> dict[str, Any] | None:
    """What the prefix cache is worth to the winner on the held-out traffic whose prefixes are
    known: the oracle's GPU-hours at the target with the winner's routing and prefix caching
    (`validation`'s) against the oracle of today's cold model (least-request, no prefix caching,
    no LMCache),
    the difference in $ at the winner's price per GPU-hour, and the hit rate it rests on. None
    when no held-out trace has block ids."""
    known = [(p.trace, p.scored_from) for p in held if p.trace.block_ids is not None]
    if not known or validation.oracle_gpu_hours is None or len(known) != len(held):
        return None
    cold_sm = replace(planned, profile=replace(planned.profile, prefix_caching=False, lmcache_tokens=0))
    cold_options = replace(options, router="least-request")
    cold = sum(run_oracle(cold_sm, t.window(t.duration * f, math.inf), cold_options).gpu_hours for t, f in known)
    warm = validation.oracle_gpu_hours
    usd_per_gpu_hour = validation.cost_usd / validation.gpu_hours if validation.gpu_hours else 0.0
    return {
        "routing": planned.routing,
        "hit_rate": validation.prefix_cache_hit_rate,
        "oracle_gpu_hours": round(warm, 3),
        "cold_oracle_gpu_hours": round(cold, 3),
        "gpu_hours_saved": round(cold - warm, 3),
        "usd_saved": round((cold - warm) * usd_per_gpu_hour, 2),
        "saved_share": round((cold - warm) / cold, 4) if cold else None,
    }


def cache_note(value: dict[str, Any]) -> str:
    """The plan's line on what the prefix cache is worth."""
    rate = "n/a" if value["hit_rate"] is None else f"{value['hit_rate']:.1%}"
    return (
        f"prefix cache: the winner's replicas find {rate} of prompt tokens cached on the held-out traffic; "
        f"at the target the oracle needs {value['oracle_gpu_hours']:.2f} GPU-h with routing {value['routing']} "
        f"and prefix caching against {value['cold_oracle_gpu_hours']:.2f} GPU-h for a cold fleet (least-request, "
        f"no prefix caching): the cache is worth {value['gpu_hours_saved']:.2f} GPU-h "
        f"({(value['saved_share'] or 0):.0%}), ${value['usd_saved']:.2f} at the winner's price"
    )


def binding_limit(sm: StackModel, result: PlanResult, traces: Sequence[Trace], options: RunOptions) -> str:
    """Why nothing met the target, with the numbers: context length, the SLO against an idle
    fleet's latency, the pools' GPU limit, or the policy (maxReplicas and the triggers)."""
    best = result.best
    if best is None:
        reasons = sorted({t.refused for t in result.trials if t.refused})
        return "no candidate could deploy or start: " + "; ".join(reasons[:3])
    chosen = deploy(sm, best.candidate, result.types)
    budget = sm.pool_replicas
    masks = [servable(sm, t, result.types) for t in traces]
    summaries = [summarize(run_static(chosen, t, budget, options), chosen, m) for t, m in zip(traces, masks)]
    at_budget = min(s.slo_attainment for s in summaries)
    short = f"best searched policy attains {best.summary.slo_attainment:.1%} vs {result.target:.1%}"  # type: ignore[union-attr]  # only candidates that ran
    # Requests vLLM refuses (context length) are left out of the attainment, so they never bind it;
    # `unservable_note` reports them.
    if at_budget < result.target:
        huge = min(
            summarize(run_static(chosen, t, 4 * budget, options), chosen, m).slo_attainment
            for t, m in zip(traces, masks)
        )
        if huge < result.target:
            return (
                f"SLO below the idle-replica latency: even {4 * budget} warm replicas attain {huge:.1%} "
                f"(TTFT {sm.policy.slo.ttft_p95_seconds}s, TPOT {sm.policy.slo.tpot_p95_seconds}s per request); {short}"
            )
        return (
            f"pool GPU limit: all {budget} replicas the pools hold, warm all along, attain {at_budget:.1%} "
            f"< {result.target:.1%} (a static fleet of {4 * budget} attains {huge:.1%}); {short}"
        )
    return (
        f"maxReplicas and the triggers: a static fleet of {budget} (the pools' limit) attains {at_budget:.1%}, "
        f"but no searched policy reached {result.target:.1%}; {short}"
    )


def unservable_note(sm: StackModel, trial: Trial, target: float) -> str | None:
    """What share of the searched requests every candidate's attainment leaves out (`servable`:
    too long for maxModelLen or the KV cache, or slower than the SLO even alone on a warm replica,
    on every GPU type searched), as a warning when it is more than the target lets miss: a plan
    "meeting 99%" of 80% of the traffic is not what the operator asked for."""
    share = trial.summary.infeasible_share if trial.summary else 0.0
    if not share:
        return None
    slo = sm.policy.slo
    percent = f"{share:.1%}" if share >= 0.001 else f"{share:.2%}"  # 1 request in 10,000 is not "0.0%"
    text = (
        f"{percent} of the searched requests no GPU type searched serves within the SLO (longer than maxModelLen "
        f"{sm.model.engine.max_model_len} or the KV cache, or over TTFT {slo.ttft_p95_seconds}s or TPOT "
        f"{slo.tpot_p95_seconds}s even alone on a warm replica): the attainment is over the others"
    )
    return f"warning: {text}" if share > 1 - target else text


def with_margin(parts: Sequence[Part], margin: float, seed: int) -> list[Part]:
    """The searched parts at `margin` times their request rate (seeded)."""
    return [replace(p, trace=rate_scale(p.trace, margin, seed=seed)) for p in parts]
