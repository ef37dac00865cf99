"""The oracle lower bound: the fewest GPU-hours that meet the SLO objective with perfect foresight.

Time is cut into intervals. In each, the oracle knows exactly which requests will come and
has the replicas it needs, warm, from the first second: the fewest replicas of the engine
model for which that interval's requests, replayed alone, reach the SLO objective (the share
of requests whose TTFT and TPOT meet their targets, `capacity.sim.slo`). No controller can beat
it in any interval (it cannot see the future nor start a GPU in zero seconds), so a policy's
GPU-hours divided by the oracle's is the price of reacting instead of knowing.

Infeasible requests (refused by vLLM, or missing the SLO even alone on an idle replica) are
left out before sizing: no replica count serves them, so counting them would only push the
oracle to its cap. They are reported apart (`infeasible_requests`). An interval that still
misses the objective at `MAX_REPLICAS` (more feasible load than the cap serves) is billed at
the cap and counted in `infeasible_intervals`.

Why replay instead of a closed-form capacity: real traces mix short and very long requests,
and a capacity computed for the mean request shape would promise replicas that miss the SLO
on the real mix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from capacity.engine import EngineProfile
from capacity.sim.cluster.router import RouterName
from capacity.sim.cluster.startup import Pool, Startup
from capacity.sim.results import FAILED, OK, RequestLog
from capacity.sim.simulator import SimConfig, simulate
from capacity.sim.slo import SloTargets, attainment, feasible, met
from capacity.workload.traces import Trace

INSTANT = Startup((0.0, 0.0), (0.0, 0.0), 0.0, (0.0, 0.0))
# Above this the interval is declared infeasible and billed at the cap (see `infeasible_intervals`).
MAX_REPLICAS = 64


@dataclass(frozen=True)
class OracleResult:
    interval_s: float
    replicas: np.ndarray  # per interval
    gpu_hours: float
    peak_replicas: int
    infeasible_intervals: int  # intervals whose feasible requests need more than MAX_REPLICAS
    feasible: np.ndarray  # per request of the trace: some fleet serves it within the SLO

    @property
    def infeasible_requests(self) -> int:
        return int((~self.feasible).sum())


def meets_slo(
    trace: Trace,
    profile: EngineProfile,
    replicas: int,
    slo: SloTargets,
    seed: int,
    router: RouterName = "least-request",
) -> bool:
    """Do `replicas` warm replicas, behind `router`, serve the objective's share of these requests
    within the SLO? Each replica starts the interval with an empty prefix cache."""
    config = SimConfig(
        router=router,
        profile=profile,
        pools=(Pool("oracle", "on-demand", 1, MAX_REPLICAS, 0.0),),
        startup=INSTANT,
        initial_replicas=replicas,
        seed=seed,
    )
    result = simulate(config, trace, None, settled(len(trace), slo))
    everyone = np.ones(len(trace), dtype=bool)
    return attainment(met(result.outcome, result.ttft, result.tpot, slo), everyone) >= slo.objective


def settled(n: int, slo: SloTargets) -> Callable[[RequestLog], bool]:
    """Is the answer of `meets_slo` over n requests already known? A request that met the SLO,
    or missed it (failed, or finished late), stays so: once n - allowed have met, the objective
    is reached whatever the rest do, and once more than `allowed` have missed it cannot be.
    Either way the partial result, its unfinished requests counted as misses, gives the whole
    run's answer, so the replay stops there (a failing replica count shows long before the end)."""
    allowed = misses_allowed(n, slo.objective)

    def known(log: RequestLog) -> bool:
        ok = met(log.outcome, log.ttft, log.tpot, slo)
        hits = int(ok.sum())
        misses = int(((log.outcome == FAILED) | (log.outcome == OK)).sum()) - hits
        return hits >= n - allowed or misses > allowed

    return known


def misses_allowed(n: int, objective: float) -> int:
    """The most misses among n requests whose attainment, (n - m) / n as `attainment` divides,
    still reaches `objective`; -1 when none does (objective above 1)."""
    if n == 0:
        return 0
    m = max(0, min(n, math.floor(n * (1 - objective))))
    while m < n and (n - (m + 1)) / n >= objective:
        m += 1
    while m >= 0 and (n - m) / n < objective:
        m -= 1
    return m


def fewest_replicas(meets: Callable[[int], bool], start: int, cap: int = MAX_REPLICAS) -> tuple[int, bool]:
    """Smallest n in [1, cap] with meets(n), searching from a guess; (cap, False) if none."""
    n = max(1, min(start, cap))
    if meets(n):
        while n > 1 and meets(n - 1):
            n -= 1
        return n, True
    lo = n  # fails
    hi = n
    while True:  # double until it meets
        if hi >= cap:
            return cap, False
        hi = min(cap, hi * 2)
        if meets(hi):
            break
        lo = hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi, True


def _only(trace: Trace, keep: np.ndarray) -> Trace:
    blocks = tuple(b for b, k in zip(trace.block_ids, keep.tolist()) if k) if trace.block_ids is not None else None
    return Trace(
        trace.name, trace.arrivals[keep], trace.prompt_tokens[keep], trace.output_tokens[keep], trace.start, blocks
    )


def oracle(
    trace: Trace,
    profile: EngineProfile,
    slo: SloTargets,
    interval_s: float = 300.0,
    gpus_per_replica: int = 1,
    seed: int = 0,
    router: RouterName = "least-request",
) -> OracleResult:
    servable = feasible(trace, profile, slo)
    sized = _only(trace, servable)
    # Billed up to the last arrival, as the policy runs it is scored (a short trace is not padded
    # to a whole interval); an empty or one-instant trace still has one interval.
    end = trace.duration if trace.duration > 0 else interval_s
    n = math.ceil(end / interval_s)
    replicas = np.zeros(n, dtype=np.int64)
    infeasible = 0
    guess = 1
    for i in range(n):
        window = sized.window(i * interval_s, (i + 1) * interval_s, history=False)  # no trigger reads it
        if not len(window):
            continue

        def meets(replicas: int, window: Trace = window) -> bool:
            return meets_slo(window, profile, replicas, slo, seed, router)

        count, reachable = fewest_replicas(meets, guess)
        replicas[i], guess = count, count
        infeasible += not reachable
    lengths = np.minimum(interval_s, end - np.arange(n) * interval_s)
    gpu_hours = float((replicas * lengths).sum()) / 3600 * gpus_per_replica
    return OracleResult(interval_s, replicas, gpu_hours, int(replicas.max(initial=0)), infeasible, servable)
