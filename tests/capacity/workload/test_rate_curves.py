"""The `rates:` trace kind: a per-minute rate curve replayed as Poisson arrivals with token lengths
from a request-level trace or a vLLM length mix, scaled, windowed, on the curve's wall clock.

Statistical checks are seeded (so they cannot flake) and their tolerances come from Poisson
variance: a count with mean m has standard deviation sqrt(m); 5 standard deviations allowed."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from capacity.workload import rates, traces

SHARED = Path(__file__).resolve().parents[3] / ".." / "shared" / "traces"
START = datetime(2024, 5, 12, tzinfo=UTC)
Z = 5.0


def _curve(directory: Path, per_minute: list[float], start: datetime | None = None) -> Path:
    path = directory / "curve.csv"
    rates.write_curve(path, rates.RateCurve(np.array(per_minute, dtype=float), start))
    return path


def _pairs(directory: Path) -> Path:
    """A request-level trace whose outputs name their prompts: output = prompt + 1000."""
    path = directory / "pairs.csv"
    rows = "".join(f"{i},{p},{p + 1000}\n" for i, p in enumerate((10, 200, 3000, 45)))
    path.write_text("offset_s,prompt_tokens,output_tokens\n" + rows)
    return path


def _spec(curve: Path, lengths: Path, **options: object) -> str:
    extra = "".join(f",{k}={v}" for k, v in options.items())
    return f"rates:{curve}:lengths={lengths}{extra}"


@pytest.fixture
def pairs(tmp_path):
    return _pairs(tmp_path)


def test_each_minutes_count_follows_its_rate_within_poisson_variance(tmp_path, pairs):
    levels = [0.0, 5.0, 60.0, 600.0]
    curve = _curve(tmp_path, levels * 50, START)  # each level in 50 minutes, interleaved
    trace = traces.load(_spec(curve, pairs, seed=3))
    counts = np.bincount((trace.arrivals // 60).astype(int), minlength=200)
    for k, rate in enumerate(levels):
        minutes = counts[k::4]
        assert abs(minutes.mean() - rate) <= Z * np.sqrt(rate / len(minutes)), rate
        assert rate > 0 or minutes.sum() == 0


def test_per_minute_counts_vary_as_poisson_not_as_a_fixed_count(tmp_path, pairs):
    trace = traces.load(_spec(_curve(tmp_path, [100.0] * 400, START), pairs, seed=1))
    counts = np.bincount((trace.arrivals // 60).astype(int), minlength=400)
    # a Poisson count's variance equals its mean; the sample variance of 400 minutes is within ~7% of it
    assert counts.var(ddof=1) == pytest.approx(100.0, rel=Z * np.sqrt(2 / 399))


def test_the_same_seed_gives_the_same_trace_and_another_seed_another(tmp_path, pairs):
    curve = _curve(tmp_path, [30.0] * 10, START)
    first, again, other = (traces.load(_spec(curve, pairs, seed=s)) for s in (7, 7, 8))
    assert np.array_equal(first.arrivals, again.arrivals)
    assert np.array_equal(first.prompt_tokens, again.prompt_tokens)
    assert not np.array_equal(first.arrivals[:10], other.arrivals[:10])


def test_lengths_are_whole_pairs_of_the_source_trace(tmp_path, pairs):
    trace = traces.load(_spec(_curve(tmp_path, [200.0] * 5, START), pairs))
    drawn = set(zip(trace.prompt_tokens.tolist(), trace.output_tokens.tolist()))
    assert drawn == {(10, 1010), (200, 1200), (3000, 4000), (45, 1045)}


def test_lengths_from_a_mix_fall_in_its_buckets_in_its_proportions(tmp_path):
    mix = tmp_path / "mix.csv"
    mix.write_text(
        "histogram,lower,upper,requests\nprompt,0,10,1\nprompt,100,200,3\ngeneration,50,100,2.5\ngeneration,100,101,0\n"
    )
    trace = traces.load(_spec(_curve(tmp_path, [400.0] * 10, START), mix))
    long = (trace.prompt_tokens > 100) & (trace.prompt_tokens <= 200)
    assert np.all(long | ((trace.prompt_tokens >= 1) & (trace.prompt_tokens <= 10)))
    n = len(trace)
    assert abs(long.sum() - 0.75 * n) <= Z * np.sqrt(n * 0.75 * 0.25)
    assert trace.output_tokens.min() >= 51 and trace.output_tokens.max() <= 100


def test_scale_multiplies_the_curves_requests(tmp_path, pairs):
    curve = _curve(tmp_path, [1000.0] * 60, START)
    trace = traces.load(_spec(curve, pairs, scale=0.06))
    expected = 0.06 * 60_000
    assert abs(len(trace) - expected) <= Z * np.sqrt(expected)


def test_mean_scales_the_whole_curve_to_that_many_requests_per_second(tmp_path, pairs):
    curve = _curve(tmp_path, [60.0, 180.0] * 30, START)  # 2 req/s on average
    trace = traces.load(_spec(curve, pairs, mean=0.5))
    expected = 0.5 * 3600
    assert abs(len(trace) - expected) <= Z * np.sqrt(expected)


def test_rate_scale_applies_to_a_rates_trace_like_to_any_other(tmp_path, pairs):
    trace = traces.load(_spec(_curve(tmp_path, [100.0] * 60, START), pairs))
    assert len(traces.rate_scale(trace, 2.0)) == 2 * len(trace)


def test_a_window_is_that_part_of_the_generated_trace_on_its_wall_clock(tmp_path, pairs):
    spec = _spec(_curve(tmp_path, [50.0] * 180, START), pairs, seed=2)
    whole, hour = traces.load(spec), traces.load(spec + "@1h:2h")
    inside = (whole.arrivals >= 3600) & (whole.arrivals < 7200)
    assert np.array_equal(hour.arrivals, whole.arrivals[inside] - 3600)
    assert hour.start == START + timedelta(hours=1)


def test_start_is_the_curves_own_time_unless_start_is_given(tmp_path, pairs):
    curve = _curve(tmp_path, [10.0] * 3, START)
    assert traces.load(_spec(curve, pairs)).start == START
    given = traces.load(_spec(curve, pairs, start="2024-05-13T06:30:00+02:00"))
    assert given.start == datetime(2024, 5, 13, 4, 30, tzinfo=UTC)


def test_a_curve_without_times_needs_start(tmp_path, pairs):
    curve = _curve(tmp_path, [10.0] * 3)
    with pytest.raises(ValueError, match=r"records no start time .* give start=ISO"):
        traces.load(_spec(curve, pairs))
    assert traces.load(_spec(curve, pairs, start="2024-05-12T00:00:00Z")).start == START


def test_paths_holding_colons_commas_and_at_signs_are_read_whole(tmp_path):
    odd = tmp_path / "by:day,v2@1:2"
    odd.mkdir()
    trace = traces.load(_spec(_curve(odd, [60.0] * 3, START), _pairs(odd), seed=0) + "@1m:2m")
    assert trace.start == START + timedelta(minutes=1) and 0 < trace.duration < 60


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("lengths=PAIRS,scale=0.1,mean=2", "scale and mean are mutually exclusive"),
        ("lengths=PAIRS,scale=0", r"scale must be a number > 0, got '0'"),
        ("lengths=PAIRS,mean=fast", r"mean must be a number > 0, got 'fast'"),
        ("lengths=PAIRS,seed=-1", r"seed must be a whole number >= 0, got '-1'"),
        ("lengths=PAIRS,start=monday", r"start 'monday' is not an ISO 8601 date-time"),
        ("lengths=PAIRS,sacle=2", r"unknown key 'sacle'; known: lengths, scale, mean, seed, start"),
        ("lengths=PAIRS,seed=1,seed=2", "seed is given twice"),
        ("scale=1", "lengths=FILE is required"),
        ("lengths=PAIRS@2h:1h", "the window must end after it starts"),
        ("lengths=nowhere.csv", r"lengths=nowhere.csv: trace file nowhere.csv does not exist"),
    ],
)
def test_a_bad_option_is_one_line_naming_the_key_and_the_rule(tmp_path, pairs, options, message):
    curve = _curve(tmp_path, [10.0] * 3, START)
    with pytest.raises(ValueError, match=message) as raised:
        traces.load(f"rates:{curve}:{options.replace('PAIRS', str(pairs))}")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("0,5\n2,5\n", "line 3: minute must be 1"),
        ("0,5\n1,-2\n", "line 3: requests_per_minute must be >= 0"),
        ("0,five\n", "line 2: requests_per_minute must be a number >= 0, got 'five'"),
    ],
)
def test_a_bad_curve_row_is_named_by_its_line(tmp_path, pairs, rows, message):
    curve = tmp_path / "curve.csv"
    curve.write_text("minute,requests_per_minute\n" + rows)
    with pytest.raises(ValueError, match=message):
        traces.load(_spec(curve, pairs, start="2024-05-12T00:00:00Z"))


def test_a_missing_curve_is_named_as_the_rate_curve(tmp_path, pairs):
    with pytest.raises(ValueError, match=r"rate curve .*absent\.csv does not exist"):
        traces.load(_spec(tmp_path / "absent.csv", pairs))


def test_a_curve_whose_times_skip_a_minute_is_refused(tmp_path, pairs):
    curve = tmp_path / "curve.csv"
    curve.write_text("minute,requests_per_minute,time\n0,1,2024-05-12T00:00:00Z\n1,1,2024-05-12T00:02:00Z\n")
    with pytest.raises(ValueError, match="line 3: time must be 2024-05-12T00:01:00Z"):
        traces.load(_spec(curve, pairs))


def test_a_mix_bucket_with_upper_not_above_lower_is_named_by_its_line(tmp_path):
    mix = tmp_path / "mix.csv"
    mix.write_text("histogram,lower,upper,requests\nprompt,10,10,1\ngeneration,0,1,1\n")
    with pytest.raises(ValueError, match="line 2: lower and upper must be whole token counts, 0 <= lower < upper"):
        traces.load(_spec(_curve(tmp_path, [1.0], START), mix))


def test_a_curve_and_a_mix_read_back_as_written(tmp_path):
    curve = rates.RateCurve(np.array([0.5, 1234567.25, 0.0]), START)
    rates.write_curve(tmp_path / "c.csv", curve)
    back = rates.read_curve(tmp_path / "c.csv")
    assert back.per_minute.tolist() == curve.per_minute.tolist() and back.start == START
    buckets = rates.Buckets(np.array([0, 1]), np.array([1, 2]), np.array([3.5, 4.0]))
    rates.write_length_mix(tmp_path / "m.csv", rates.LengthMix(buckets, buckets))
    mix = rates.read_length_mix(tmp_path / "m.csv")
    assert mix.generation.requests.tolist() == [3.5, 4.0] and mix.prompt.upper.tolist() == [1, 2]


@pytest.mark.skipif(not (SHARED / "azure2024-conv-5days-rates.csv").is_file(), reason="../shared/traces absent")
def test_one_day_of_the_shared_five_at_six_percent_starts_on_thursday():
    curve = rates.read_curve(SHARED / "azure2024-conv-5days-rates.csv")
    spec = _spec(SHARED / "azure2024-conv-5days-rates.csv", SHARED / "azure-llm-2023-conv.csv", scale=0.06)
    day = traces.load(spec + ",start=2024-05-12T00:00:00Z@4d:5d")
    expected = 0.06 * curve.per_minute[4 * 1440 :].sum()
    assert abs(len(day) - expected) <= Z * np.sqrt(expected)
    assert day.start == datetime(2024, 5, 16, tzinfo=UTC) and day.start.strftime("%A") == "Thursday"


def test_a_recorded_spec_rebased_moves_its_relative_paths_and_keeps_the_rest():
    root = Path("/project")
    spec = "rates:traces/c.csv:lengths=l:x.csv,scale=0.06,start=2024-05-12T00:00:00Z@4d:5d"
    assert traces.rebased(spec, root) == (
        "rates:/project/traces/c.csv:lengths=/project/l:x.csv,scale=0.06,start=2024-05-12T00:00:00Z@4d:5d"
    )
    assert traces.rebased("week.csv@2d:3d", root) == "/project/week.csv@2d:3d"
    assert traces.rebased("synthetic:step:base=2", root) == "synthetic:step:base=2"
