"""The closed-loop steady state of one replica for one request shape (what a sweep measures)."""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass

import numpy as np

from capacity.engine.profile import EngineProfile
from capacity.engine.replica import ReplicaEngine, Request


@dataclass(frozen=True)
class SteadyState:
    """Closed-loop steady state of one replica for one request shape."""

    profile: str
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    rps: float
    total_tokens_per_s: float
    output_tokens_per_s: float
    p50_latency_s: float
    p95_latency_s: float
    p99_latency_s: float
    ttft_p50_s: float
    ttft_p95_s: float
    avg_waiting: float
    max_waiting: int
    avg_kv_usage: float
    memory_bound_share: float  # of the sampled busy steps, the share bound by memory (the rest: compute)
    completed: int
    measured_s: float


def predict(
    profile: EngineProfile,
    concurrency: int,
    prompt_tokens: int,
    output_tokens: int,
    *,
    warmup_s: float = 30.0,
    measure_s: float = 480.0,
    max_requests: int = 4000,
    client_delay_s: float = 0.005,
    seed: int = 0,
) -> SteadyState:
    """Closed-loop steady state, measured like the calibration run: `concurrency` clients each
    resend as soon as their response arrives (after an exponential client/network delay),
    warm-up then a measured window (cut short after `max_requests` completions)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    rng = random.Random(seed)
    engine = ReplicaEngine(profile)
    arrivals: list[tuple[float, int]] = [(rng.expovariate(1 / client_delay_s), i) for i in range(concurrency)]
    heapq.heapify(arrivals)
    end = warmup_s + measure_s
    sample_every = 0.25
    next_sample = warmup_s
    latencies: list[float] = []
    ttfts: list[float] = []
    waiting_sum = kv_sum = 0.0
    samples = max_waiting = busy = memory_bound = 0
    rid = 0
    t = 0.0
    while True:
        ne = engine.next_event_time()
        t = min(ne if ne is not None else math.inf, arrivals[0][0] if arrivals else math.inf, next_sample)
        if t > end:
            t = end
            break
        for f in engine.advance(t):
            if f.finish_time >= warmup_s:
                latencies.append(f.latency)
                ttfts.append(f.ttft)
            heapq.heappush(arrivals, (f.finish_time + rng.expovariate(1 / client_delay_s), 0))
        while arrivals and arrivals[0][0] <= t:
            at, _ = heapq.heappop(arrivals)
            rid += 1
            engine.submit(Request(rid, at, prompt_tokens, output_tokens), t)
        if t >= next_sample:
            waiting_sum += engine.num_waiting
            kv_sum += engine.kv_usage
            bound = engine.step_bound()
            busy += bound is not None
            memory_bound += bound == "memory"
            max_waiting = max(max_waiting, engine.num_waiting)
            samples += 1
            next_sample += sample_every
        if len(latencies) >= max_requests:
            break
    measured = max(t - warmup_s, 1e-9)
    if not latencies:
        raise ValueError(
            f"no request finished within {warmup_s + measure_s:.0f}s for profile {profile.name!r} "
            f"(concurrency {concurrency}, {prompt_tokens}+{output_tokens} tokens)"
        )
    lat = np.asarray(latencies)
    tt = np.asarray(ttfts)
    rps = len(lat) / measured
    return SteadyState(
        profile=profile.name,
        concurrency=concurrency,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        rps=rps,
        total_tokens_per_s=rps * (prompt_tokens + output_tokens),
        output_tokens_per_s=rps * output_tokens,
        p50_latency_s=float(np.percentile(lat, 50)),
        p95_latency_s=float(np.percentile(lat, 95)),
        p99_latency_s=float(np.percentile(lat, 99)),
        ttft_p50_s=float(np.percentile(tt, 50)),
        ttft_p95_s=float(np.percentile(tt, 95)),
        avg_waiting=waiting_sum / max(samples, 1),
        max_waiting=max_waiting,
        avg_kv_usage=kv_sum / max(samples, 1),
        memory_bound_share=memory_bound / max(busy, 1),
        completed=len(lat),
        measured_s=measured,
    )
