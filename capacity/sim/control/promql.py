"""Prometheus query semantics over scraped samples, for the queries in `contract.signals`.

Only what the KEDA triggers use: `avg_over_time`/`max_over_time` over a range, aggregation across series,
`rate` of histogram buckets (with Prometheus' extrapolation) and `histogram_quantile`.
Range selectors are left-open, (t - window, t], as in Prometheus 3.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np


def in_range(times: Sequence[float], t: float, window: float) -> slice:
    """Indices of the samples with time in (t - window, t]; `times` sorted (a list is fine:
    bisect keeps a query O(log n) on a day-long series)."""
    return slice(bisect_right(times, t - window), bisect_right(times, t))


def avg_over_time(times: Sequence[float], values: Sequence[float], t: float, window: float) -> float | None:
    """Mean of the samples in the range; None when the series has none (absent)."""
    s = in_range(times, t, window)
    if s.stop <= s.start:
        return None
    chosen = values[s]
    return sum(chosen) / len(chosen)


def max_over_time(times: Sequence[float], values: Sequence[float], t: float, window: float) -> float | None:
    """Largest sample in the range; None when the series has none (absent)."""
    s = in_range(times, t, window)
    return max(values[s]) if s.stop > s.start else None


class Spans(NamedTuple):
    """Several series over one range, as Prometheus' `extrapolatedRate` reads each: which of them
    (by position) have two samples in it, the index of their first and last sample in range, and
    per such series (sampled interval, gap to extrapolate over at the start, at the end)."""

    kept: list[int]
    first: list[int]
    last: list[int]
    gaps: np.ndarray  # (len(kept), 3)


def extrapolation_spans(times_of: Iterable[Sequence[float]], t: float, window: float) -> Spans:
    """The spans of the series with these sample times over (t - window, t]: they depend on the
    times only, so the queries of one instant over one range share them."""
    kept, first, last, gaps = [], [], [], []
    since = t - window
    for k, times in enumerate(times_of):
        # the samples in range (`in_range`, inline: a query walks every series); two at least
        start, stop = bisect_right(times, since), bisect_right(times, t)
        if stop - start < 2:
            continue
        # As Prometheus' `extrapolatedRate` takes them: the sampled interval and the gaps it may
        # extrapolate over at the start and the end.
        first_t, last_t = times[start], times[stop - 1]
        sampled = last_t - first_t
        average_gap = sampled / (stop - start - 1)
        threshold = average_gap * 1.1
        to_start = first_t - since
        to_end = t - last_t
        if to_start >= threshold:
            to_start = average_gap / 2
        if to_end >= threshold:
            to_end = average_gap / 2
        kept.append(k)
        first.append(start)
        last.append(stop - 1)
        gaps.append((sampled, to_start, to_end))
    return Spans(kept, first, last, np.array(gaps, dtype=np.float64).reshape(len(gaps), 3))


def extrapolated_increases(spans: Spans, counts_of: Sequence[Sequence[Any]]) -> np.ndarray:
    """`increase(counter[window])` of each series `spans` kept (`counts_of`: their counts, in
    that order), as Prometheus' `extrapolatedRate` computes it: one row per series. Counts hold
    one number per sample (a counter) or one row of columns (a histogram's buckets), each column
    extrapolated on its own. All series at once: numpy's element-wise operations give each value
    to the last bit as the same operations one series at a time would."""
    first = np.array([counts[i] for counts, i in zip(counts_of, spans.first, strict=True)], dtype=np.float64)
    last = np.array([counts[i] for counts, i in zip(counts_of, spans.last, strict=True)], dtype=np.float64)
    # (sampled, to_start, to_end) per series, broadcast over a histogram's columns
    sampled, to_start, to_end = spans.gaps.reshape(len(spans.kept), 3, *(1,) * (first.ndim - 1)).swapaxes(0, 1)
    result = last - first  # series never reset here
    # A counter cannot be extrapolated below zero: the start gap is at most the time to zero, where
    # the counter grew (the division is ignored where it did not).
    with np.errstate(divide="ignore", invalid="ignore"):
        to_zero = sampled * first / result
    start = np.where(result > 0, np.minimum(to_start, to_zero), to_start)
    increases: np.ndarray = result * (sampled + start + to_end) / sampled
    return increases


def histogram_quantile(q: float, bounds: Sequence[float], cumulative: np.ndarray) -> float:
    """Prometheus `histogram_quantile` over cumulative bucket values (last one is +Inf).

    NaN when there are no observations, as in Prometheus."""
    counts = np.maximum.accumulate(np.asarray(cumulative, dtype=np.float64))  # monotonicity fix
    total = counts[-1]
    if not total > 0 or math.isnan(total):
        return math.nan
    rank = q * total
    i = int(np.searchsorted(counts, rank, side="left"))
    if i >= len(bounds):  # rank falls in the +Inf bucket
        return float(bounds[-1])
    upper = float(bounds[i])
    lower = float(bounds[i - 1]) if i > 0 else 0.0
    below = counts[i - 1] if i > 0 else 0.0
    in_bucket = counts[i] - below
    if in_bucket <= 0:
        return upper
    return float(lower + (upper - lower) * (rank - below) / in_bucket)


def positive_or_zero(value: float) -> float:
    """`(expr > 0) or vector(0)`: the quantile queries' guard against NaN and empty results."""
    return value if value > 0 else 0.0


# --- predict_linear over a subquery (Prometheus v3.14.0) --------------------------------------


def subquery_steps(t: float, range_s: float, step_s: float, offset_s: float = 0.0) -> list[float]:
    """The instants `(expr)[range:step] offset o` evaluates `expr` at, for an instant query at
    `t`: every multiple of the step in (t - o - range, t - o], aligned to absolute time, in
    milliseconds as `promql/engine.go` `runSubquery` computes them (`subqStart := subqInterval *
    ((start - offset - range) / subqInterval)`, moved one step on when `<=` that bound; Go's
    integer division truncates toward zero). Sim time is taken as aligned: its t = 0 falls on a
    multiple of every step (a trace starting at a midnight, with steps dividing a day)."""
    t_ms, range_ms, step_ms, offset_ms = (round(x * 1000) for x in (t, range_s, step_s, offset_s))
    bound = t_ms - offset_ms - range_ms
    quotient = abs(bound) // step_ms * (1 if bound >= 0 else -1)  # Go's truncated division
    first = step_ms * quotient
    if first <= bound:
        first += step_ms
    return [ms / 1000 for ms in range(first, t_ms - offset_ms + 1, step_ms)]


def _kahan_inc(inc: float, total: float, c: float) -> tuple[float, float]:
    """`util/kahansum.Inc`: Neumaier's compensated sum."""
    t = total + inc
    if math.isinf(t):
        c = 0.0
    elif abs(total) >= abs(inc):
        c += (total - t) + inc
    else:
        c += (inc - t) + total
    return t, c


def linear_regression(times: Sequence[float], values: Sequence[float], intercept_time: float) -> tuple[float, float]:
    """`promql/functions.go` `linearRegression`: (slope per second, value at `intercept_time`) of
    the least-squares line, with Kahan-compensated sums; a constant series has slope 0 (NaN
    both when that constant is infinite). Times in seconds; Prometheus' are milliseconds, and
    `x := float64(sample.T-interceptTime) / 1e3` subtracts them as integers first."""
    n = sum_x = c_x = sum_y = c_y = sum_xy = c_xy = sum_x2 = c_x2 = 0.0
    init_y = values[0]
    const_y = True
    intercept_ms = round(intercept_time * 1000)
    for i, (t, y) in enumerate(zip(times, values, strict=True)):
        if const_y and i > 0 and y != init_y:
            const_y = False
        n += 1.0
        x = float(round(t * 1000) - intercept_ms) / 1e3
        sum_x, c_x = _kahan_inc(x, sum_x, c_x)
        sum_y, c_y = _kahan_inc(y, sum_y, c_y)
        sum_xy, c_xy = _kahan_inc(x * y, sum_xy, c_xy)
        sum_x2, c_x2 = _kahan_inc(x * x, sum_x2, c_x2)
    if const_y:
        return (math.nan, math.nan) if math.isinf(init_y) else (0.0, init_y)
    sum_x += c_x
    sum_y += c_y
    sum_xy += c_xy
    sum_x2 += c_x2
    cov_xy = sum_xy - sum_x * sum_y / n
    var_x = sum_x2 - sum_x * sum_x / n
    slope = cov_xy / var_x
    return slope, sum_y / n - slope * sum_x / n


def predict_linear(times: Sequence[float], values: Sequence[float], t: float, ahead_s: float) -> float | None:
    """`funcPredictLinear` at `t`: the line through the points, `ahead_s` on; None (the series is
    dropped) with fewer than two points."""
    if len(values) < 2:
        return None
    slope, intercept = linear_regression(times, values, t)
    return slope * ahead_s + intercept
