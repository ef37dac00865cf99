"""Run one policy of a stack model over a trace and summarise it as the commands report it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from capacity.planning.days import Part
from capacity.planning.stack import StackModel
from capacity.sim.cluster.router import RouterName
from capacity.sim.oracle import OracleResult, oracle
from capacity.sim.scaledobject import Manifest
from capacity.sim.simulator import FAILED, OK, REJECTED, SimConfig, SimResult, simulate
from capacity.sim.slo import SloTargets, attainment, feasible, met
from capacity.workload.traces import Trace


@dataclass(frozen=True)
class RunOptions:
    router: RouterName | None = None  # None: the stack model's serving.routing
    seed: int = 0
    # Warm replicas at t = 0; default: `warm_start` within the policy's min/max, as if the
    # policy had been running before the trace started (the CLI passes the oracle's count
    # for the first interval), else minReplicas.
    initial_replicas: int | None = None
    warm_start: int | None = None
    metrics_outages: tuple[tuple[float, float], ...] = ()
    oracle_interval_s: float = 300.0
    # The share of requests the oracle sizes each interval for; None: the SLO's objective. The
    # planner sets its attainment target, so the oracle meets the same bar as the policy.
    oracle_objective: float | None = None


def sim_config(sm: StackModel, options: RunOptions, initial: int) -> SimConfig:
    return SimConfig(
        profile=sm.profile,
        pools=sm.pools,
        startup=sm.startup,
        gpus_per_replica=sm.model.gpus_per_replica,
        spot_interruptions_per_hour=sm.spot_interruptions_per_hour,
        scrape_interval_s=sm.scrape_interval_s,
        router=options.router or sm.routing,
        seed=options.seed,
        initial_replicas=initial,
        metrics_outages=options.metrics_outages,
        series_labels=series_labels(sm),
        headroom=sm.headroom,
    )


def series_labels(sm: StackModel) -> tuple[tuple[str, str], ...]:
    """The labels every series of the model's replicas carries in the stack's Prometheus, as the
    platform's PodMonitor scrapes them: vLLM's `model_name` (the served name) and the namespace."""
    scope = sm.monitored.scope
    return (("model_name", scope.model),) + ((("namespace", scope.namespace),) if scope.namespace else ())


def validation_options(sm: StackModel, seed: int) -> RunOptions:
    """What `plan` validates a policy with by default, and so what replays of its evidence use:
    seeded, every run warm-started by the oracle sized at the stack's attainment target."""
    return RunOptions(seed=seed, oracle_objective=sm.attainment_target)


def initial_replicas(manifest: Manifest, options: RunOptions) -> int:
    if options.initial_replicas is not None:
        return options.initial_replicas
    return min(max(options.warm_start or 0, manifest.min_replicas, 1), manifest.max_replicas)


def run_policy(sm: StackModel, trace: Trace, options: RunOptions = RunOptions()) -> SimResult:
    """The stack model's autoscaling policy, as the ScaledObject the platform deploys."""
    return run_scaled_object(sm, sm.manifest, trace, options)


def run_scaled_object(
    sm: StackModel, manifest: Manifest, trace: Trace, options: RunOptions = RunOptions()
) -> SimResult:
    """A ScaledObject's policy on the stack model's replicas, pools and startup; warm start
    within the manifest's min/max, as if it had been running before the trace started."""
    try:
        return simulate(sim_config(sm, options, initial_replicas(manifest, options)), trace, manifest.scaled_object())
    except ValueError as exc:  # a trigger the simulator cannot read: name the ScaledObject too
        raise ValueError(f"ScaledObject {manifest.name}: {exc}") from None


def run_static(sm: StackModel, trace: Trace, replicas: int, options: RunOptions = RunOptions()) -> SimResult:
    """A fixed fleet of warm replicas, no autoscaler (spot reclaims are still replaced)."""
    return simulate(sim_config(sm, options, replicas), trace, None)


def slo_targets(sm: StackModel) -> SloTargets:
    """The model's SLO (`slo.ttftP95Seconds`, `slo.tpotP95Seconds`) and its objective as plain data."""
    slo = sm.policy.slo
    return SloTargets(slo.ttft_p95_seconds, slo.tpot_p95_seconds, slo.OBJECTIVE)


def oracle_targets(sm: StackModel, options: RunOptions) -> SloTargets:
    targets = slo_targets(sm)
    return targets if options.oracle_objective is None else replace(targets, objective=options.oracle_objective)


def feasible_requests(sm: StackModel, trace: Trace) -> np.ndarray:
    """Per request: some fleet of the model's replicas serves it within the SLO."""
    return feasible(trace, sm.profile, slo_targets(sm))


def run_oracle(sm: StackModel, trace: Trace, options: RunOptions = RunOptions()) -> OracleResult:
    return oracle(
        trace,
        sm.profile,
        oracle_targets(sm, options),
        options.oracle_interval_s,
        sm.model.gpus_per_replica,
        options.seed,
        options.router or sm.routing,
    )


def warm_start(sm: StackModel, trace: Trace, options: RunOptions = RunOptions()) -> int:
    """The oracle's replicas for the trace's first interval: the fleet a policy that had been
    running before the trace began would hold, so a run does not start cold at minReplicas."""
    first = run_oracle(sm, trace.window(0.0, options.oracle_interval_s), options)
    return int(first.replicas[0]) if len(first.replicas) else 0


def since(result: SimResult, start: float, end: float = math.inf) -> tuple[SimResult, np.ndarray]:
    """One continuous run seen in [start, end), and which requests that keeps: those arriving at
    or after `start` (served to completion), and the GPU time billed inside the window. A
    held-out window scored this way starts with the fleet the policy built on the traffic before
    it, as a deployed policy would; billed to the last arrival (`end`), like the oracle, the time
    after it belongs to whatever traffic comes next."""
    keep = result.arrival >= start
    nodes = tuple(clipped for node in result.nodes if (clipped := node.within(start, end)) is not None)
    # Replicas: the ready pods at each HPA sync from `start` on (nodes would also count the
    # emptied ones awaiting consolidation).
    timeline = result.timeline
    # The whole run: the fleet's own count (every READY event); a part: the timeline's samples in it.
    whole = start <= 0 and end == math.inf
    peak = (
        result.max_replicas_used
        if whole
        else max((r for t, r in zip(timeline.t, timeline.ready) if start <= t < end), default=0)
    )
    view = replace(
        result,
        arrival=result.arrival[keep],
        ttft=result.ttft[keep],
        tpot=result.tpot[keep],
        e2e=result.e2e[keep],
        outcome=result.outcome[keep],
        nodes=nodes,
        headroom=tuple(clipped for span in result.headroom if (clipped := span.within(start, end)) is not None),
        scale_times=tuple(t for t in result.scale_times if start <= t < end),
        max_replicas_used=peak,
        initial_replicas=sum(1 for n in result.nodes if n.start <= start < n.end),
    )
    return view, keep


def _percentile(values: np.ndarray, q: float) -> float | None:
    values = values[np.isfinite(values)]
    return round(float(np.percentile(values, q)), 3) if len(values) else None


@dataclass(frozen=True)
class JudgedSlo:
    """The service level a summary was judged against (`slo.*` of the model's policy)."""

    ttft_p95_s: float
    tpot_p95_s: float
    e2e_p99_s: float | None
    objective: float


@dataclass(frozen=True)
class RunSummary:
    """One run scored as the commands report it (see `summarize`); `as_dict` is the JSON shape."""

    requests: int
    slo_attainment: float
    infeasible_requests: int
    ttft_p95_s: float | None
    tpot_p95_s: float | None
    e2e_p99_s: float | None
    gpu_hours: float
    spot_gpu_hours: float
    on_demand_gpu_hours: float
    cost_usd: float
    oracle_gpu_hours: float | None
    oracle_ratio: float | None
    scale_events: int
    initial_replicas: int
    max_replicas_used: int
    failed_requests: int
    rejected_requests: int
    unfinished_requests: int
    slo: JudgedSlo
    simulated_s: float
    # Prompt tokens found cached (vLLM's hits, plus LMCache's `external_hits`) over those looked
    # up, fleet-wide and per replica ({pod, queries, hits, external_hits, hit_rate}, pods by
    # creation order); None / empty when no replica kept a prefix cache
    # (a trace without block ids, or prefix caching off). Over the whole run, also for a part.
    prefix_cache_hit_rate: float | None = None
    prefix_cache_replicas: tuple[dict[str, Any], ...] = ()
    # What the warm headroom's placeholder nodes were held for (already in gpu_hours and cost_usd).
    headroom_gpu_hours: float = 0.0
    headroom_cost_usd: float = 0.0

    def with_oracle(self, oracle_gpu_hours: float) -> RunSummary:
        """The summary with the oracle's GPU-hours and the ratio of the policy's to them."""
        return replace(
            self,
            oracle_gpu_hours=round(oracle_gpu_hours, 3),
            oracle_ratio=oracle_ratio(self.gpu_hours, oracle_gpu_hours),
        )

    def as_dict(self) -> dict[str, Any]:
        """The summary as the commands print it with --json (the keys in this order)."""
        return asdict(self)


def summarize(result: SimResult, sm: StackModel, feasible_mask: np.ndarray) -> RunSummary:
    """The run's summary. `slo_attainment` is the share of feasible requests (`feasible_mask`,
    from `feasible_requests`) whose TTFT and TPOT meet the SLO; a failed or unfinished request
    misses. Infeasible requests, which no fleet serves within the SLO, are counted apart
    (`infeasible_requests`, which include the `rejected_requests` vLLM refuses). The latency
    percentiles are over served requests. The oracle's fields stay None until `RunSummary.with_oracle`."""
    targets = slo_targets(sm)
    accepted = result.outcome != REJECTED
    ok = result.outcome == OK
    gpu_hours = sum(result.gpu_seconds.values()) / 3600
    return RunSummary(
        requests=len(result.outcome),
        slo_attainment=round(attainment(met(result.outcome, result.ttft, result.tpot, targets), feasible_mask), 4),
        infeasible_requests=int((~feasible_mask).sum()),
        ttft_p95_s=_percentile(result.ttft[ok], 95),
        tpot_p95_s=_percentile(result.tpot[ok], 95),
        e2e_p99_s=_percentile(result.e2e[ok], 99),
        gpu_hours=round(gpu_hours, 3),
        spot_gpu_hours=round(result.gpu_seconds.get("spot", 0.0) / 3600, 3),
        on_demand_gpu_hours=round(result.gpu_seconds.get("on-demand", 0.0) / 3600, 3),
        cost_usd=round(result.cost_usd, 2),
        oracle_gpu_hours=None,
        oracle_ratio=None,
        scale_events=result.scale_events,
        initial_replicas=result.initial_replicas,
        max_replicas_used=result.max_replicas_used,
        failed_requests=int((result.outcome == FAILED).sum()),
        rejected_requests=int((~accepted).sum()),
        unfinished_requests=int((accepted & ~ok & (result.outcome != FAILED)).sum()),
        slo=JudgedSlo(targets.ttft_s, targets.tpot_s, sm.policy.slo.e2e_p99_seconds, targets.objective),
        simulated_s=round(result.end_time, 1),
        prefix_cache_hit_rate=None if (rate := result.prefix_cache_hit_rate) is None else round(rate, 4),
        prefix_cache_replicas=tuple(
            {
                "pod": c.pod,
                "queries": c.queries,
                "hits": c.hits,
                "external_hits": c.external_hits,
                "hit_rate": round(c.cached / c.queries, 4) if c.queries else None,
            }
            for c in result.prefix_cache
        ),
        headroom_gpu_hours=round(result.headroom_gpu_seconds / 3600, 3),
        headroom_cost_usd=round(result.headroom_cost_usd, 2),
    )


def oracle_ratio(gpu_hours: float, oracle_gpu_hours: float) -> float | None:
    """The policy's GPU-hours over the oracle's: the price of reacting instead of knowing."""
    return round(gpu_hours / oracle_gpu_hours, 3) if oracle_gpu_hours else None


@dataclass(frozen=True)
class DaySummary:
    """One part of a combined summary (a day, a time split's part, a validation trace) as the
    plan reports it per day; the oracle's fields on held-out traffic only."""

    label: str
    slo_attainment: float
    gpu_hours: float
    cost_usd: float
    oracle_gpu_hours: float | None = None
    oracle_ratio: float | None = None


@dataclass(frozen=True)
class CombinedSummary:
    """Several runs of one candidate (one per day or trace) as the planner scores them: the worst
    part's attainment, the sums of the rest, and each part (`days`). The oracle's fields are set
    on held-out traffic only (`with_oracle`), and `as_dict` leaves them out until then."""

    slo_attainment: float
    # Left out of slo_attainment: no GPU type of the search serves them within the SLO.
    infeasible_share: float
    rejected_share: float
    gpu_hours: float
    cost_usd: float
    scale_events: int
    max_replicas_used: int  # the most ready replicas on any of the traces
    usd_per_million_output_tokens: float | None
    oracle_gpu_hours: float | None = None
    oracle_ratio: float | None = None
    # The engine's step times in these runs over its profile's derived ones (EngineProfile.step_time_scale):
    # 1 the nominal figure; the planner's pessimistic bound or an edge of its error band otherwise.
    step_time_scale: float = 1.0
    # prefix-cache hits over queries over every run's replicas; None (and left out of `as_dict`)
    # when no replica kept a prefix cache (traces without block ids)
    prefix_cache_hit_rate: float | None = None
    days: tuple[DaySummary, ...] = ()  # each part, in the order run
    # GPU-hours the warm headroom's placeholder nodes were held for (inside gpu_hours; left out of
    # `as_dict` when there was no headroom, so summaries of stacks without it read as before)
    headroom_gpu_hours: float = 0.0

    def with_oracle(self, oracle_gpu_hours: float) -> CombinedSummary:
        """The summary with the oracle's GPU-hours on the same traffic and the ratio to them."""
        return replace(
            self,
            oracle_gpu_hours=round(oracle_gpu_hours, 3),
            oracle_ratio=oracle_ratio(self.gpu_hours, oracle_gpu_hours),
        )

    @property
    def worst_day(self) -> DaySummary | None:
        """The part of lowest attainment (of equal attainment, the costliest; None: no parts)."""
        return min(self.days, key=lambda d: (d.slo_attainment, -d.cost_usd), default=None)

    @property
    def costliest_day(self) -> DaySummary | None:
        return max(self.days, key=lambda d: d.cost_usd, default=None)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.oracle_gpu_hours is None:
            del out["oracle_gpu_hours"], out["oracle_ratio"]
        if self.prefix_cache_hit_rate is None:
            del out["prefix_cache_hit_rate"]
        if not self.headroom_gpu_hours:
            del out["headroom_gpu_hours"]
        out["days"] = [_day_dict(d) for d in self.days]
        out["worst_day"] = _day_dict(self.worst_day) if self.worst_day else None
        out["costliest_day"] = _day_dict(self.costliest_day) if self.costliest_day else None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CombinedSummary:
        """The summary `as_dict` gave (a journal keeps it as JSON)."""
        fields = {k: v for k, v in data.items() if k not in ("worst_day", "costliest_day")}
        fields["days"] = tuple(DaySummary(**d) for d in data.get("days", ()))
        return cls(**fields)


def _day_dict(day: DaySummary) -> dict[str, Any]:
    out = asdict(day)
    if day.oracle_gpu_hours is None:
        del out["oracle_gpu_hours"], out["oracle_ratio"]
    return out


def combined(
    summaries: Sequence[RunSummary],
    output_tokens: float,
    step_time_scale: float = 1.0,
    labels: Sequence[str] = (),
) -> CombinedSummary:
    """One candidate's runs on several parts (days or traces, named by `labels`), scored together
    (`step_time_scale`: its profile's)."""
    cost = sum(s.cost_usd for s in summaries)
    requests = max(sum(s.requests for s in summaries), 1)
    queries = sum(r["queries"] for s in summaries for r in s.prefix_cache_replicas)
    hits = sum(r["hits"] + r["external_hits"] for s in summaries for r in s.prefix_cache_replicas)
    return CombinedSummary(
        slo_attainment=min(s.slo_attainment for s in summaries),
        infeasible_share=round(sum(s.infeasible_requests for s in summaries) / requests, 4),
        rejected_share=round(sum(s.rejected_requests for s in summaries) / requests, 4),
        gpu_hours=round(sum(s.gpu_hours for s in summaries), 3),
        cost_usd=round(cost, 2),
        scale_events=sum(s.scale_events for s in summaries),
        max_replicas_used=max(s.max_replicas_used for s in summaries),
        usd_per_million_output_tokens=round(cost / output_tokens * 1e6, 3) if output_tokens else None,
        step_time_scale=step_time_scale,
        prefix_cache_hit_rate=round(hits / queries, 4) if queries else None,
        headroom_gpu_hours=round(sum(s.headroom_gpu_hours for s in summaries), 3),
        days=tuple(
            DaySummary(label, s.slo_attainment, s.gpu_hours, s.cost_usd, s.oracle_gpu_hours, s.oracle_ratio)
            for label, s in zip(labels, summaries)
        ),
    )


# (id of the trace, what else the value depends on) -> (the trace, the value). The trace is kept
# beside its id so that a freed trace whose id is reused never hands its value to another.
_PER_TRACE: dict[tuple[int, Any], tuple[Trace, Any]] = {}


def per_trace(trace: Trace, key: Any, compute: Callable[[], Any]) -> Any:
    """`compute()`, remembered per trace (by identity) and `key`: planner trials repeat the same
    trace with the same profile many times."""
    cached = _PER_TRACE.get((id(trace), key))
    if cached is None or cached[0] is not trace:
        cached = _PER_TRACE[id(trace), key] = (trace, compute())
    return cached[1]


def warmed(sm: StackModel, trace: Trace, options: RunOptions) -> RunOptions:
    """`options` starting the run with the fleet the oracle needs for the trace's first interval
    (remembered per trace and profile), as if the policy had been running before the trace."""
    key = ("warm", sm.profile, options.oracle_objective, options.router or sm.routing)
    warm = per_trace(trace, key, lambda: warm_start(sm, trace, options))
    return replace(options, warm_start=warm)


def held_out(
    sm: StackModel,
    trace: Trace,
    fraction: float,
    options: RunOptions,
    oracle: bool = True,
    feasible: np.ndarray | None = None,
    static: int | None = None,
) -> RunSummary:
    """The policy's summary on the part of `trace` after its first `fraction` of time, with the
    oracle's GPU-hours on that part. The policy runs the whole trace, as a deployed policy would,
    and only the held-out part is scored and billed: its fleet at the cut is the one the policy
    built on the traffic before (a replay of the part alone would start it cold or guessed).
    `oracle=False` leaves the oracle's fields None (it costs more than the run). `feasible`: the
    requests of `trace` the attainment is over (default: those some fleet of `sm` serves).
    `static`: a fixed fleet of that many warm replicas instead of the policy (`run_static`)."""
    cut = trace.duration * fraction
    run = (
        run_policy(sm, trace, warmed(sm, trace, options)) if static is None else run_static(sm, trace, static, options)
    )
    tail, keep = since(run, cut, trace.duration)
    summary = summarize(tail, sm, (feasible_requests(sm, trace) if feasible is None else feasible)[keep])
    return summary.with_oracle(run_oracle(sm, trace.window(cut, math.inf), options).gpu_hours) if oracle else summary


def held_out_parts(
    sm: StackModel,
    held: Sequence[Part],
    options: RunOptions,
    feasible: Callable[[Trace], np.ndarray] | None = None,
    oracle: bool = True,
    static: int | None = None,
) -> CombinedSummary:
    """The policy (or a `static` fleet) on each held-out part (a day, a time split's rest, a
    validation trace), scored after its `scored_from` share of time (`held_out`), with the oracle's
    GPU-hours there unless `oracle=False`; per part (`days`) and together. `feasible(trace)`: the
    requests attainment is over (default: `held_out`'s)."""
    summaries = [
        held_out(sm, p.trace, p.scored_from, options, oracle, feasible(p.trace) if feasible else None, static)
        for p in held
    ]
    tokens = sum(float(p.scored.output_tokens.sum()) for p in held)
    summary = combined(summaries, tokens, sm.profile.step_time_scale, [p.label for p in held])
    return summary.with_oracle(sum(s.oracle_gpu_hours or 0.0 for s in summaries)) if oracle else summary
