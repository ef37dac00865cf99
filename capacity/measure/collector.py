"""Read what the autoscaler would have seen: every trigger's query (`contract.triggers`), with the
windows and quantiles of a merged autoscaling policy, plus the load that explains them, evaluated
by Prometheus over a measurement window."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from capacity.measure.prometheus import PrometheusClient
from contract import signals
from contract.settings.autoscaling import ModelAutoscaling
from contract.signals import Query
from contract.triggers import TRIGGERS, Trigger

# The load signals' rate window, model seconds (KEDA's default polling sees a minute of traffic).
RATE_WINDOW_S = 60
# The shortest PromQL window worth asking for: a rate needs two scrapes inside it.
MIN_WINDOW_S = 2

# Not triggers: what the load was, to explain the triggers' readings. `True`: a per-second rate.
LOAD_QUERIES: dict[str, tuple[Callable[[signals.Scope, int], str], bool]] = {
    "requests_running": (lambda scope, window: signals.requests_running(scope), False),
    "requests_waiting": (lambda scope, window: signals.requests_waiting(scope), False),
    "requests_per_second": (signals.requests_per_second, True),
    "generation_tokens_per_second": (signals.generation_tokens_per_second, True),
}


@dataclass(frozen=True)
class NamedQuery:
    name: str  # a trigger's key, or a load signal's name
    query: str
    rate: bool = False  # a per-second rate (scaled back to model time for a sped-up mock)
    additive: bool = False  # a sum over replicas, which KEDA divides by their count (AverageValue)


@dataclass(frozen=True)
class Reading:
    name: str
    query: str
    instant: float | None  # at the end of the window
    mean: float | None  # over the range query's samples
    max: float | None
    samples: list[tuple[float, float]]
    additive: bool = False  # a fleet sum (see NamedQuery)


def wall_window(model_seconds: int, time_scale: float) -> int:
    """A window of model seconds as the wall seconds Prometheus sees of a sped-up mock."""
    return model_seconds if time_scale == 1 else max(MIN_WINDOW_S, round(model_seconds / time_scale))


def _on_wall_clock(query: Query, time_scale: float) -> Query:
    if query.window_seconds is None:
        return query
    return replace(query, window_seconds=wall_window(query.window_seconds, time_scale))


def scaling_queries(
    scope: signals.Scope,
    policy: ModelAutoscaling | None = None,
    *,
    time_scale: float = 1.0,
    triggers: Sequence[Trigger] = TRIGGERS,
) -> list[NamedQuery]:
    """Every trigger's query with the policy's windows and quantiles (the defaults when no policy
    is given), keyed by `Trigger.key`, then the load signals. `time_scale`: model seconds per wall
    second of a sped-up mock, whose windows shrink by it."""
    policy = policy or ModelAutoscaling()
    queries = [
        # a trigger's rate (prompt tokens/s) is per wall second of the mock: scaled back like the load's
        NamedQuery(t.key, _on_wall_clock(query, time_scale).promql(scope), query.shape == "sum_rate", query.additive)
        for t in triggers
        if (query := t.signal(policy)) is not None
    ]
    rate_window = wall_window(RATE_WINDOW_S, time_scale)
    return queries + [NamedQuery(name, build(scope, rate_window), rate) for name, (build, rate) in LOAD_QUERIES.items()]


def collect(
    client: PrometheusClient,
    queries: list[NamedQuery],
    start: float,
    end: float,
    step: float = 1.0,
    time_scale: float = 1.0,
) -> dict[str, Reading]:
    """Every signal over [start, end] (unix seconds): instant value at `end`, range mean and max."""
    if end <= start:
        raise ValueError(f"window end ({end}) must be after its start ({start})")
    out = {}
    for s in queries:
        scale = 1 / time_scale if s.rate else 1.0
        samples = [(t, v * scale) for t, v in client.query_range(s.query, start, end, step)]
        instant = client.query(s.query, end)
        values = [v for _, v in samples]
        out[s.name] = Reading(
            name=s.name,
            query=s.query,
            instant=None if instant is None else instant * scale,
            mean=sum(values) / len(values) if values else None,
            max=max(values) if values else None,
            samples=samples,
            additive=s.additive,
        )
    return out
