"""End to end: `history` against a real Prometheus (the OS package) holding two days of backfilled
vLLM series (`promtool tsdb create-blocks-from openmetrics`) with a known diurnal curve and a
known length mix: what it writes is what was served.

The series are shaped as vLLM at the pinned version exposes them (`vllm/v1/metrics/loggers.py`,
PrometheusStatLogger: `vllm:request_success_total` by finished_reason, and the
`vllm:request_prompt_tokens` / `vllm:request_generation_tokens` histograms with
build_1_2_5_buckets(max_model_len) bounds, one observation per finished request), scraped from
two replicas: one serves both days, the other joins on day 1, restarts (its counters reset) and
leaves. Counters grow linearly inside each minute, so Prometheus' `increase` over a minute is
that minute's count exactly, whether its range selector is closed at the start (2.x) or open (3.x).
"""

import contextlib
import io
import itertools
import math
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from capacity.__main__ import main
from capacity.lab.prometheus import find_prometheus, run_prometheus
from capacity.measure.history import MAX_POINTS, range_chunks, read_history
from capacity.measure.prometheus import PrometheusClient
from capacity.mock.metrics import build_1_2_5_buckets
from capacity.workload import rates, traces
from contract.signals import Scope, Vllm

pytestmark = pytest.mark.xdist_group("history-e2e")

MODEL = "qwen-14b"
START = datetime(2024, 5, 13, tzinfo=UTC)  # a Monday
DAYS = 2
MINUTES = DAYS * 1440
END = START + timedelta(minutes=MINUTES)
BOUNDS = build_1_2_5_buckets(4096)  # 1, 2, 5, ..., 2000: longer prompts land in +Inf
# Share of each bucket (the last one is +Inf) and the mean length of its requests: the finite
# buckets' means are their whole numbers' midpoints; the +Inf requests average 3000 tokens.
PROMPT_SHARES = {500: 0.3, 1000: 0.4, 2000: 0.2, math.inf: 0.1}
GENERATION_SHARES = {20: 0.5, 100: 0.3, 200: 0.2}
INF_PROMPT_MEAN = 3000.0
# Replica b: joins at minute 600, restarts at minute 1500, leaves at minute 2200.
B_JOINS, B_RESTARTS, B_LEAVES = 600, 1500, 2200


def _served() -> np.ndarray:
    """Requests per minute: a day's trough-to-peak cycle with seeded noise, none in minute 0."""
    minute = np.arange(MINUTES)
    rng = np.random.default_rng(0)
    served = np.round(40 * (1 - 0.6 * np.cos(2 * np.pi * minute / 1440)) + rng.integers(0, 5, MINUTES))
    served[0] = 0.0  # the first sample of every series in range is 0: increase() needs no extrapolation
    return served


SERVED = _served()


def _shares() -> dict[str, np.ndarray]:
    """Each replica's requests per minute (b serves half while it is up)."""
    b_up = (np.arange(MINUTES) >= B_JOINS) & (np.arange(MINUTES) < B_LEAVES)
    return {"a": np.where(b_up, SERVED / 2, SERVED), "b": np.where(b_up, SERVED / 2, 0.0)}


def _counter(per_minute: np.ndarray, samples_per_minute: int, first: int, last: int, restart: int | None):
    """(unix times, counter values) of a process counting `per_minute` at a steady pace inside
    each minute, scraped `samples_per_minute` times a minute from minute `first` to `last`;
    restarted at minute `restart` (counting from 0 again)."""
    share = np.append(per_minute[first:last], 0.0)
    total = np.concatenate([[0.0], np.cumsum(share[:-1])])
    j = np.arange((last - first) * samples_per_minute + 1)
    whole, part = j // samples_per_minute, (j % samples_per_minute) / samples_per_minute
    values = total[whole] + share[whole] * part
    if restart is not None:
        after = j > (restart - first) * samples_per_minute
        values[after] -= total[restart - first]
    times = START.timestamp() + 60 * first + j * (60 / samples_per_minute)
    return times, values


def _openmetrics() -> str:
    shares = _shares()
    spans = {"a": (0, MINUTES, None), "b": (B_JOINS, B_LEAVES, B_RESTARTS)}
    lines = ["# TYPE vllm:request_success counter"]
    for pod, (first, last, restart) in spans.items():
        for reason, part in (("stop", 0.75), ("length", 0.25)):
            times, values = _counter(shares[pod] * part, 4, first, last, restart)
            labels = f'model_name="{MODEL}",engine="0",pod="{pod}",finished_reason="{reason}"'
            lines += [f"vllm:request_success_total{{{labels}}} {float(v)!r} {t:.3f}" for t, v in zip(times, values)]
    for name, shares_by_bound in (
        (Vllm.REQUEST_PROMPT_TOKENS, PROMPT_SHARES),
        (Vllm.REQUEST_GENERATION_TOKENS, GENERATION_SHARES),
    ):
        lines.append(f"# TYPE {name} histogram")
        for pod, (first, last, restart) in spans.items():
            labels = f'model_name="{MODEL}",engine="0",pod="{pod}"'
            _, requests = _counter(shares[pod], 1, first, last, restart)
            cumulative = {}
            for bound in (*BOUNDS, math.inf):
                cumulative[bound] = requests * sum(s for b, s in shares_by_bound.items() if b <= bound)
            times, total = _counter(shares[pod] * _mean_length(shares_by_bound), 1, first, last, restart)
            for i, t in enumerate(times):
                for bound, values in cumulative.items():
                    le = "+Inf" if math.isinf(bound) else f"{bound:.1f}"
                    lines.append(f'{name}_bucket{{{labels},le="{le}"}} {float(values[i])!r} {t:.3f}')
                lines.append(f"{name}_count{{{labels}}} {float(requests[i])!r} {t:.3f}")
                lines.append(f"{name}_sum{{{labels}}} {float(total[i])!r} {t:.3f}")
    return "\n".join([*lines, "# EOF", ""])


def _mean_length(shares_by_bound: dict[float, float]) -> float:
    lower = dict(zip((*BOUNDS, math.inf), (0, *BOUNDS)))
    return sum(
        share * (INF_PROMPT_MEAN if math.isinf(bound) else (lower[bound] + 1 + bound) / 2)
        for bound, share in shares_by_bound.items()
    )


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    """A Prometheus on the two days, backfilled into a fresh TSDB folder."""
    assert find_prometheus(), "prometheus must be installed (Debian package 'prometheus'): `make system-packages`"
    folder = tmp_path_factory.mktemp("history-e2e")
    (folder / "series.om").write_text(_openmetrics())
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(folder / "series.om"), str(folder / "data")],
        check=True,
        capture_output=True,
        timeout=180,
    )
    # retention is counted back from the newest block, so days in 2024 stay; 10 years for good measure
    with run_prometheus([], data_dir=folder / "data", retention="3650d", ready_timeout_s=60) as url:
        yield url


def _history(url: str, tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["history", "--prometheus", url, "--model", MODEL, "--range", f"{DAYS}d", "--end", rates.iso(END)]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--out", str(tmp_path), *extra])
    return code, out.getvalue(), err.getvalue()


def test_the_curve_is_each_minutes_requests_over_replicas_through_joins_restarts_and_leaves(prometheus, tmp_path):
    code, _, err = _history(prometheus, tmp_path)
    assert code == 0, err
    curve = rates.read_curve(tmp_path / "rates.csv")
    assert curve.start == START
    np.testing.assert_allclose(curve.per_minute, SERVED, rtol=1e-9, atol=1e-9)


def test_a_range_longer_than_one_query_is_read_in_chunks_to_the_same_curve(prometheus):
    client = PrometheusClient(prometheus, timeout_s=60)
    try:
        history = read_history(client, Scope(MODEL), START, END, max_points=1000)
    finally:
        client.close()
    np.testing.assert_allclose(history.curve.per_minute, SERVED, rtol=1e-9, atol=1e-9)
    assert history.empty_minutes == 0


def test_chunks_cover_every_minute_once_within_prometheus_points_limit():
    week_and_a_day = 8 * 1440
    chunks = range_chunks(60.0, 60.0 * week_and_a_day, 60.0)
    points = [round((last - first) / 60) + 1 for first, last in chunks]
    assert sum(points) == week_and_a_day and max(points) <= MAX_POINTS
    assert all(b[0] - a[1] == 60 for a, b in itertools.pairwise(chunks))


def test_the_length_mix_is_each_buckets_requests_over_the_range(prometheus, tmp_path):
    """Within 0.1%: `increase` over the range extrapolates a series that ends inside it (replica
    b) by half a scrape interval (prometheus promql/functions.go, extrapolatedRate)."""
    _history(prometheus, tmp_path)
    mix = rates.read_length_mix(tmp_path / "lengths.csv")
    total = SERVED.sum()
    for buckets, shares in ((mix.prompt, PROMPT_SHARES), (mix.generation, GENERATION_SHARES)):
        expected = [total * shares.get(float(u), 0.0) for u in buckets.upper[: len(BOUNDS)]]
        np.testing.assert_allclose(buckets.requests[: len(BOUNDS)], expected, rtol=1e-3)
        assert buckets.lower[: len(BOUNDS)].tolist() == [0, *BOUNDS[:-1]]
    assert len(mix.generation.upper) == len(BOUNDS)  # no generation above 2000 tokens: no +Inf bucket


def test_the_top_bucket_reaches_as_far_as_the_histograms_sum_says(prometheus, tmp_path):
    _history(prometheus, tmp_path)
    prompt = rates.read_length_mix(tmp_path / "lengths.csv").prompt
    # +Inf requests averaging 3000 tokens, drawn uniformly from 2001..u: u = 2 * 3000 - 2001
    assert (prompt.lower[-1], prompt.upper[-1]) == (2000, 3999)
    assert prompt.requests[-1] == pytest.approx(0.1 * SERVED.sum(), rel=1e-3)


def test_the_printed_spec_replays_the_history_on_its_wall_clock(prometheus, tmp_path):
    _, out, _ = _history(prometheus, tmp_path)
    spec = out.split("--trace ", 1)[1].split()[0].strip("'")
    trace = traces.load(spec)
    assert trace.start == START
    expected = SERVED.sum()
    assert abs(len(trace) - expected) <= 5 * math.sqrt(expected)  # Poisson: 5 standard deviations


def test_a_model_prometheus_never_saw_is_one_line_naming_it(prometheus, tmp_path):
    code, _, err = _history(prometheus, tmp_path, "--model", "nobody")
    assert code == 2
    assert 'no vllm:request_success_total series for {model_name="nobody"}' in err and err.count("\n") == 1
