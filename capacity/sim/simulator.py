"""The discrete-event simulation: trace -> router -> engine replicas -> scrapes -> KEDA/HPA.

Time only jumps between events: an arrival, a control tick (Prometheus scrape, HPA sync,
KEDA poll) or a pod or node event (`capacity.sim.events`: ready, spot reclaim, consolidation,
end of drain). Engines advance lazily (analytically inside `ReplicaEngine`) when a request
reaches them or a tick reads them.

The event loop joins modules with one job each: the pods and nodes (`capacity.sim.fleet`),
Prometheus' scraped series and queries (`capacity.sim.metric_store`), a KEDA scaler per trigger
(`capacity.sim.control.scalers`, built here from each `KedaTrigger`), KEDA's ScaledObject and
its HPA (`capacity.sim.control.keda`), and what the run returns (`capacity.sim.results`).
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from capacity.engine import EngineProfile, Request
from capacity.engine.prefix_cache import unit_keys
from capacity.sim.cluster.router import RouterName, make_router
from capacity.sim.cluster.startup import Pool, Startup
from capacity.sim.control.cron import CronActivity, CronWindow
from capacity.sim.control.keda import KedaTrigger, ScaledObject
from capacity.sim.control.scalers import CronScaler, MetricsAndActivity, PrometheusScaler, Scaler
from capacity.sim.events import EventKind, EventQueue
from capacity.sim.fleet import SCRAPED, Fleet, Phase, Pod
from capacity.sim.metric_store import GAUGES, HISTOGRAMS, MetricStore, offered_history
from capacity.sim.results import (
    FAILED,
    OK,
    REJECTED,
    UNFINISHED,
    NodeSpan,
    PrefixCacheCount,
    RequestLog,
    SimResult,
    Timeline,
)
from capacity.workload.traces import Trace
from contract.signals import Query

__all__ = [
    "DEFAULT_START",
    "FAILED",
    "GAUGES",
    "HISTOGRAMS",
    "OK",
    "REJECTED",
    "UNFINISHED",
    "NodeSpan",
    "SimConfig",
    "SimResult",
    "Simulation",
    "Timeline",
    "admissible",
    "simulate",
]

HPA_OFFSET_S = 5.0  # HPA syncs are not aligned with scrapes
POLL_OFFSET_S = 0.0  # KEDA's polling loop checks the scalers as soon as it starts
CLIENT_DELAY_S = 0.005  # closed-loop client turnaround
# Wall clock of t = 0 for traces without one (synthetic): a Monday, 00:00 UTC.
DEFAULT_START = datetime(2024, 1, 1, tzinfo=UTC)
# Looking up an Enum member costs ~0.1 us on Python 3.11: the hot paths compare with these.
_DRAINING, _GONE = Phase.DRAINING, Phase.GONE


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
    # The labels, (label, value), every scraped series of the model carries, against which a
    # trigger's label matchers select; None: labels not modelled, matchers not checked.
    series_labels: tuple[tuple[str, str], ...] | None = None
    # Warm headroom: placeholder pods each holding a GPU node of the pools with the image pulled
    # (capacity/sim/fleet.py); warm at t = 0, like the initial replicas.
    headroom: int = 0


class Simulation:
    """One replay of a trace: the event loop over the fleet, Prometheus, the trigger scalers and
    the ScaledObject; `run` returns the SimResult."""

    def __init__(self, config: SimConfig, trace: Trace, scaled_object: ScaledObject | None) -> None:
        self.c = config
        self.trace = trace
        self.so = scaled_object  # None: a static fleet of `initial_replicas`
        self.events = EventQueue()
        self.fleet = Fleet(
            config.profile,
            config.pools,
            config.startup,
            config.gpus_per_replica,
            config.spot_interruptions_per_hour,
            np.random.default_rng(config.seed),
            self.events,
            spec_replicas=config.initial_replicas,
            headroom=config.headroom,
        )
        history = offered_history(trace.history, config.scrape_interval_s) if trace.history is not None else None
        self.prometheus = MetricStore(config.metrics_outages, history)
        triggers = scaled_object.triggers if scaled_object is not None else ()
        self.scalers = {t.name: self._scaler(t) for t in triggers}
        self.router = make_router(config.router, config.seed)
        arrival = np.array(trace.arrivals, dtype=np.float64)
        self._clients: list[float] = []  # closed loop: next send time per idle client (heap)
        if config.closed_loop_clients:
            arrival[:] = np.nan
            self._clients = [CLIENT_DELAY_S * (k + 1) for k in range(config.closed_loop_clients)]
        self.requests = RequestLog(arrival)
        # The trace's columns as compact arrays of C numbers: the arrival path reads one of each per
        # request, and indexing an `array` is several times cheaper than indexing a numpy array.
        self._prompt_tokens = array("q", trace.prompt_tokens.astype(np.int64).tobytes())
        self._output_tokens = array("q", trace.output_tokens.astype(np.int64).tobytes())
        # each request's chained prefix units (None: the trace has no block ids)
        self._units: tuple[tuple[int, ...], ...] | None = (
            tuple(unit_keys(ids) for ids in trace.block_ids) if trace.block_ids is not None else None
        )
        self.timeline = Timeline(metrics_outages=config.metrics_outages, spot_reclaims=self.fleet.reclaim_notices)
        self._arrived_since_sync = 0
        # Each kind's handler, called with the event's pod or node and the time.
        self._on_event: dict[EventKind, Callable[[Any, float], None]] = {
            EventKind.READY: self.fleet.on_ready,
            EventKind.RECLAIM: self.fleet.on_reclaim,
            EventKind.CONSOLIDATE: self.fleet.on_consolidate,
            EventKind.KILL: self._on_kill,
        }

    def set_replicas(self, desired: int, t: float) -> None:
        """Write the Deployment's spec replicas (the ReplicaSet acts at once)."""
        self.fleet.set_replicas(desired, t)

    # --- requests ----------------------------------------------------------------------
    def _advance(self, pod: Pod, t: float) -> None:
        engine = pod.engine
        if engine is None:
            return
        done = engine.advance(t)
        first_tokens = engine.first_tokens()
        if first_tokens:
            pod.exposition.first_tokens(first_tokens)
        if done:
            self.requests.finish(done)
            pod.exposition.finished(done)
            for f in done:
                del pod.inflight[f.request.id]
            if self.c.closed_loop_clients:
                for f in done:
                    heapq.heappush(self._clients, f.finish_time + CLIENT_DELAY_S)
            if pod.phase == _DRAINING and not pod.inflight:
                self.fleet.release(pod, t)

    @staticmethod
    def _next_engine_event(pod: Pod) -> float:
        t = pod.serving_engine.next_event_time()
        return math.inf if t is None else t

    def _arrive(self, rid: int, t: float) -> None:
        self._arrived_since_sync += 1
        ready = self.fleet.ready
        if not ready:
            self.requests.fail(rid)  # the gateway has no healthy upstream
            return
        # Only the replicas the router looks at need their completions up to date.
        candidates = self.router.candidates(len(ready))
        for k in candidates:
            self._advance(ready[k], t)
        units = self._units
        req = Request(rid, t, self._prompt_tokens[rid], self._output_tokens[rid], () if units is None else units[rid])
        pod = ready[self.router.pick(ready, candidates, req)]
        if self.c.closed_loop_clients:  # an open loop's arrival is the trace's already
            self.requests.sent(rid, t)
        pod.serving_engine.submit(req, t)
        pod.inflight[rid] = req

    def _on_kill(self, pod: Pod, t: float) -> None:
        if pod.phase != Phase.DRAINING:
            return
        self._advance(pod, t)
        if pod.gone:  # drained just in time
            return
        for rid in self.fleet.cut(pod, t):
            self.requests.fail(rid)

    # --- control loop ----------------------------------------------------------------
    def _scrape(self, t: float) -> None:
        for pod in self.fleet.present():
            if pod.phase in SCRAPED:
                self._advance(pod, t)
                if pod.phase != _GONE:
                    self.prometheus.scrape(t, pod)

    def _scaler(self, trigger: KedaTrigger) -> Scaler:
        """The scaler KEDA runs for the trigger: cron over its window, Prometheus over its Query."""
        source = trigger.source
        if isinstance(source, CronWindow):
            return CronScaler(self._cron_activity(source), source.desired_replicas)
        if not isinstance(source, Query):
            raise ValueError(f"trigger {trigger.name!r} has neither a query nor a cron window to simulate")
        try:
            query = self.prometheus.instant_query(source, self._selects(trigger))
        except ValueError as exc:
            raise ValueError(f"trigger {trigger.name!r} reads {exc}") from None
        return PrometheusScaler(query, trigger.activation_threshold, trigger.ignore_null_values)

    def _selects(self, trigger: KedaTrigger) -> bool:
        """Do the trigger's label matchers select the model's series? In PromQL a `label="v"`
        matcher keeps the series whose label equals v, and `label=""` those without the label
        (prometheus/model/labels/matcher.go `Matches`; an absent label reads as ""). A matcher on
        a label the simulated series do not model has no answer here: refused by name."""
        if self.c.series_labels is None:
            return True
        labels = dict(self.c.series_labels)
        for label, value in trigger.matchers:
            if label not in labels and value:
                raise ValueError(
                    f"trigger {trigger.name!r} selects {label}={value!r}: the simulated series carry only "
                    f"{', '.join(f'{k}={v!r}' for k, v in self.c.series_labels)}, so whether it matches is unknown"
                )
            if labels.get(label, "") != value:
                return False
        return True

    def read_scalers(self, t: float) -> dict[str, MetricsAndActivity]:
        """Every trigger's scaler reading at `t`, by trigger name."""
        return {name: scaler.metrics_and_activity(t) for name, scaler in self.scalers.items()}

    def _cron_activity(self, window: CronWindow) -> CronActivity:
        """The cron trigger's window over the simulated span (wall clock from the trace)."""
        span = self.c.closed_loop_s or self.trace.duration + self.c.drain_limit_s
        return CronActivity(window, self.trace.start or DEFAULT_START, span)

    def _sync(self, t: float, since: float) -> None:
        """One HPA sync: the spec replicas (the Deployment's), the status replicas (its pods
        not terminating) and the ready ones."""
        fleet = self.fleet
        readings: dict[str, MetricsAndActivity] = {}
        if self.so is not None:
            readings = self.read_scalers(t)
            desired = self.so.hpa_sync(t, fleet.spec_replicas, len(fleet.alive()), len(fleet.ready), readings)
            self.set_replicas(desired, t)
        # NaN where the scaler failed (the plot leaves a gap).
        signals = {name: math.nan if r.value is None else r.value for name, r in readings.items()}
        arrivals_per_s = self._arrived_since_sync / max(t - since, 1e-9)
        self._arrived_since_sync = 0
        self.timeline.sample(
            t, arrivals_per_s, signals, fleet.spec_replicas, len(fleet.ready), self.requests.latencies()
        )

    def _poll(self, t: float) -> None:
        """KEDA's polling loop: 0 <-> 1 and the floor of minReplicaCount (the HPA leaves a target
        at 0 alone)."""
        assert self.so is not None
        self.set_replicas(self.so.poll(t, self.fleet.spec_replicas, len(self.fleet.ready), self.read_scalers(t)), t)

    # --- main loop ---------------------------------------------------------------------
    def run(self, decided: Callable[[RequestLog], bool] | None = None) -> SimResult:
        """The replay; `decided`, asked at each HPA sync, may end it early (what the caller
        wants to know is settled by the requests so far), returning the result as it stands."""
        c, fleet, events = self.c, self.fleet, self.events
        for _ in range(c.initial_replicas):
            fleet.create_pod(0.0, warm=True)
        fleet.start_headroom(0.0)
        if self.so is not None:
            self.so.last_active = 0.0  # a warm fleet: KEDA saw a trigger active (no instant scale to zero)
        arrivals = array("d", np.asarray(self.trace.arrivals, dtype=np.float64).tobytes())  # read one by one
        n = len(arrivals)
        accepted = admissible(self.trace, c.profile)
        self.requests.outcome[~accepted] = REJECTED
        valid: list[bool] = accepted.tolist()
        closed = c.closed_loop_clients > 0
        stop = c.closed_loop_s if closed else (arrivals[-1] if n else 0.0) + c.drain_limit_s
        next_scrape, next_sync, last_sync = 0.0, HPA_OFFSET_S, 0.0
        next_poll = POLL_OFFSET_S if self.so is not None else math.inf
        polling_interval = self.so.polling_interval_seconds if self.so is not None else math.inf
        i = 0
        t_tick = min(next_scrape, next_sync, next_poll)
        while True:
            if not closed and i < n:
                t = arrivals[i]
                # The common iteration: an arrival strictly before any tick or event (what the
                # general case below does with it, without its comparisons).
                if t < t_tick and t <= stop and t < events.next_time():
                    if valid[i]:
                        self._arrive(i, t)
                    i += 1
                    continue
            t_engine = math.inf
            if closed:
                # Clients react to completions, so engines' own events must be visited.
                t_arrival = self._clients[0] if self._clients and i < n else math.inf
                t_engine = min((self._next_engine_event(p) for p in fleet.ready), default=math.inf)
            else:
                t_arrival = arrivals[i] if i < n else math.inf
            t_event = events.next_time()
            t = min(t_arrival, t_event, t_tick, t_engine)
            if t > stop or (i >= n and not any(p.inflight for p in fleet.present())):
                break
            if t == t_engine and t < min(t_arrival, t_event, t_tick):
                for pod in list(fleet.ready):
                    self._advance(pod, t)
            elif t == t_event:
                kind, target = events.pop()
                self._on_event[kind](target, t)
            elif t == t_tick:
                if t == next_scrape:
                    self._scrape(t)
                    next_scrape += c.scrape_interval_s
                elif t == next_sync:
                    self._sync(t, last_sync)
                    last_sync = t
                    next_sync += c.hpa_sync_s
                    if decided is not None and decided(self.requests):
                        break
                else:
                    self._poll(t)
                    next_poll += polling_interval
                t_tick = min(next_scrape, next_sync, next_poll)
            else:
                if closed:
                    heapq.heappop(self._clients)
                if valid[i]:
                    self._arrive(i, t)
                i += 1
        end = t if math.isfinite(t) else stop
        fleet.cancel_pending()
        for pod in fleet.present():
            if not pod.gone:
                self._advance(pod, end)
                if not pod.gone:  # still serving at the end
                    fleet.release(pod, end)
        fleet.terminate_nodes(end)
        requests = self.requests
        return SimResult(
            arrival=requests.arrival,
            ttft=requests.ttft,
            tpot=requests.tpot,
            e2e=requests.e2e,
            outcome=requests.outcome,
            max_replicas_used=fleet.max_used,
            end_time=end,
            initial_replicas=c.initial_replicas,
            timeline=self.timeline,
            triggers=self.so.triggers if self.so else (),
            nodes=tuple(fleet.node_spans),
            headroom=tuple(fleet.headroom_spans),
            scale_times=tuple(fleet.scale_times),
            prefix_cache=tuple(
                PrefixCacheCount(pod.id, pod.engine.prefix_queries, pod.engine.prefix_hits, pod.engine.external_hits)
                for pod in fleet.pods
                if pod.engine is not None and pod.engine.has_prefix_cache
            ),
        )


def admissible(trace: Trace, profile: EngineProfile) -> np.ndarray:
    """Requests vLLM accepts: within max_model_len and the KV cache (others get a 400)."""
    total = trace.prompt_tokens + trace.output_tokens
    accepted: np.ndarray = (
        (trace.prompt_tokens >= 1)
        & (trace.output_tokens >= 1)
        & (total <= profile.max_model_len)
        & (total + profile.block_size <= profile.kv_cache_tokens)
    )
    return accepted


def simulate(
    config: SimConfig,
    trace: Trace,
    scaled_object: ScaledObject | None,
    decided: Callable[[RequestLog], bool] | None = None,
) -> SimResult:
    """Replay `trace`; without a ScaledObject the fleet is static (`initial_replicas`); see
    `Simulation.run` for `decided`."""
    return Simulation(config, trace, scaled_object).run(decided)
