"""What one model served, read back from its Prometheus over days: the per-minute request curve
and the length mix, the two inputs of a `rates:` trace (`capacity.workload.rates`).

The curve is vLLM's finished-request counter (`Vllm.REQUEST_SUCCESS`, every finish reason)
increased over each minute and summed over replicas; the mix is the increase of the prompt and
generation token histograms' buckets over the whole range. vLLM counts a request when it
finishes, so a minute's count is the requests that ended in it (seconds to minutes after they
arrived); a replica's requests before its first scrape are not seen (`increase` starts at its
first sample).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from capacity.measure.prometheus import PrometheusClient
from capacity.workload.rates import MINUTE_S, Buckets, LengthMix, RateCurve, iso
from contract import signals
from contract.signals import Vllm

STEP_S = 60
# Prometheus refuses a range query with (end - start) / step > 11000: "exceeded maximum resolution
# of 11,000 points per timeseries" (prometheus web/api/v1/api.go, queryRange). A week of minutes
# is 10,080 points; a longer range is split into queries of at most this many points.
MAX_POINTS = 11_000


@dataclass(frozen=True)
class History:
    curve: RateCurve
    mix: LengthMix
    empty_minutes: int  # minutes with no sample at all (Prometheus down, no replica): written as 0


def range_chunks(first: float, last: float, step: float, max_points: int = MAX_POINTS) -> list[tuple[float, float]]:
    """The evaluation times first, first + step, ..., last as [start, end] range queries of at
    most `max_points` points each."""
    count = round((last - first) / step) + 1
    return [(first + i * step, first + (min(i + max_points, count) - 1) * step) for i in range(0, count, max_points)]


def request_curve(
    client: PrometheusClient, scope: signals.Scope, start: float, end: float, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, int]:
    """Requests finished in each minute from `start` to `end` (unix seconds, whole minutes
    apart), and how many minutes had no sample (counted as 0). Minute i is the increase over
    [start + 60 i, start + 60 (i + 1)], evaluated at its end."""
    minutes = round((end - start) / MINUTE_S)
    counts = np.full(minutes, np.nan)
    query = signals.requests_finished(scope, STEP_S)
    for first, last in range_chunks(start + STEP_S, end, STEP_S, max_points):
        for at, value in client.query_range(query, first, last, STEP_S):
            counts[round((at - start) / MINUTE_S) - 1] = value
    empty = int(np.isnan(counts).sum())
    if empty == minutes:
        raise ValueError(
            f"no {Vllm.REQUEST_SUCCESS} series for {scope.matchers()} between {_at(start)} and {_at(end)}: "
            "is the model name (the model_name label) right?"
        )
    return np.nan_to_num(counts, nan=0.0), empty


def token_buckets(client: PrometheusClient, scope: signals.Scope, histogram: str, start: float, end: float) -> Buckets:
    """A token histogram's buckets increased over [start, end]. Its +Inf bucket (lengths above
    the last bound, up to the model's context) gets the upper bound that keeps the histogram's
    total (`_sum`) when every bucket is drawn uniformly."""
    window = round(end - start)
    series = client.vector(signals.histogram_bucket_increase(scope, histogram, window), end)
    if not series:
        raise ValueError(f"no {histogram} series for {scope.matchers()} between {_at(start)} and {_at(end)}")
    cumulative = sorted((float(labels["le"]), value) for labels, value in series)
    bounds = [le for le, _ in cumulative]
    # each bucket is extrapolated on its own: float noise must not make a bucket negative
    counts = np.maximum(np.diff([0.0, *(value for _, value in cumulative)]), 0.0)
    if counts.sum() <= 0:
        raise ValueError(f"{histogram} of {scope.matchers()}: no request finished between {_at(start)} and {_at(end)}")
    lower = [0, *(_tokens(b, histogram) for b in bounds[:-1])]
    upper = [_tokens(b, histogram) for b in bounds[:-1]]
    if not math.isinf(bounds[-1]):  # a histogram always ends at +Inf; guard a partial answer
        raise ValueError(f'{histogram}: no le="+Inf" bucket in Prometheus\' answer')
    finite = sum(c * (lo + 1 + up) / 2 for c, lo, up in zip(counts[:-1], lower, upper))
    if counts[-1] > 0:
        total = client.query(signals.histogram_sum_increase(scope, histogram, window), end) or 0.0
        upper.append(_top_upper(lower[-1], counts[-1], total - finite))
    else:
        counts, lower = counts[:-1], lower[:-1]
    return Buckets(np.array(lower, dtype=np.int64), np.array(upper, dtype=np.int64), counts.astype(float))


def _top_upper(lower: int, count: float, remaining: float) -> int:
    """The upper bound u of whole numbers lower+1..u whose mean, (lower + 1 + u) / 2, is the
    mean the histogram's sum leaves for this bucket (at least one token wide)."""
    return max(lower + 1, round(2 * remaining / count - lower - 1))


def _tokens(bound: float, histogram: str) -> int:
    if not bound.is_integer():
        raise ValueError(f"{histogram}: bucket le={bound:g} is not a whole number of tokens")
    return int(bound)


def _at(unix: float) -> str:
    return iso(datetime.fromtimestamp(unix, UTC))


def read_history(
    client: PrometheusClient, scope: signals.Scope, start: datetime, end: datetime, max_points: int = MAX_POINTS
) -> History:
    """The model's curve and length mix from `start` to `end` (whole minutes apart)."""
    first, last = start.timestamp(), end.timestamp()
    span = last - first
    if span < MINUTE_S or span % MINUTE_S:
        raise ValueError(f"the range must be a whole number of minutes, at least one; got {span:g} s")
    per_minute, empty = request_curve(client, scope, first, last, max_points)
    mix = LengthMix(
        token_buckets(client, scope, Vllm.REQUEST_PROMPT_TOKENS, first, last),
        token_buckets(client, scope, Vllm.REQUEST_GENERATION_TOKENS, first, last),
    )
    return History(RateCurve(per_minute, start.astimezone(UTC)), mix, empty)
