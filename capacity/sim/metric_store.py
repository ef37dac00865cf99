"""Prometheus in the simulation: each pod's scraped series, and a `contract.signals.Query`
evaluated over them as Prometheus would at an instant.

Every series of one model carries the same `model_name`/`namespace`, so a `by` over them still
gives one series; a series whose pod left the scrape targets is stale at once (Prometheus writes
a staleness marker when a target disappears), so instant vectors skip it while range vectors
still see its samples. A query's result is one value or, when no series is left, empty (None):
an aggregation over an empty vector is empty, and only a query's own `or vector(0)` turns that
into 0. Telling empty from NaN is the scaler's job (`capacity.sim.control.scalers`). The store
keeps only what a query can still read (see `MetricStore`), so a query costs the same on the last
day of a week as in its first hour.
"""

from __future__ import annotations

import math
from bisect import bisect_right, insort
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

import numpy as np

from capacity.sim.control.promql import (
    Spans,
    avg_over_time,
    extrapolated_increases,
    extrapolation_spans,
    histogram_quantile,
    max_over_time,
    positive_or_zero,
    predict_linear,
    subquery_steps,
)
from capacity.sim.control.scalers import InstantQuery, PrometheusUnavailable
from capacity.sim.exposition import E2E_COLUMNS, TTFT_COLUMNS
from capacity.sim.fleet import SCRAPED, Pod
from capacity.workload.traces import History
from contract.signals import REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS, Query, Vllm

LOOKBACK_S = 300.0  # instant-vector lookback of a live series

# The series each pod's scrapes record (`Series`), by the vLLM metric a trigger's Query names:
# gauges (one value per scrape) and histograms (their columns of a scrape's cumulative bucket
# counts, `Series.buckets`, and their bounds).
GAUGES = {Vllm.REQUESTS_RUNNING: "running", Vllm.REQUESTS_WAITING: "waiting", Vllm.KV_CACHE_USAGE: "kv"}
HISTOGRAMS = {Vllm.TTFT: (TTFT_COLUMNS, TTFT_BUCKETS), Vllm.E2E_LATENCY: (E2E_COLUMNS, REQUEST_LATENCY_BUCKETS)}
# Counters the scrapes record, one number per scrape: each histogram's observation count (its
# +Inf bucket) and the prompt tokens.
COUNTERS = {f"{Vllm.TTFT}_count": "ttft_count", f"{Vllm.E2E_LATENCY}_count": "e2e_count"} | {
    Vllm.PROMPT_TOKENS: "prompt_count"
}
_SAMPLES = ("t", *GAUGES.values(), "buckets", *COUNTERS.values())
# An aggregation across series: of numbers, or element-wise of bucket vectors (one value per `le`).
Aggregate = Callable[[Any], Any]


class Series:
    """One pod's samples, one per scrape, in time order (those the store still keeps)."""

    __slots__ = ("pod", *_SAMPLES)

    def __init__(self, pod: Pod) -> None:
        self.pod = pod  # the scrape target, whose phase says whether the series is live
        self.t: list[float] = []
        self.running: list[float] = []
        self.waiting: list[float] = []
        self.kv: list[float] = []
        self.buckets: list[np.ndarray] = []  # both histograms per scrape (`Exposition.scraped_buckets`)
        self.ttft_count: list[float] = []
        self.e2e_count: list[float] = []
        self.prompt_count: list[float] = []

    def drop_before(self, oldest: float) -> bool:
        """Forget the samples at or before `oldest`; did it drop any?"""
        k = bisect_right(self.t, oldest)
        for name in _SAMPLES if k else ():
            del getattr(self, name)[:k]
        return k > 0


_BY_POD = attrgetter("pod.id")


class CounterHistory:
    """One series' prompt-token counter kept for the forecast queries, which read hours or days
    back (`offset`, a trend's subquery): times and counts only, so a day of it costs a few
    numbers per scrape, not the histograms `Series` keeps for minutes."""

    __slots__ = ("count", "id", "t")

    def __init__(self, series_id: int, t: list[float] | None = None, count: list[float] | None = None) -> None:
        self.id = series_id
        self.t: list[float] = t or []
        self.count: list[float] = count or []

    def drop_before(self, oldest: float) -> None:
        k = bisect_right(self.t, oldest)
        if k:
            del self.t[:k], self.count[:k]


def offered_history(history: History, scrape_interval_s: float) -> CounterHistory:
    """The prompt-token counter a fleet that kept up with `history` would have shown, as one
    series scraped every `scrape_interval_s` up to t = 0 (exclusive): each request counted at
    its arrival. A replica counts a prompt when its prefill completes, seconds after arrival for
    a fleet meeting its SLO, and a forecast reads rates over a minute or more; the traffic
    before a simulated day is the offered demand, not a simulation of its own."""
    start = float(history.arrivals[0]) if len(history.arrivals) else 0.0
    k = np.arange(math.floor(start / scrape_interval_s), 0)
    times = k * scrape_interval_s
    counted = np.searchsorted(history.arrivals, times, side="right")
    totals = np.concatenate([[0.0], np.cumsum(history.prompt_tokens)])[counted]
    return CounterHistory(-1, times.tolist(), totals.tolist())


class _Instant:
    """What the queries of one evaluation time share, by range: the series with two samples in
    it and their spans, and the histograms' bucket increases."""

    __slots__ = ("bucket_increases", "spans", "t")

    def __init__(self, t: float) -> None:
        self.t = t
        self.spans: dict[float, tuple[list[Series], Spans]] = {}
        self.bucket_increases: dict[float, np.ndarray] = {}


class MetricStore:
    """The scraped series of the pods, in pod order (an aggregation adds them up in that order,
    so a run is reproducible to the last bit); during an outage, (start, end) seconds, the query
    API does not answer.

    Time only moves forward, and a query reads at most `retention` seconds back (the longest
    range or lookback of the queries made), so every `retention` seconds the store drops the
    samples no query can read again, and the series left without one (their pods are gone):
    memory and the work of a query stay bounded by the fleet, not by the trace's length."""

    def __init__(self, outages: Sequence[tuple[float, float]] = (), history: CounterHistory | None = None) -> None:
        self._series: list[Series] = []
        # The prompt-token counters the forecast queries read, kept `long_retention` seconds (0:
        # no forecast query, none kept); `history`: the traffic before t = 0, one series.
        self._counters: dict[int, CounterHistory] = {} if history is None else {history.id: history}
        self.long_retention = 0.0
        self._next_long_drop = -math.inf
        self._of_pod: dict[int, Series] = {}
        self.outages = tuple(outages)
        self.retention = LOOKBACK_S
        self._next_drop = -math.inf  # when the store next forgets what is older than `retention`
        self._dropped = False
        # What the queries at one instant share, by range (a scrape or a later instant clears it):
        # the spans, and the histograms' increases.
        self._at = _Instant(math.nan)

    def scrape(self, t: float, pod: Pod) -> None:
        """One scrape of a serving pod: its engine's gauges and its exposition's histograms."""
        if t >= self._next_drop:
            self._forget(t)
        if self._at.spans:  # what the queries cached is stale now
            self._at = _Instant(math.nan)
        series = self._of_pod.get(pod.id)
        if series is None:
            series = self._of_pod[pod.id] = Series(pod)
            insort(self._series, series, key=_BY_POD)
        engine, exposed = pod.serving_engine, pod.exposition
        buckets = exposed.scraped_buckets()
        series.t.append(t)
        series.running.append(engine.num_running)
        series.waiting.append(engine.num_waiting)
        series.kv.append(engine.kv_usage)
        series.buckets.append(buckets)
        series.ttft_count.append(float(sum(exposed.ttft_buckets)))  # the +Inf bucket
        series.e2e_count.append(float(sum(exposed.e2e_buckets)))
        series.prompt_count.append(float(exposed.prompt_tokens_total))
        if self.long_retention:
            self.keep_counter(t, pod.id, series.prompt_count[-1])

    def keep_counter(self, t: float, pod_id: int, count: float) -> None:
        """One scrape of a prompt-token counter, kept for the forecast queries (`scrape` calls
        it for every pod while a forecast query is registered)."""
        if t >= self._next_long_drop:
            for counter in self._counters.values():
                counter.drop_before(t - self.long_retention)
            self._counters = {k: c for k, c in self._counters.items() if c.t}
            self._next_long_drop = t + self.long_retention
        kept = self._counters.get(pod_id) or self._counters.setdefault(pod_id, CounterHistory(pod_id))
        kept.t.append(t)
        kept.count.append(count)

    @property
    def samples_kept(self) -> int:
        """Scrapes held over all series: what the store's memory grows with."""
        return sum(len(s.t) for s in self._series)

    def _forget(self, t: float) -> None:
        """Drop what no query at `t` or later reads: samples at or before t - retention, and the
        series with nothing left (amortised O(1) per scrape: it runs once per `retention`)."""
        oldest = t - self.retention
        for series in self._series:
            self._dropped |= series.drop_before(oldest)
        gone = [s for s in self._series if not s.t]
        if gone:
            self._series = [s for s in self._series if s.t]
            for series in gone:
                del self._of_pod[series.pod.id]
        self._next_drop = t + self.retention

    def instant_query(self, query: Query, selects: bool = True) -> InstantQuery:
        """`query` as a function of the evaluation time, which raises PrometheusUnavailable
        during an outage. A ValueError names what the store cannot evaluate. A query whose label
        matchers select none of the series (`selects` False) reads no series: empty, as an
        aggregation over an empty vector is, unless its own `or vector(0)` answers 0."""
        evaluate = self._evaluator(query)  # still refuses what the store cannot evaluate
        if not selects:
            guarded = (query.shape == "quantile" or query.forecast) and query.zero_when_empty
            evaluate = (lambda t: 0.0) if guarded else (lambda t: None)
        if not self.outages:
            return evaluate

        def answered(t: float) -> float | None:
            if any(start <= t < end for start, end in self.outages):
                raise PrometheusUnavailable("prometheus query api returned error. status: 503")
            return evaluate(t)

        return answered

    def _evaluator(self, query: Query) -> InstantQuery:
        aggregate = _AGGREGATE[query.aggregation]
        if query.offset_seconds or query.trend is not None:
            return self._forecast(query, aggregate)
        window = float(query.window_seconds or 0)
        if window > self.retention:
            if self._dropped:  # the samples it would read may be gone already
                raise RuntimeError(f"a {window:g} s range asked after the store kept only {self.retention:g} s")
            self.retention = window
        if query.shape == "quantile" and query.metric in HISTOGRAMS and query.quantile is not None:
            columns, bounds = HISTOGRAMS[query.metric]
            q, guarded = query.quantile, query.zero_when_empty
            return lambda t: self._quantile(t, q, window, columns, bounds, aggregate, guarded)
        gauge = GAUGES.get(query.metric)
        if gauge is not None and query.shape == "sum":
            return lambda t: aggregate(self._latest(t, gauge))
        if gauge is not None and query.shape in _OVER_TIME:
            over_time = _OVER_TIME[query.shape]
            return lambda t: aggregate(
                [
                    v
                    for s in self._in_range(t, window)
                    if (v := over_time(s.t, getattr(s, gauge), t, window)) is not None
                ]
            )
        counter = COUNTERS.get(query.metric)
        if counter is not None and query.shape == "sum_rate":
            return lambda t: aggregate(self._rates(t, window, counter))
        raise ValueError(
            f"{query.metric} ({query.shape}), which the simulator does not record as such: it records the "
            f"gauges {', '.join(GAUGES)} (sum, avg_over_time, max_over_time), the histograms "
            f"{', '.join(HISTOGRAMS)} (quantile) and their counters {', '.join(COUNTERS)} (rate)"
        )

    def _forecast(self, query: Query, aggregate: Aggregate) -> InstantQuery:
        """A look-ahead over the kept prompt-token counters: `AGG(rate(m[w] offset o))`, or
        `predict_linear((AGG(rate(m[w])))[range:step], ahead)` (`promql/functions.go`
        funcPredictLinear over `engine.go` runSubquery's step-aligned instants)."""
        if query.metric != Vllm.PROMPT_TOKENS:
            raise ValueError(
                f"{query.metric} with an offset or a trend: the simulator keeps a long history of "
                f"{Vllm.PROMPT_TOKENS} only"
            )
        window = float(query.window_seconds or 0)
        if self._dropped_long and query.look_back_seconds > self.long_retention:
            raise RuntimeError(f"a {query.look_back_seconds} s look-back asked after the store kept less")
        self.long_retention = max(self.long_retention, float(query.look_back_seconds))
        offset, trend = float(query.offset_seconds), query.trend
        empty = 0.0 if query.zero_when_empty else None  # `or vector(0)`: no history reads 0
        if trend is None:
            return lambda t: _or(aggregate(self._past_rates(t - offset, window)), empty)

        points: dict[float, float | None] = {}  # the inner query's value by instant: each step is read by many polls
        range_s, step_s, ahead_s = trend.range_seconds, trend.step_seconds, trend.ahead_seconds

        def predicted(t: float) -> float | None:
            steps = subquery_steps(t, range_s, step_s)  # never empty: a Trend's range exceeds its step
            for gone in [at for at in points if at < steps[0]]:
                del points[gone]
            for at in steps:
                if at not in points:
                    points[at] = aggregate(self._past_rates(at, window))
            kept = [(at, v) for at in steps if (v := points[at]) is not None]
            return _or(predict_linear([at for at, _ in kept], [v for _, v in kept], t, ahead_s), empty)

        return predicted

    @property
    def _dropped_long(self) -> bool:
        return self._next_long_drop > -math.inf

    def _past_rates(self, at: float, window: float) -> list[float]:
        """`rate(prompt_tokens[window])` at instant `at` (now or earlier) of each kept counter,
        in series order (the traffic before t = 0 first, then the pods by id)."""
        kept = [self._counters[k] for k in sorted(self._counters)]
        spans = extrapolation_spans((c.t for c in kept), at, window)
        rates: list[float] = (extrapolated_increases(spans, [kept[k].count for k in spans.kept]) / window).tolist()
        return rates

    def _in_range(self, t: float, window: float) -> list[Series]:
        """The series with a sample in (t - window, t]."""
        return [s for s in self._series if s.t[-1] > t - window]

    def _latest(self, t: float, gauge: str) -> list[float]:
        """The latest sample of every live series within the lookback (an instant vector)."""
        return [getattr(s, gauge)[-1] for s in self._series if s.pod.phase in SCRAPED and s.t[-1] > t - LOOKBACK_S]

    def _spans(self, t: float, window: float) -> tuple[list[Series], Spans]:
        """The series with two samples in (t - window, t] and their spans, shared by the queries
        of the instant over the same range (the two latency quantiles of a policy, say)."""
        cached = self._instant(t).spans
        if window not in cached:
            in_range = self._in_range(t, window)
            spans = extrapolation_spans((s.t for s in in_range), t, window)
            cached[window] = ([in_range[k] for k in spans.kept], spans)
        return cached[window]

    def _instant(self, t: float) -> _Instant:
        """What the queries at `t` share (a new instant starts empty)."""
        if self._at.t != t:
            self._at = _Instant(t)
        return self._at

    def _bucket_increases(self, t: float, window: float) -> np.ndarray:
        """`increase(bucket[window])` of both histograms' buckets (`Series.buckets` columns) of each
        series with two samples in range, in pod order: one pass serves both quantile queries."""
        cached = self._instant(t).bucket_increases
        if window not in cached:
            series, spans = self._spans(t, window)
            cached[window] = extrapolated_increases(spans, [s.buckets for s in series])
        return cached[window]

    def _increases(self, t: float, window: float, counter: str) -> np.ndarray:
        """`increase(counter[window])` of each series with two samples in range, in pod order."""
        series, spans = self._spans(t, window)
        return extrapolated_increases(spans, [getattr(s, counter) for s in series])

    def _rates(self, t: float, window: float, counter: str) -> list[float]:
        """`rate(counter[window])` per series."""
        rates: list[float] = (self._increases(t, window, counter) / window).tolist()
        return rates

    def _quantile(
        self,
        t: float,
        q: float,
        window: float,
        columns: slice,
        bounds: Sequence[float],
        aggregate: Aggregate,
        guarded: bool,
    ) -> float | None:
        """`histogram_quantile(q, AGG by (le) (rate(metric_bucket[window])))`: empty without a
        series, NaN without an observation; with the guard `(... > 0) or vector(0)`, 0 for both."""
        increases = self._bucket_increases(t, window)
        if not len(increases):
            return 0.0 if guarded else None
        value = histogram_quantile(q, bounds, aggregate(increases[:, columns]))
        return positive_or_zero(value) if guarded else value


def _or(value: float | None, empty: float | None) -> float | None:
    """`value or vector(0)` when `empty` is 0: an empty result (None) reads 0."""
    return empty if value is None else value


# Each aggregation is empty (None) over no series, as in Prometheus. `values`: one number per
# series, or a histogram's increases as rows (one per series) aggregated per `le` column.
def _sum(values: Any) -> Any:
    if not len(values):
        return None
    if isinstance(values, np.ndarray) and values.ndim == 2:
        return np.add.accumulate(values, axis=0)[-1]  # row after row, in series order, as sum() adds
    return sum(values)


def _mean(values: Any) -> Any:
    total = _sum(values)
    return None if total is None else total / len(values)


def _extreme(pick: Callable[..., Any]) -> Aggregate:
    return lambda values: pick(values, axis=0) if len(values) else None


_AGGREGATE: dict[str, Aggregate] = {"sum": _sum, "avg": _mean, "max": _extreme(np.max), "min": _extreme(np.min)}
_OVER_TIME = {"sum_avg_over_time": avg_over_time, "sum_max_over_time": max_over_time}
