"""KEDA's scalers (v2.20.2): what each trigger reads at an instant, as `pkg/scalers/scaler.go`'s
`Scaler.GetMetricsAndActivity` returns it: the metric, whether the trigger is active, and an
error. Fallback and the HPA (`capacity.sim.control.keda`) take it from there: an error is what
`pkg/fallback` counts towards `failureThreshold`.

Two scalers are modelled: Prometheus (`pkg/scalers/prometheus_scaler.go`) over an instant query
the caller evaluates, and cron (`pkg/scalers/cron_scaler.go`) over its window's activity.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple, Protocol

from capacity.sim.control.cron import CronActivity


class MetricsAndActivity(NamedTuple):
    """`GetMetricsAndActivity`'s three results; on an error there is no metric and no activity."""

    value: float | None  # None: the scaler returned an error
    active: bool
    error: str | None = None

    @classmethod
    def failed(cls, error: str) -> MetricsAndActivity:
        return cls(None, False, error)


class Scaler(Protocol):
    def metrics_and_activity(self, t: float) -> MetricsAndActivity:
        """The trigger's reading at t seconds into the run."""
        ...


class PrometheusUnavailable(Exception):
    """The query API did not answer: the request failed or its status was not 2xx
    (`ExecutePromQuery`'s `return -1, err` before any result is read)."""


# An instant query at t: the value of its one series, or None when the result has no series.
InstantQuery = Callable[[float], float | None]


def _go_float(value: float) -> str:
    """How Go's `%f` prints the values `ExecutePromQuery` refuses."""
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


class PrometheusScaler:
    """`prometheusScaler`: its query's value, active strictly above `activationThreshold`
    (`GetMetricsAndActivity`: `val > s.metadata.ActivationThreshold`).

    As `ExecutePromQuery` reads the result: an empty one (no series) and a NaN or ±Inf value
    are errors, unless `ignoreNullValues`, which reads them as 0."""

    def __init__(self, query: InstantQuery, activation_threshold: float, ignore_null_values: bool) -> None:
        self.query = query
        self.activation_threshold = activation_threshold
        self.ignore_null_values = ignore_null_values

    def metrics_and_activity(self, t: float) -> MetricsAndActivity:
        try:
            value = self.query(t)
        except PrometheusUnavailable as exc:
            return MetricsAndActivity.failed(str(exc))
        if value is None:  # len(result.Data.Result) == 0
            if not self.ignore_null_values:
                return MetricsAndActivity.failed(
                    "prometheus metrics 'prometheus' target may be lost, the result is empty"
                )
            value = 0.0
        elif not math.isfinite(value):  # math.IsInf(v, 0) || math.IsNaN(v)
            if not self.ignore_null_values:
                return MetricsAndActivity.failed(f"prometheus query returns {_go_float(value)}")
            value = 0.0
        return MetricsAndActivity(value, value > self.activation_threshold)


class CronScaler:
    """`cronScaler.GetMetricsAndActivity`: desiredReplicas and active inside the window, 0 and
    inactive outside; it reads no metric, so it never fails once its schedules parse."""

    def __init__(self, activity: CronActivity, desired_replicas: int) -> None:
        self.activity = activity
        self.desired_replicas = desired_replicas

    def metrics_and_activity(self, t: float) -> MetricsAndActivity:
        inside = self.activity.inside(t)
        return MetricsAndActivity(float(self.desired_replicas) if inside else 0.0, inside)
