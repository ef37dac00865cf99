"""The oracle lower bound: the fewest GPU-hours that meet the SLO with perfect foresight.

Time is cut into intervals. In each, the oracle knows exactly which requests will come and
has the replicas it needs, warm, from the first second: the fewest replicas of the engine
model for which that interval's requests, replayed alone, meet the SLO (TTFT p95 and
end-to-end p99 within the stack's targets). No controller can beat it (it cannot see the
future nor start a GPU in zero seconds), so a policy's GPU-hours divided by the oracle's is
the price of reacting instead of knowing.

Why replay instead of a closed-form capacity: real traces mix short and very long requests,
and the p99 is set by the long ones; a capacity computed for the mean request shape would
promise replicas that miss the SLO on the real mix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from capacity.engine import EngineProfile
from capacity.sim.cluster.startup import Pool, Startup
from capacity.sim.simulator import OK, REJECTED, SimConfig, simulate
from capacity.workload.traces import Trace

INSTANT = Startup((0.0, 0.0), (0.0, 0.0), 0.0, (0.0, 0.0))
# Above this the interval is declared infeasible and billed at the cap (see `infeasible`).
MAX_REPLICAS = 64


@dataclass(frozen=True)
class OracleResult:
    interval_s: float
    replicas: np.ndarray  # per interval
    gpu_hours: float
    peak_replicas: int
    infeasible: int  # intervals no replica count brings within the SLO (long requests alone miss it)


def meets_slo(trace: Trace, profile: EngineProfile, replicas: int, ttft_slo: float, e2e_slo: float, seed: int) -> bool:
    """Do `replicas` warm replicas serve these requests within the SLO percentiles?"""
    config = SimConfig(
        profile=profile,
        pools=(Pool("oracle", "on-demand", 1, MAX_REPLICAS, 0.0),),
        startup=INSTANT,
        initial_replicas=replicas,
        seed=seed,
    )
    result = simulate(config, trace, None)
    accepted = result.outcome != REJECTED
    if not accepted.any():
        return True
    ok = result.outcome[accepted] == OK
    ttft = np.where(ok, result.ttft[accepted], np.inf)
    e2e = np.where(ok, result.e2e[accepted], np.inf)
    return bool(np.percentile(ttft, 95) <= ttft_slo and np.percentile(e2e, 99) <= e2e_slo)


def fewest_replicas(meets, start: int, cap: int = MAX_REPLICAS) -> tuple[int, bool]:
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


def oracle(
    trace: Trace,
    profile: EngineProfile,
    ttft_slo: float,
    e2e_slo: float,
    interval_s: float = 300.0,
    gpus_per_replica: int = 1,
    seed: int = 0,
) -> OracleResult:
    end = max(trace.duration, interval_s)
    n = math.ceil(end / interval_s)
    replicas = np.zeros(n, dtype=np.int64)
    infeasible = 0
    guess = 1
    for i in range(n):
        window = trace.window(i * interval_s, (i + 1) * interval_s)
        if not len(window):
            continue
        count, feasible = fewest_replicas(
            lambda r: meets_slo(window, profile, r, ttft_slo, e2e_slo, seed), guess
        )
        replicas[i], guess = count, count
        infeasible += not feasible
    lengths = np.minimum(interval_s, end - np.arange(n) * interval_s)
    gpu_hours = float((replicas * lengths).sum()) / 3600 * gpus_per_replica
    return OracleResult(interval_s, replicas, gpu_hours, int(replicas.max(initial=0)), infeasible)
