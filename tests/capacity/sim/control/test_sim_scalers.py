"""KEDA 2.20.2's scalers: what `GetMetricsAndActivity` returns (pkg/scalers/scaler.go), and how an
error reaches fallback.

Sources: pkg/scalers/prometheus_scaler.go (ExecutePromQuery, GetMetricsAndActivity),
pkg/scalers/cron_scaler.go (GetMetricsAndActivity), pkg/fallback/fallback.go
(GetMetricsWithFallback: fallback once numberOfFailures > failureThreshold)."""

import math
from datetime import UTC, datetime

import pytest

from capacity.sim.control.cron import CronActivity, CronWindow
from capacity.sim.control.hpa import HorizontalPodAutoscaler
from capacity.sim.control.keda import Fallback, KedaTrigger, ScaledObject
from capacity.sim.control.scalers import CronScaler, MetricsAndActivity, PrometheusScaler, PrometheusUnavailable

QUEUE = KedaTrigger("queueDepth", "AverageValue", 4)
NULLS = [None, math.nan, math.inf, -math.inf]
NULL_IDS = ["empty", "NaN", "+Inf", "-Inf"]


def prometheus(result, activation_threshold=0.0, ignore_null_values=False) -> PrometheusScaler:
    """A Prometheus scaler whose query always returns `result` (None: no series)."""
    return PrometheusScaler(lambda t: result, activation_threshold, ignore_null_values)


def unreachable(t):
    raise PrometheusUnavailable("prometheus query api returned error. status: 503")


# --- the Prometheus scaler ------------------------------------------------------------


def test_a_value_is_the_metric():
    assert prometheus(2.5).metrics_and_activity(0.0) == MetricsAndActivity(2.5, True)


def test_an_empty_result_is_an_error():
    # ExecutePromQuery: len(result.Data.Result) == 0 -> "the result is empty" unless IgnoreNullValues
    reading = prometheus(None).metrics_and_activity(0.0)
    assert reading.value is None and not reading.active and "the result is empty" in reading.error


def test_a_nan_value_is_an_error():
    # ExecutePromQuery: math.IsNaN(v) -> "prometheus query returns NaN" unless IgnoreNullValues
    assert prometheus(math.nan).metrics_and_activity(0.0) == MetricsAndActivity.failed("prometheus query returns NaN")


@pytest.mark.parametrize(("value", "shown"), [(math.inf, "+Inf"), (-math.inf, "-Inf")])
def test_an_infinite_value_is_an_error(value, shown):
    # ExecutePromQuery: math.IsInf(v, 0), either sign
    assert prometheus(value).metrics_and_activity(0.0) == MetricsAndActivity.failed(f"prometheus query returns {shown}")


@pytest.mark.parametrize("result", NULLS, ids=NULL_IDS)
def test_ignore_null_values_reads_an_empty_nan_or_infinite_result_as_0(result):
    # ExecutePromQuery: `if s.metadata.IgnoreNullValues { return 0, nil }` on each of those paths
    assert prometheus(result, ignore_null_values=True).metrics_and_activity(0.0) == MetricsAndActivity(0.0, False)


def test_an_unanswered_query_is_an_error_even_with_ignore_null_values():
    # ExecutePromQuery: a failed request or a non-2xx status returns -1, err before any result is read
    reading = PrometheusScaler(unreachable, 0.0, True).metrics_and_activity(0.0)
    assert reading.value is None and "status: 503" in reading.error


@pytest.mark.parametrize(("value", "active"), [(1.9, False), (2.0, False), (2.001, True)])
def test_the_trigger_is_active_strictly_above_its_activation_threshold(value, active):
    # GetMetricsAndActivity: val > s.metadata.ActivationThreshold
    assert prometheus(value, activation_threshold=2.0).metrics_and_activity(0.0).active is active


def test_a_value_read_as_0_is_active_under_a_negative_activation_threshold():
    # the comparison is on the value after ignoreNullValues made it 0
    assert prometheus(None, activation_threshold=-1.0, ignore_null_values=True).metrics_and_activity(0.0).active


# --- errors reach fallback ------------------------------------------------------------


def hpa_syncs(scaler: PrometheusScaler, count: int) -> list[int]:
    """Replicas after each of `count` HPA syncs (15 s apart) at 1 replica, Fallback(4, failureThreshold 3)."""
    so = ScaledObject((QUEUE,), HorizontalPodAutoscaler(1, 10), 1, fallback=Fallback(replicas=4, failure_threshold=3))
    return [so.hpa_sync(15.0 * k, 1, 1, 1, {"queueDepth": scaler.metrics_and_activity(15.0 * k)}) for k in range(count)]


def test_an_empty_result_falls_back_after_failure_threshold_failures():
    # GetMetricsWithFallback: healthStatus.NumberOfFailures > failureThreshold -> doFallback
    assert hpa_syncs(prometheus(None), 5) == [1, 1, 1, 4, 4]


def test_nan_reads_fall_back_instead_of_reading_0():
    assert hpa_syncs(prometheus(math.nan), 5) == [1, 1, 1, 4, 4]


def test_with_ignore_null_values_an_empty_result_reads_0_and_never_falls_back():
    assert hpa_syncs(prometheus(None, ignore_null_values=True), 5) == [1, 1, 1, 1, 1]


# --- the cron scaler ------------------------------------------------------------------

NINE_TO_FIVE = CronWindow("0 9 * * *", "0 17 * * *", "UTC", desired_replicas=3)
MONDAY = datetime(2024, 1, 1, tzinfo=UTC)


def cron(t_hours: float) -> MetricsAndActivity:
    return CronScaler(CronActivity(NINE_TO_FIVE, MONDAY, 86_400.0), 3).metrics_and_activity(t_hours * 3600)


def test_the_cron_scaler_reports_desired_replicas_and_is_active_inside_its_window():
    # cron_scaler.go: metricValue = DesiredReplicas when isWithinInterval, returned with isWithinInterval
    assert cron(12) == MetricsAndActivity(3.0, True)


def test_the_cron_scaler_reports_0_and_is_inactive_outside_its_window():
    assert cron(8) == MetricsAndActivity(0.0, False)
