"""The forecast triggers' queries, evaluated by the simulator's metric store, agree with real
Prometheus (promtool): `sum(rate(m[w] offset o))` and `predict_linear((sum(rate(m[w])))[r:s], a)`.

Debian's promtool is Prometheus 2.42; the pinned Prometheus (v3.14.0, kube-prometheus-stack
88.5.3's default image) differs in two places this test stays clear of, so both versions give
the same answer: ranges are left-open in 3.x and closed in 2.x (no sample sits on a range's left
bound: 15 s scrapes, a 61 s rate window, evaluation 7 s after a scrape), and a subquery's first
step is moved on when `<=` its bound in 3.14 (`<` in 2.42; the bound here is off the step grid).
`linearRegression` (Kahan sums) and `runSubquery`'s step alignment are the same code in both."""

import re

import numpy as np
import pytest

from capacity.sim.metric_store import CounterHistory, MetricStore
from contract.signals import Query, Scope, Trend, Vllm
from tests.rules.promtool import run_rule_tests

SCRAPE = 15
SAMPLES = 12 * 60  # three hours of 15 s scrapes
EVAL_AT = 3 * 3600 - 53.0  # 7 s after a scrape
SCOPE = Scope("m")
QUERIES = [
    Query(Vllm.PROMPT_TOKENS, "sum_rate", 300, offset_seconds=3600),
    Query(Vllm.PROMPT_TOKENS, "sum_rate", 61, offset_seconds=5400),
    Query(Vllm.PROMPT_TOKENS, "sum_rate", 61, trend=Trend(600, 60, 300)),
    Query(Vllm.PROMPT_TOKENS, "sum_rate", 61, trend=Trend(1800, 120, 900)),
]


def counters(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Three pods' prompt-token counters, one per scrape: a ramp with noise; pod c leaves after
    an hour (its series goes stale, but range vectors still read its samples)."""
    ramp = np.linspace(50, 400, SAMPLES)
    out = {}
    for pod, samples in (("a", SAMPLES), ("b", SAMPLES), ("c", 240)):
        per_scrape = rng.poisson(ramp[:samples] * SCRAPE / 3)
        out[pod] = np.cumsum(per_scrape).astype(float)
    return out


def promtool_got(pods: dict[str, np.ndarray], tmp_path) -> list[float]:
    input_series = [
        {
            "series": f'{Vllm.PROMPT_TOKENS}{{model_name="m",pod="{pod}"}}',
            "values": " ".join(f"{v:g}" for v in counts) + (" stale" if len(counts) < SAMPLES else ""),
        }
        for pod, counts in pods.items()
    ]
    # Expect -1 so promtool prints what it got for every query.
    expected = [
        {"expr": q.promql(SCOPE), "eval_time": f"{EVAL_AT:g}s", "exp_samples": [{"labels": "{}", "value": -1}]}
        for q in QUERIES
    ]
    test = {"interval": f"{SCRAPE}s", "input_series": input_series, "promql_expr_test": expected}
    out = run_rule_tests([], [test], tmp_path, interval=f"{SCRAPE}s")
    got = [float(v) for v in re.findall(r"got: \{\} (\S+)", out.stdout + out.stderr)]
    assert len(got) == len(QUERIES), out.stdout + out.stderr
    return got


def store_values(pods: dict[str, np.ndarray]) -> list[float | None]:
    store = MetricStore()
    evaluate = [store.instant_query(q) for q in QUERIES]
    for k in range(SAMPLES):
        for pod_id, counts in enumerate(pods.values()):
            if k < len(counts):
                store.keep_counter(k * SCRAPE, pod_id, float(counts[k]))
    return [f(EVAL_AT) for f in evaluate]


def test_forecast_queries_match_promtool(tmp_path):
    pods = counters(np.random.default_rng(36))
    assert store_values(pods) == pytest.approx(promtool_got(pods, tmp_path), rel=1e-9)


def test_the_traffic_before_a_run_is_read_as_one_more_series():
    """A day's history (the requests before t = 0) is what an offset query reads early in the run."""
    history = CounterHistory(-1, [float(t) for t in range(-3600, 0, SCRAPE)], [10.0 * k for k in range(240)])
    store = MetricStore(history=history)
    day_ago = store.instant_query(Query(Vllm.PROMPT_TOKENS, "sum_rate", 300, offset_seconds=1800))
    assert day_ago(0.0) == pytest.approx(10.0 / SCRAPE)


def test_a_forecast_with_no_history_reads_zero_not_an_empty_result():
    """`... or vector(0)`: a new cluster's first day forecasts nothing; an empty result would be a
    KEDA error, answered by its fallback."""
    store = MetricStore()
    guarded = store.instant_query(Query(Vllm.PROMPT_TOKENS, "sum_rate", 300, offset_seconds=1800))
    bare = store.instant_query(Query(Vllm.PROMPT_TOKENS, "sum_rate", 300, offset_seconds=1800, zero_when_empty=False))
    assert (guarded(60.0), bare(60.0)) == (0.0, None)
