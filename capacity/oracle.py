"""The oracle lower bound: the fewest GPU-hours that meet the SLO with perfect foresight.

Time is cut into intervals; in each, the oracle knows the coming arrival rate and request
shape and has exactly the replicas it needs, started instantly. A replica's capacity is the
engine model's steady-state throughput at the highest concurrency whose predicted TTFT p95
and end-to-end p99 still meet the SLO (`capacity.engine.predict`, closed loop). No real
controller can beat it (it cannot see the future nor start a GPU in zero seconds), so the
ratio of a policy's GPU-hours to it is the price of reacting instead of knowing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from capacity.engine import EngineProfile, predict
from capacity.traces import Trace

# Shapes are rounded before the capacity search so a long trace needs few engine runs.
PROMPT_STEP, OUTPUT_STEP = 128, 16


@dataclass(frozen=True)
class OracleResult:
    interval_s: float
    replicas: np.ndarray  # per interval
    gpu_hours: float
    peak_replicas: int


@lru_cache(maxsize=256)
def slo_capacity(profile: EngineProfile, prompt: int, output: int, ttft_slo: float, e2e_slo: float) -> float:
    """Requests/s one replica serves within the SLO for this shape (0 if not even alone)."""

    def meets(c: int) -> tuple[bool, float]:
        s = predict(profile, c, prompt, output, measure_s=240.0, max_requests=1500)
        return s.ttft_p95_s <= ttft_slo and s.p99_latency_s <= e2e_slo, s.rps

    ok, rps = meets(1)
    if not ok:
        return 0.0
    lo, hi, best = 1, profile.max_num_seqs, rps
    while lo < hi:  # largest concurrency that meets the SLO (latency grows with concurrency)
        mid = (lo + hi + 1) // 2
        ok, rps = meets(mid)
        if ok:
            lo, best = mid, max(best, rps)
        else:
            hi = mid - 1
    return best


def _round(value: float, step: int) -> int:
    return max(step, int(round(value / step)) * step)


def oracle(
    trace: Trace,
    profile: EngineProfile,
    ttft_slo: float,
    e2e_slo: float,
    interval_s: float = 300.0,
    gpus_per_replica: int = 1,
    min_replicas: int = 0,
) -> OracleResult:
    """Replicas per interval = ceil(arrival rate / per-replica SLO capacity), at least `min_replicas`."""
    end = max(trace.duration, interval_s)
    n = math.ceil(end / interval_s)
    bins = np.minimum((trace.arrivals // interval_s).astype(np.int64), n - 1)
    fits = trace.prompt_tokens + trace.output_tokens <= profile.max_model_len
    replicas = np.zeros(n, dtype=np.int64)
    for i in range(n):
        chosen = (bins == i) & fits
        count = int(chosen.sum())
        if count == 0:
            replicas[i] = min_replicas
            continue
        prompt = _round(float(trace.prompt_tokens[chosen].mean()), PROMPT_STEP)
        output = _round(float(trace.output_tokens[chosen].mean()), OUTPUT_STEP)
        capacity = slo_capacity(profile, prompt, output, ttft_slo, e2e_slo)
        if capacity <= 0:
            raise ValueError(
                f"profile {profile.name!r} cannot meet the SLO (TTFT p95 {ttft_slo}s, e2e p99 {e2e_slo}s) "
                f"even with one request of {prompt}+{output} tokens"
            )
        replicas[i] = max(min_replicas, math.ceil(count / interval_s / capacity))
    lengths = np.minimum(interval_s, end - np.arange(n) * interval_s)
    gpu_hours = float((replicas * lengths).sum()) / 3600 * gpus_per_replica
    return OracleResult(interval_s, replicas, gpu_hours, int(replicas.max()))
