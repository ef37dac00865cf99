"""Prometheus semantics of the trigger queries."""

import math

import numpy as np
import pytest

from capacity.sim.control.promql import (
    avg_over_time,
    extrapolated_increases,
    extrapolation_spans,
    histogram_quantile,
    positive_or_zero,
)


def increases(series, t, window):
    """extrapolatedRate's increase of each (times, counts) series with two samples in range."""
    spans = extrapolation_spans((times for times, _ in series), t, window)
    return extrapolated_increases(spans, [series[k][1] for k in spans.kept])


def test_avg_over_time_uses_samples_in_the_left_open_window():
    times = [0.0, 15.0, 30.0, 45.0, 60.0]
    values = [100.0, 1.0, 2.0, 3.0, 4.0]
    assert avg_over_time(times, values, t=60.0, window=60.0) == pytest.approx(2.5)


def test_avg_over_time_of_a_series_without_samples_in_range_is_absent():
    assert avg_over_time([0.0, 15.0], [1.0, 1.0], t=200.0, window=60.0) is None


def test_increase_extrapolates_to_the_window_edges():
    # samples every 15 s at 10..100 in a 120 s window ending at 105: counter +1 per second
    times = [float(t) for t in range(10, 101, 15)]
    counts = [[float(t)] for t in times]
    [inc] = increases([(times, counts)], t=105.0, window=120.0)
    # sampled 90 s; start gap 25 s > 1.1 x 15 -> 7.5 s; end gap 5 s kept; zero point at 10 s back
    assert inc[0] == pytest.approx(90 * (90 + 7.5 + 5) / 90)


def test_increase_is_not_extrapolated_below_zero():
    times = [100.0, 115.0]
    counts = [[1.0], [31.0]]
    [inc] = increases([(times, counts)], t=115.0, window=120.0)
    # would start 7.5 s earlier, but the counter reaches 0 after 0.5 s back
    assert inc[0] == pytest.approx(30 * (15 + 0.5) / 15)


def test_increase_needs_two_samples():
    assert len(increases([([10.0], [[1.0]])], t=20.0, window=60.0)) == 0


def test_increases_of_several_series_keep_those_with_two_samples_in_order():
    # each counter started at 0 at the first sample: nothing to extrapolate before it
    one, two = ([0.0, 15.0], [[0.0], [15.0]]), ([0.0, 15.0], [[0.0], [30.0]])
    alone = ([15.0], [[5.0]])
    rows = increases([one, alone, two], t=15.0, window=30.0)
    assert rows[:, 0].tolist() == [15.0, 30.0]


def test_histogram_quantile_interpolates_linearly_inside_the_bucket():
    bounds = (1.0, 2.0, 4.0)
    cumulative = np.array([10.0, 30.0, 40.0, 40.0])  # last is +Inf
    # rank 0.5 x 40 = 20 falls in (1, 2]: 10 below, 20 inside -> 1 + (20 - 10) / 20
    assert histogram_quantile(0.5, bounds, cumulative) == pytest.approx(1.5)


def test_histogram_quantile_in_the_inf_bucket_returns_the_highest_finite_bound():
    assert histogram_quantile(0.99, (1.0, 2.0), np.array([1.0, 2.0, 100.0])) == 2.0


def test_histogram_quantile_without_observations_is_nan_and_the_query_returns_zero():
    value = histogram_quantile(0.99, (1.0,), np.array([0.0, 0.0]))
    assert math.isnan(value)
    assert positive_or_zero(value) == 0.0
