"""What a simulation returns: each request's outcome and latencies, the controller's timeline and
the billed nodes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from capacity.engine.replica import Finished
from capacity.sim.control.keda import KedaTrigger

# Request outcomes.
OK, FAILED, REJECTED, UNFINISHED = range(4)


@dataclass
class Timeline:
    """Sampled at each HPA sync: what the controller saw and did."""

    t: list[float] = field(default_factory=list)
    arrivals_per_s: list[float] = field(default_factory=list)
    signals: dict[str, list[float]] = field(default_factory=dict)
    desired: list[int] = field(default_factory=list)
    ready: list[int] = field(default_factory=list)
    ttft_p95_s: list[float] = field(default_factory=list)
    tpot_p95_s: list[float] = field(default_factory=list)
    e2e_p99_s: list[float] = field(default_factory=list)
    # Events between syncs, for the plot to shade: each spot reclaim notice (the pod has
    # SPOT_WARNING_S left) and each window when the trigger queries failed.
    spot_reclaims: list[float] = field(default_factory=list)
    metrics_outages: tuple[tuple[float, float], ...] = ()

    def sample(
        self,
        t: float,
        arrivals_per_s: float,
        signals: Mapping[str, float],
        desired: int,
        ready: int,
        latencies: tuple[float, float, float],
    ) -> None:
        """One sync's row: `signals` NaN where the scaler failed, `latencies` as `RequestLog.latencies`."""
        self.t.append(t)
        self.arrivals_per_s.append(arrivals_per_s)
        for name, value in signals.items():
            self.signals.setdefault(name, []).append(value)
        self.desired.append(desired)
        self.ready.append(ready)
        ttft, tpot, e2e = latencies
        self.ttft_p95_s.append(ttft)
        self.tpot_p95_s.append(tpot)
        self.e2e_p99_s.append(e2e)


@dataclass(frozen=True)
class NodeSpan:
    """One GPU node's billed life."""

    start: float
    end: float
    capacity_type: str
    gpus: int
    usd_per_gpu_hour: float

    def within(self, start: float, end: float) -> NodeSpan | None:
        """The part of this node's life inside [start, end), or None if none is."""
        lo, hi = max(self.start, start), min(self.end, end)
        return replace(self, start=lo, end=hi) if hi > lo else None

    @property
    def gpu_seconds(self) -> float:
        return (self.end - self.start) * self.gpus


class RequestLog:
    """Per request (trace order), filled in as the run goes: arrival, TTFT, TPOT, e2e, outcome,
    and which requests finished since the timeline's last sample."""

    def __init__(self, arrivals: np.ndarray) -> None:
        """`arrivals`: the trace's, or NaN until sent in a closed loop."""
        n = len(arrivals)
        self.arrival = arrivals
        self.ttft = np.full(n, np.nan)
        self.tpot = np.full(n, np.nan)
        self.e2e = np.full(n, np.nan)
        self.outcome = np.full(n, UNFINISHED, dtype=np.int8)
        self._recent: list[int] = []

    def finish(self, done: Iterable[Finished]) -> None:
        """Requests that completed, with their latencies."""
        for f in done:
            request = f.request
            rid = request.id
            self.ttft[rid] = f.first_token_time - request.arrival
            if request.output_tokens > 1:
                self.tpot[rid] = (f.finish_time - f.first_token_time) / (request.output_tokens - 1)
            self.e2e[rid] = f.finish_time - request.arrival
            self.outcome[rid] = OK
            self._recent.append(rid)

    def sent(self, rid: int, t: float) -> None:
        """The gateway forwarded the request at t (a closed-loop client's send time)."""
        self.arrival[rid] = t

    def fail(self, rid: int) -> None:
        self.outcome[rid] = FAILED

    def latencies(self) -> tuple[float, float, float]:
        """TTFT p95, TPOT p95 and e2e p99 of the requests finished since the last call (NaN if none)."""
        recent = self._recent
        ttft = percentile(self.ttft[recent].tolist(), 95) if recent else math.nan
        tpot = [x for x in self.tpot[recent].tolist() if not math.isnan(x)]
        tpot_p95 = percentile(tpot, 95) if tpot else math.nan
        e2e = percentile(self.e2e[recent].tolist(), 99) if recent else math.nan
        self._recent = []
        return ttft, tpot_p95, e2e


def percentile(values: list[float], q: float) -> float:
    """`np.percentile(values, q)` with its default (linear) method, to the last bit, in plain
    floats: numpy 2's `_quantile` reads the sorted values at index (n - 1) * (q / 100) and
    interpolates as its `_lerp` does (from the upper neighbour once the weight is >= 0.5). The
    timeline asks three per HPA sync, where numpy's call overhead cost more than the sort.
    `values`: not empty, no NaN."""
    ordered = sorted(values)
    index = (len(ordered) - 1) * (q / 100)
    if index >= len(ordered) - 1:
        return ordered[-1]
    below = math.floor(index)
    weight = index - below
    a, b = ordered[below], ordered[below + 1]
    step = b - a
    return b - step * (1 - weight) if weight >= 0.5 else a + step * weight


@dataclass(frozen=True)
class PrefixCacheCount:
    """One replica's prefix-cache counters over its life (vllm:prefix_cache_queries / _hits:
    prompt tokens looked up at admission, and those found in vLLM's cache), and the prompt tokens
    LMCache's CPU tier supplied beyond them."""

    pod: int
    queries: int
    hits: int
    external_hits: int = 0

    @property
    def cached(self) -> int:
        """Prompt tokens not prefilled: found on the GPU or loaded from the CPU tier."""
        return self.hits + self.external_hits


@dataclass
class SimResult:
    """Per request (trace order): arrival, TTFT, TPOT = (e2e - TTFT) / (output tokens - 1)
    (vLLM's per-request `mean_time_per_output_token`; NaN for a single-token output), e2e, outcome."""

    arrival: np.ndarray
    ttft: np.ndarray
    tpot: np.ndarray
    e2e: np.ndarray
    outcome: np.ndarray
    max_replicas_used: int
    end_time: float
    initial_replicas: int
    timeline: Timeline
    triggers: tuple[KedaTrigger, ...]  # what the timeline's signals were compared with
    nodes: tuple[NodeSpan, ...]  # every GPU node, launch to termination: what is billed
    scale_times: tuple[float, ...]  # when spec.replicas changed (one per scale event)
    # per replica that kept a prefix cache (the trace had block ids and the engine caches prefixes)
    prefix_cache: tuple[PrefixCacheCount, ...] = ()
    # the stretches a GPU node held a warm-headroom placeholder (already billed in `nodes`)
    headroom: tuple[NodeSpan, ...] = ()

    @property
    def prefix_cache_hit_rate(self) -> float | None:
        """Fleet-wide share of the prompt tokens looked up that were cached, on the GPU or in
        LMCache's CPU tier (None: no replica kept a prefix cache)."""
        queries = sum(c.queries for c in self.prefix_cache)
        return sum(c.cached for c in self.prefix_cache) / queries if queries else None

    @property
    def gpu_seconds(self) -> dict[str, float]:
        """GPU-seconds billed, by capacity type."""
        billed: dict[str, float] = {}
        for node in self.nodes:
            billed[node.capacity_type] = billed.get(node.capacity_type, 0.0) + node.gpu_seconds
        return billed

    @property
    def headroom_gpu_seconds(self) -> float:
        """GPU-seconds of nodes holding a headroom placeholder (part of `gpu_seconds`)."""
        return sum(span.gpu_seconds for span in self.headroom)

    @property
    def headroom_cost_usd(self) -> float:
        """What holding the headroom cost (part of `cost_usd`)."""
        return sum(span.gpu_seconds / 3600 * span.usd_per_gpu_hour for span in self.headroom)

    @property
    def scale_events(self) -> int:
        return len(self.scale_times)

    @property
    def cost_usd(self) -> float:
        return sum(node.gpu_seconds / 3600 * node.usd_per_gpu_hour for node in self.nodes)
