"""The discrete-event simulation: trace -> router -> engine replicas -> scrapes -> KEDA/HPA.

Time only jumps between events: an arrival, a control tick (Prometheus scrape, HPA sync,
KEDA poll) or a pod event (ready, spot reclaim, end of drain). Engines advance lazily
(analytically inside `ReplicaEngine`) when a request reaches them or a tick reads them.

The replica lifecycle follows the cluster: the HPA sets the Deployment's replicas; a new
pod binds to an empty GPU node if one is left (weights + engine start only), else a node is
launched in the highest-weight NodePool with room under its `gpuLimit` (else the pod stays
Pending): node launch + image pull + weight load + engine start; only then does vLLM serve
and expose metrics. Scale-in deletes Pending, then starting, then the newest ready pods (the
ReplicaSet's order); a deleted ready pod leaves the router and drains its in-flight
requests; its node stays empty (and billed) for the pool's `consolidateAfter`. A reclaimed
spot node warns 2 minutes ahead: the pod drains, a replacement is created at once, and what
is still running at the deadline fails. GPU-hours are node-hours x GPUs.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import numpy as np

from capacity.engine import EngineProfile, Request, ReplicaEngine
from capacity.sim.cluster.router import RouterName, make_router
from capacity.sim.cluster.startup import Pool, Startup, interruption_delay, place
from capacity.sim.control.cron import CronActivity, CronWindow
from capacity.sim.control.keda import KedaTrigger, ScaledObject
from capacity.sim.control.promql import (
    avg_over_time,
    extrapolated_increase,
    histogram_quantile,
    max_over_time,
    positive_or_zero,
)
from capacity.workload.traces import Trace
from contract.signals import REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS, Query, Vllm

PENDING, STARTING, READY, DRAINING, GONE = range(5)
SPOT_WARNING_S = 120.0  # EC2 spot interruption notice
HPA_OFFSET_S = 5.0  # HPA syncs are not aligned with scrapes
POLL_OFFSET_S = 0.0  # KEDA's polling loop checks the scalers as soon as it starts
LOOKBACK_S = 300.0  # instant-vector lookback of a live series
CLIENT_DELAY_S = 0.005  # closed-loop client turnaround
# Wall clock of t = 0 for traces without one (synthetic): a Monday, 00:00 UTC.
DEFAULT_START = datetime(2024, 1, 1, tzinfo=timezone.utc)

# Request outcomes.
OK, FAILED, REJECTED, UNFINISHED = range(4)

# The series each pod's scrapes record (`_Pod`), by the vLLM metric a trigger's Query names:
# gauges (one value per scrape) and histograms (cumulative bucket counts per scrape, and bounds).
GAUGES = {Vllm.REQUESTS_RUNNING: "running", Vllm.REQUESTS_WAITING: "waiting", Vllm.KV_CACHE_USAGE: "kv"}
HISTOGRAMS = {Vllm.TTFT: ("ttft_counts", TTFT_BUCKETS), Vllm.E2E_LATENCY: ("e2e_counts", REQUEST_LATENCY_BUCKETS)}


@dataclass(frozen=True)
class SimConfig:
    profile: EngineProfile
    pools: tuple[Pool, ...]
    startup: Startup
    gpus_per_replica: int = 1
    spot_interruptions_per_hour: float = 0.0
    scrape_interval_s: float = 15.0
    hpa_sync_s: float = 15.0
    router: RouterName = "least-request"
    seed: int = 0
    initial_replicas: int = 1  # warm at t = 0
    drain_limit_s: float = 3600.0  # simulate at most this long after the last arrival
    # Closed loop (calibration): this many clients each resend `CLIENT_DELAY_S` after their
    # response, for `closed_loop_s`; the trace then only supplies request shapes, in order.
    closed_loop_clients: int = 0
    closed_loop_s: float = 0.0
    # (start, end) seconds when Prometheus cannot be queried: every trigger fails (KEDA fallback).
    metrics_outages: tuple[tuple[float, float], ...] = ()


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


@dataclass(frozen=True)
class NodeSpan:
    """One GPU node's billed life."""

    start: float
    end: float
    capacity_type: str
    gpus: int
    usd_per_gpu_hour: float

    def within(self, start: float, end: float) -> "NodeSpan | None":
        """The part of this node's life inside [start, end), or None if none is."""
        lo, hi = max(self.start, start), min(self.end, end)
        return replace(self, start=lo, end=hi) if hi > lo else None

    @property
    def gpu_seconds(self) -> float:
        return (self.end - self.start) * self.gpus


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

    @property
    def gpu_seconds(self) -> dict[str, float]:
        """GPU-seconds billed, by capacity type."""
        billed: dict[str, float] = {}
        for node in self.nodes:
            billed[node.capacity_type] = billed.get(node.capacity_type, 0.0) + node.gpu_seconds
        return billed

    @property
    def scale_events(self) -> int:
        return len(self.scale_times)

    @property
    def cost_usd(self) -> float:
        return sum(node.gpu_seconds / 3600 * node.usd_per_gpu_hour for node in self.nodes)


class _Pod:
    __slots__ = (
        "id", "phase", "node", "ready_at", "engine", "inflight",
        "t", "running", "waiting", "kv", "ttft_counts", "e2e_counts", "prompt_counts", "ttft_hist", "e2e_hist", "prompt_total",
    )  # fmt: skip

    def __init__(self, pod_id: int) -> None:
        self.id = pod_id
        self.phase = PENDING
        self.node: _Node | None = None
        self.ready_at = math.inf
        self.engine: ReplicaEngine | None = None
        self.inflight: dict[int, Request] = {}
        # scraped series
        self.t: list[float] = []
        self.running: list[float] = []
        self.waiting: list[float] = []
        self.kv: list[float] = []
        self.ttft_counts: list[tuple[int, ...]] = []
        self.e2e_counts: list[tuple[int, ...]] = []
        # live histogram buckets (non-cumulative, last = +Inf)
        self.ttft_hist = [0] * (len(TTFT_BUCKETS) + 1)
        # vllm:prompt_tokens_total, counted when a request's prefill completes (its first token),
        # as vLLM v1 does (vllm/v1/metrics/stats.py IterationStats.update_from_output: is_prefilling);
        # scraped as 1-tuples, like a histogram's count.
        self.prompt_total = 0
        self.prompt_counts: list[tuple[int, ...]] = []
        self.e2e_hist = [0] * (len(REQUEST_LATENCY_BUCKETS) + 1)

    @property
    def outstanding(self) -> int:
        return len(self.inflight)


class _Node:
    """One single-replica GPU node, billed from launch to termination."""

    __slots__ = ("pool", "created", "pod", "idle_since", "reclaimed", "terminated")

    def __init__(self, pool: Pool, created: float) -> None:
        self.pool = pool
        self.created = created
        self.pod: _Pod | None = None
        self.idle_since: float | None = None
        self.reclaimed = False
        self.terminated = False


def _cumulative(hist: list[int]) -> tuple[int, ...]:
    out, total = [], 0
    for c in hist:
        total += c
        out.append(total)
    return tuple(out)


class Simulation:
    def __init__(self, config: SimConfig, trace: Trace, scaled_object: ScaledObject | None) -> None:
        self.c = config
        self.trace = trace
        self.so = scaled_object  # None: a static fleet of `initial_replicas`
        triggers = scaled_object.triggers if scaled_object is not None else ()
        self._cron = {t.name: self._cron_activity(t.source) for t in triggers if isinstance(t.source, CronWindow)}
        self._readers = {t.name: self._reader(t) for t in triggers}
        self.rng = np.random.default_rng(config.seed)
        self.router = make_router(config.router, config.seed)
        self.pods: list[_Pod] = []
        self.ready: list[_Pod] = []
        self.nodes: list[_Node] = []  # launched and not yet terminated
        self.used_gpus: dict[str, int] = {}
        self.events: list[tuple[float, int, str, _Pod | _Node]] = []
        self._seq = 0
        n = len(trace)
        self.ttft = np.full(n, np.nan)
        self.tpot = np.full(n, np.nan)
        self.e2e = np.full(n, np.nan)
        self.outcome = np.full(n, UNFINISHED, dtype=np.int8)
        self.scale_times: list[float] = []
        self.node_spans: list[NodeSpan] = []
        self.spec_replicas = config.initial_replicas  # the Deployment's spec.replicas
        self.max_used = 0
        self.timeline = Timeline(metrics_outages=config.metrics_outages)
        self._arrived_since_sync = 0
        self._recent: list[int] = []  # request ids finished since the last sync
        self.arrival = np.array(trace.arrivals, dtype=np.float64)
        self._clients: list[float] = []  # closed loop: next send time per idle client (heap)
        if config.closed_loop_clients:
            self.arrival[:] = np.nan
            self._clients = [CLIENT_DELAY_S * (k + 1) for k in range(config.closed_loop_clients)]

    # --- nodes and pods ----------------------------------------------------------------
    def _push(self, t: float, kind: str, target: _Pod | _Node) -> None:
        self._seq += 1
        heapq.heappush(self.events, (t, self._seq, kind, target))

    def _alive(self) -> list[_Pod]:
        """Pods the ReplicaSet counts (not terminating)."""
        return [p for p in self.pods if p.phase in (PENDING, STARTING, READY)]

    def _create_pod(self, t: float, warm: bool = False) -> None:
        pod = _Pod(len(self.pods))
        self.pods.append(pod)
        self._schedule(pod, t, warm)

    def _idle_node(self) -> _Node | None:
        """An empty node the scheduler can bind to at once (cheapest pool first, then oldest)."""
        idle = [n for n in self.nodes if n.pod is None and not n.reclaimed]
        return min(idle, key=lambda n: (-n.pool.weight, n.created), default=None)

    def _schedule(self, pod: _Pod, t: float, warm: bool = False) -> bool:
        node = self._idle_node()
        if node is not None:  # the image is already on the node
            startup = self.c.startup.sample_on_node(self.rng)
        else:
            pool = place(self.c.pools, self.used_gpus, self.c.gpus_per_replica)
            if pool is None:
                return False  # Pending until a NodePool has room under its GPU limit
            node = self._launch(pool, t)
            startup = self.c.startup.sample(self.rng)
        node.pod, node.idle_since = pod, None
        pod.node, pod.phase = node, STARTING
        pod.ready_at = t if warm else t + startup
        self._push(pod.ready_at, "ready", pod)
        serving = sum(1 for p in self.pods if p.node is not None and p.phase in (STARTING, READY, DRAINING))
        self.max_used = max(self.max_used, serving)
        return True

    def _launch(self, pool: Pool, t: float) -> _Node:
        node = _Node(pool, t)
        self.nodes.append(node)
        self.used_gpus[pool.name] = self.used_gpus.get(pool.name, 0) + self.c.gpus_per_replica
        if pool.capacity_type == "spot":
            self._push(t + interruption_delay(self.rng, self.c.spot_interruptions_per_hour), "reclaim", node)
        return node

    def _terminate(self, node: _Node, t: float) -> None:
        """The instance is gone: bill it from launch, free its slot under the pool's limit."""
        node.terminated = True
        self.nodes.remove(node)
        self.node_spans.append(NodeSpan(node.created, t, node.pool.capacity_type, self.c.gpus_per_replica,
                                        node.pool.price_per_gpu_hour))  # fmt: skip
        self.used_gpus[node.pool.name] -= self.c.gpus_per_replica
        self._schedule_pending(t)

    def _schedule_pending(self, t: float) -> None:
        for waiting in self.pods:
            if waiting.phase == PENDING and not self._schedule(waiting, t):
                break

    def _release(self, pod: _Pod, t: float) -> None:
        """The pod is gone; its node stays, empty, until consolidation (or goes, if reclaimed)."""
        pod.phase = GONE
        node = pod.node
        if node is None:
            return
        node.pod = None
        after = node.pool.consolidate_after_s
        if node.reclaimed or after <= 0:
            self._terminate(node, t)
            return
        node.idle_since = t
        if math.isfinite(after):
            self._push(t + after, "consolidate", node)
        self._schedule_pending(t)

    def _on_consolidate(self, node: _Node, t: float) -> None:
        if node.terminated or node.pod is not None or node.idle_since is None:
            return
        if t >= node.idle_since + node.pool.consolidate_after_s:  # empty for consolidateAfter
            self._terminate(node, t)

    def _on_ready(self, pod: _Pod, t: float) -> None:
        if pod.phase != STARTING or pod.ready_at != t:
            return
        pod.phase = READY
        pod.engine = ReplicaEngine(self.c.profile, t)
        self.ready.append(pod)

    def _drain(self, pod: _Pod, t: float, deadline: float = math.inf) -> None:
        if pod in self.ready:
            self.ready.remove(pod)
        pod.phase = DRAINING
        if not pod.inflight:
            self._release(pod, t)
        elif deadline < math.inf:
            self._push(deadline, "kill", pod)

    def _delete(self, pod: _Pod, t: float) -> None:
        if pod.phase == READY:
            self._drain(pod, t)
        elif pod.node is None:  # Pending: never had a node
            pod.phase = GONE
        else:  # still starting: nothing to drain
            self._release(pod, t)

    def _on_reclaim(self, node: _Node, t: float) -> None:
        if node.terminated:
            return
        node.reclaimed = True  # cordoned: nothing new lands here
        self.timeline.spot_reclaims.append(t)
        pod = node.pod
        if pod is None:
            self._terminate(node, t)
        elif pod.phase == DRAINING:  # already being deleted: cut at the deadline
            self._push(t + SPOT_WARNING_S, "kill", pod)
        else:
            if pod.phase == READY:
                self._drain(pod, t, t + SPOT_WARNING_S)
            else:
                self._release(pod, t)
            self._create_pod(t)  # the ReplicaSet replaces it at once

    def _on_kill(self, pod: _Pod, t: float) -> None:
        if pod.phase != DRAINING:
            return
        self._advance(pod, t)
        if pod.phase == GONE:  # drained just in time
            return
        for rid in pod.inflight:
            self.outcome[rid] = FAILED
        pod.inflight.clear()
        self._release(pod, t)

    def set_replicas(self, desired: int, t: float) -> None:
        """Write the Deployment's spec replicas; the ReplicaSet creates or deletes pods at once."""
        if desired != self.spec_replicas:
            self.scale_times.append(t)
        self.spec_replicas = desired
        alive = self._alive()
        if desired > len(alive):
            for _ in range(desired - len(alive)):
                self._create_pod(t)
        elif desired < len(alive):
            # ReplicaSet deletion order: unscheduled, then not ready, then newest ready.
            order = sorted(alive, key=lambda p: (p.phase, -p.id))
            for pod in order[: len(alive) - desired]:
                self._delete(pod, t)

    # --- requests ----------------------------------------------------------------------
    def _advance(self, pod: _Pod, t: float) -> None:
        engine = pod.engine
        if engine is None:
            return
        done = engine.advance(t)
        for req, when in engine.first_tokens():
            pod.ttft_hist[bisect_left(TTFT_BUCKETS, when - req.arrival)] += 1
            pod.prompt_total += req.prompt_tokens
        if done:
            for f in done:
                rid = f.request.id
                e2e = f.finish_time - f.request.arrival
                self.ttft[rid] = f.first_token_time - f.request.arrival
                if f.request.output_tokens > 1:
                    self.tpot[rid] = (f.finish_time - f.first_token_time) / (f.request.output_tokens - 1)
                self.e2e[rid] = e2e
                self.outcome[rid] = OK
                pod.e2e_hist[bisect_left(REQUEST_LATENCY_BUCKETS, e2e)] += 1
                del pod.inflight[rid]
                self._recent.append(rid)
                if self.c.closed_loop_clients:
                    heapq.heappush(self._clients, f.finish_time + CLIENT_DELAY_S)
            if pod.phase == DRAINING and not pod.inflight:
                self._release(pod, t)

    @staticmethod
    def _next_engine_event(pod: _Pod) -> float:
        t = pod.engine.next_event_time()  # type: ignore[union-attr]
        return math.inf if t is None else t

    def _arrive(self, rid: int, t: float) -> None:
        self._arrived_since_sync += 1
        if not self.ready:
            self.outcome[rid] = FAILED  # the gateway has no healthy upstream
            return
        # Only the replicas the router looks at need their completions up to date.
        candidates = self.router.candidates(len(self.ready))
        for k in candidates:
            self._advance(self.ready[k], t)
        pod = self.ready[self.router.pick(self.ready, candidates)]
        self.arrival[rid] = t
        req = Request(rid, t, int(self.trace.prompt_tokens[rid]), int(self.trace.output_tokens[rid]))
        pod.engine.submit(req, t)  # type: ignore[union-attr]
        pod.inflight[rid] = req

    # --- control loop ----------------------------------------------------------------
    def _scrape(self, t: float) -> None:
        for pod in self.pods:
            if pod.phase in (READY, DRAINING):
                self._advance(pod, t)
                if pod.phase == GONE:
                    continue
                engine = pod.engine
                pod.t.append(t)
                pod.running.append(engine.num_running)  # type: ignore[union-attr]
                pod.waiting.append(engine.num_waiting)  # type: ignore[union-attr]
                pod.kv.append(engine.kv_usage)  # type: ignore[union-attr]
                pod.ttft_counts.append(_cumulative(pod.ttft_hist))
                pod.e2e_counts.append(_cumulative(pod.e2e_hist))
                pod.prompt_counts.append((pod.prompt_total,))

    def _series(self, t: float, horizon: float) -> list[_Pod]:
        return [p for p in self.pods if p.t and p.t[-1] > t - horizon]

    def _reader(self, trigger: KedaTrigger) -> Callable[[float], float]:
        """The trigger's metric at t: its Query evaluated as Prometheus would, or its cron window."""
        source = trigger.source
        if isinstance(source, CronWindow):
            # desiredReplicas inside the window, 0 outside (KEDA >= 2.18): active exactly inside.
            inside, activity = float(source.desired_replicas), self._cron[trigger.name]
            return lambda t: inside if activity.inside(t) else 0.0
        if not isinstance(source, Query):
            raise ValueError(f"trigger {trigger.name!r} has neither a query nor a cron window to simulate")
        read = self._evaluator(trigger.name, source)
        if not trigger.ignore_null_values:
            return read
        return lambda t: value if math.isfinite(value := read(t)) else 0.0

    def _evaluator(self, name: str, source: Query) -> Callable[[float], float]:
        """`source` over the pods' scraped series. Every series of one model carries the same
        `model_name`/`namespace`, so a `by` over them still gives one series; an aggregation over
        no series is empty (NaN), except `sum`, which reads 0 as the stack's queries always have."""
        aggregate = _AGGREGATE[source.aggregation]
        window = float(source.window_seconds or 0)
        if source.shape == "quantile" and source.metric in HISTOGRAMS:
            counts, bounds = HISTOGRAMS[source.metric]
            q, guarded = float(source.quantile), source.zero_when_empty  # type: ignore[arg-type]
            return lambda t: self._quantile(t, q, window, counts, bounds, aggregate, guarded)
        gauge = GAUGES.get(source.metric)
        if gauge is not None and source.shape == "sum":
            return lambda t: aggregate(self._latest(t, gauge))
        if gauge is not None and source.shape in _OVER_TIME:
            over_time = _OVER_TIME[source.shape]
            return lambda t: aggregate(
                [v for p in self._series(t, window) if (v := over_time(p.t, getattr(p, gauge), t, window)) is not None]
            )
        counter = _COUNTERS.get(source.metric)
        if counter is not None and source.shape == "sum_rate":
            return lambda t: aggregate(self._rates(t, window, counter))
        raise ValueError(
            f"trigger {name!r} reads {source.metric} ({source.shape}), which the simulator does not record as "
            f"such: it records the gauges {', '.join(GAUGES)} (sum, avg_over_time, max_over_time), the histograms "
            f"{', '.join(HISTOGRAMS)} (quantile) and their counters {', '.join(_COUNTERS)} (rate)"
        )

    def _latest(self, t: float, gauge: str) -> list[float]:
        """The latest sample of every live series within the lookback (an instant vector)."""
        live = [p for p in self.pods if p.phase in (READY, DRAINING) and p.t and p.t[-1] > t - LOOKBACK_S]
        return [getattr(p, gauge)[-1] for p in live]

    def _rates(self, t: float, window: float, counts: str) -> list[float]:
        """`rate(metric_count[window])` per series: the +Inf bucket is the observation count."""
        out = []
        for pod in self._series(t, window):
            inc = extrapolated_increase(pod.t, [c[-1:] for c in getattr(pod, counts)], t, window)
            if inc is not None:
                out.append(float(inc[0]) / window)
        return out

    def _quantile(self, t: float, q: float, window: float, counts: str, bounds: Sequence[float],
                  aggregate: Callable[[list], float], guarded: bool) -> float:  # fmt: skip
        """`histogram_quantile(q, AGG by (le) (rate(metric_bucket[window])))`, and with the guard
        `(... > 0) or vector(0)`: 0 instead of NaN when nothing was observed."""
        increases = [
            inc for pod in self._series(t, window)
            if (inc := extrapolated_increase(pod.t, getattr(pod, counts), t, window)) is not None
        ]  # fmt: skip
        value = histogram_quantile(q, bounds, aggregate(increases)) if increases else math.nan
        return positive_or_zero(value) if guarded else value

    def query(self, t: float) -> dict[str, float | None]:
        """Every trigger's metric, evaluated as Prometheus (or KEDA's cron scaler) would at `t`;
        None (the scaler fails) for every Prometheus trigger while Prometheus is down."""
        down = any(start <= t < end for start, end in self.c.metrics_outages)
        return {name: None if down and name not in self._cron else read(t) for name, read in self._readers.items()}

    def _cron_activity(self, window: CronWindow) -> CronActivity:
        """The cron trigger's window over the simulated span (wall clock from the trace)."""
        span = self.c.closed_loop_s or self.trace.duration + self.c.drain_limit_s
        return CronActivity(window, self.trace.start or DEFAULT_START, span)

    def _sync(self, t: float, since: float) -> None:
        """One HPA sync: the spec replicas (the Deployment's), the status replicas (its pods
        not terminating) and the ready ones."""
        values: dict[str, float | None] = {}
        if self.so is not None:
            values = self.query(t)
            status = len(self._alive())
            self.set_replicas(self.so.hpa_sync(t, self.spec_replicas, status, len(self.ready), values), t)
        self._record(t, since, values, self.spec_replicas)

    def _poll(self, t: float) -> None:
        """KEDA's polling loop: 0 <-> 1 and the floor of minReplicaCount (the HPA leaves a target
        at 0 alone)."""
        assert self.so is not None
        self.set_replicas(self.so.poll(t, self.spec_replicas, len(self.ready), self.query(t)), t)

    def _record(self, t: float, since: float, values: dict[str, float | None], desired: int) -> None:
        tl = self.timeline
        tl.t.append(t)
        tl.arrivals_per_s.append(self._arrived_since_sync / max(t - since, 1e-9))
        self._arrived_since_sync = 0
        for name, value in values.items():
            tl.signals.setdefault(name, []).append(math.nan if value is None else value)
        tl.desired.append(desired)
        tl.ready.append(len(self.ready))
        recent = self._recent
        tl.ttft_p95_s.append(float(np.percentile(self.ttft[recent], 95)) if recent else math.nan)
        tpot = self.tpot[recent]
        tpot = tpot[~np.isnan(tpot)]
        tl.tpot_p95_s.append(float(np.percentile(tpot, 95)) if len(tpot) else math.nan)
        tl.e2e_p99_s.append(float(np.percentile(self.e2e[recent], 99)) if recent else math.nan)
        self._recent = []

    # --- main loop ---------------------------------------------------------------------
    def run(self) -> SimResult:
        c = self.c
        for _ in range(c.initial_replicas):
            self._create_pod(0.0, warm=True)
        if self.so is not None:
            self.so.last_active = 0.0  # a warm fleet: KEDA saw a trigger active (no instant scale to zero)
        arrivals = self.trace.arrivals
        n = len(arrivals)
        valid = admissible(self.trace, c.profile)
        self.outcome[~valid] = REJECTED
        closed = c.closed_loop_clients > 0
        stop = c.closed_loop_s if closed else (float(arrivals[-1]) if n else 0.0) + c.drain_limit_s
        next_scrape, next_sync, last_sync = 0.0, HPA_OFFSET_S, 0.0
        next_poll = POLL_OFFSET_S if self.so is not None else math.inf
        i = 0
        while True:
            t_engine = math.inf
            if closed:
                # Clients react to completions, so engines' own events must be visited.
                t_arrival = self._clients[0] if self._clients and i < n else math.inf
                t_engine = min((self._next_engine_event(p) for p in self.ready), default=math.inf)
            else:
                t_arrival = float(arrivals[i]) if i < n else math.inf
            t_event = self.events[0][0] if self.events else math.inf
            t_tick = min(next_scrape, next_sync, next_poll)
            t = min(t_arrival, t_event, t_tick, t_engine)
            if t > stop or (i >= n and not any(p.inflight for p in self.pods)):
                break
            if t == t_engine and t < min(t_arrival, t_event, t_tick):
                for pod in list(self.ready):
                    self._advance(pod, t)
            elif t == t_event:
                _, _, kind, pod = heapq.heappop(self.events)
                getattr(self, f"_on_{kind}")(pod, t)
            elif t == t_tick:
                if t == next_scrape:
                    self._scrape(t)
                    next_scrape += c.scrape_interval_s
                elif t == next_sync:
                    self._sync(t, last_sync)
                    last_sync = t
                    next_sync += c.hpa_sync_s
                else:
                    self._poll(t)
                    next_poll += self.so.polling_interval_seconds  # type: ignore[union-attr]
            else:
                if closed:
                    heapq.heappop(self._clients)
                if valid[i]:
                    self._arrive(i, t)
                i += 1
        end = t if math.isfinite(t) else stop
        for pod in self.pods:
            if pod.phase == PENDING:
                pod.phase = GONE
        for pod in self.pods:
            if pod.phase != GONE:
                self._advance(pod, end)
                if pod.phase != GONE:
                    self._release(pod, end)
        for node in list(self.nodes):
            self._terminate(node, end)
        return SimResult(
            arrival=self.arrival,
            ttft=self.ttft,
            tpot=self.tpot,
            e2e=self.e2e,
            outcome=self.outcome,
            max_replicas_used=self.max_used,
            end_time=end,
            initial_replicas=c.initial_replicas,
            timeline=self.timeline,
            triggers=self.so.triggers if self.so else (),
            nodes=tuple(self.node_spans),
            scale_times=tuple(self.scale_times),
        )



def admissible(trace: Trace, profile: EngineProfile) -> np.ndarray:
    """Requests vLLM accepts: within max_model_len and the KV cache (others get a 400)."""
    total = trace.prompt_tokens + trace.output_tokens
    return (
        (trace.prompt_tokens >= 1)
        & (trace.output_tokens >= 1)
        & (total <= profile.max_model_len)
        & (total + profile.block_size <= profile.kv_cache_tokens)
    )


def _sum(values: list) -> float:
    return sum(values) if values else 0.0


def _mean(values: list) -> float:
    return sum(values) / len(values) if values else math.nan


def _extreme(pick: Callable) -> Callable[[list], float]:
    # Element-wise for bucket vectors (one value per `le`), plain for scalars.
    return lambda values: pick(np.vstack(values), axis=0) if values and isinstance(values[0], np.ndarray) else (
        pick(values) if values else math.nan
    )


_AGGREGATE: dict[str, Callable[[list], float]] = {"sum": _sum, "avg": _mean, "max": _extreme(np.max), "min": _extreme(np.min)}
_OVER_TIME = {"sum_avg_over_time": avg_over_time, "sum_max_over_time": max_over_time}
# Counters the scrapes record: each histogram's observation count.
_COUNTERS = {f"{metric}_count": counts for metric, (counts, _) in HISTOGRAMS.items()} | {Vllm.PROMPT_TOKENS: "prompt_counts"}


def simulate(config: SimConfig, trace: Trace, scaled_object: ScaledObject | None) -> SimResult:
    """Replay `trace`; without a ScaledObject the fleet is static (`initial_replicas`)."""
    return Simulation(config, trace, scaled_object).run()
