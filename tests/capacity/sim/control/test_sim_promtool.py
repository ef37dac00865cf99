"""The simulator's Prometheus semantics agree with real Prometheus (promtool) on the exact
trigger queries from `contract.signals`: queue depth, KV usage, the e2e latency quantile."""

import re
import shutil
import subprocess

import numpy as np
import pytest
import yaml

from capacity.sim.control.promql import avg_over_time, extrapolated_increases, extrapolation_spans, histogram_quantile
from contract import signals
from contract.signals import REQUEST_LATENCY_BUCKETS as E2E_LATENCY_BUCKETS

SCRAPE = 15
EVAL_AT = 172  # between scrapes: left-open (Prometheus 3) and closed (2.x) ranges agree
SCOPE = signals.Scope("m")


def series(rng):
    """Per pod: scrape times, waiting and KV gauges, cumulative e2e histogram per scrape."""
    pods = {}
    for pod, samples in (("a", 13), ("b", 13), ("c", 6)):  # c is deleted after 75 s
        times = [SCRAPE * i for i in range(samples)]
        waiting = rng.integers(0, 9, samples).astype(float)
        kv = np.round(rng.uniform(0, 1, samples), 3)
        observations = rng.lognormal(2.5, 0.8, (samples, 40))
        hist = np.cumsum([np.histogram(o, bins=[0, *E2E_LATENCY_BUCKETS, np.inf])[0] for o in observations], axis=0)
        pods[pod] = (times, waiting, kv, np.cumsum(hist, axis=1))  # cumulative over time and over le
    return pods


def promtool_values(pods, queries):
    input_series = []
    for pod, (times, waiting, kv, buckets) in pods.items():
        stale = " stale" if len(times) < 13 else ""
        labels = f'model_name="m",pod="{pod}"'
        input_series.append(
            {
                "series": f"{signals.Vllm.REQUESTS_WAITING}{{{labels}}}",
                "values": " ".join(f"{v:g}" for v in waiting) + stale,
            }
        )
        input_series.append(
            {"series": f"{signals.Vllm.KV_CACHE_USAGE}{{{labels}}}", "values": " ".join(f"{v:g}" for v in kv) + stale}
        )
        for j, le in enumerate([*map(str, E2E_LATENCY_BUCKETS), "+Inf"]):
            input_series.append(
                {
                    "series": f'{signals.Vllm.E2E_LATENCY}_bucket{{{labels},le="{le}"}}',
                    "values": " ".join(str(int(c)) for c in buckets[:, j]) + stale,
                }
            )
    tests = {
        "rule_files": [],
        "evaluation_interval": f"{SCRAPE}s",
        "tests": [
            {
                "interval": f"{SCRAPE}s",
                "input_series": input_series,
                # Expect -1 so promtool prints what it got for every query.
                "promql_expr_test": [
                    {"expr": q, "eval_time": f"{EVAL_AT}s", "exp_samples": [{"labels": "{}", "value": -1}]}
                    for q in queries
                ],
            }
        ],
    }
    return tests


@pytest.fixture(scope="module")
def promtool():
    path = shutil.which("promtool")
    assert path, "promtool is required (Debian package `prometheus`; `make system-packages`)"
    return path


def test_trigger_queries_match_promtool(promtool, tmp_path):
    pods = series(np.random.default_rng(7))
    queries = [
        signals.queue_depth(SCOPE, 60),
        signals.kv_cache_usage(SCOPE),
        signals.e2e_latency_quantile(SCOPE, 0.99, 120),
        signals.e2e_latency_quantile(SCOPE, 0.5, 120),
    ]
    spec = tmp_path / "test.yml"
    spec.write_text(yaml.safe_dump(promtool_values(pods, queries)))
    out = subprocess.run([promtool, "test", "rules", str(spec)], capture_output=True, text=True, timeout=60)
    got = [float(v) for v in re.findall(r"got: \{\} (\S+)", out.stdout + out.stderr)]
    assert len(got) == len(queries), out.stdout + out.stderr

    t = float(EVAL_AT)
    queue = sum(v for times, w, _, _ in pods.values() if (v := avg_over_time(times, list(w), t, 60)) is not None)
    live = [p for name, p in pods.items() if name != "c"]  # c is stale: gone from instant queries
    kv = sum(kvs[int(t // SCRAPE)] for _, _, kvs, _ in live)  # latest sample at or before t
    spans = extrapolation_spans((times for times, _, _, _ in pods.values()), t, 120)
    buckets = [list(b) for _, _, _, b in pods.values()]
    total = sum(extrapolated_increases(spans, [buckets[k] for k in spans.kept]))
    mine = [
        queue,
        kv,
        histogram_quantile(0.99, E2E_LATENCY_BUCKETS, total),
        histogram_quantile(0.5, E2E_LATENCY_BUCKETS, total),
    ]
    assert mine == pytest.approx(got, rel=1e-9)
