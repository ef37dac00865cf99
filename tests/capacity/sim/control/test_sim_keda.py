"""KEDA 2.20.2: metric values, fallback and activation, on top of the HPA model.

Sources: pkg/scalers/scaler.go (quantityFromFloat64), pkg/fallback/fallback.go
(GetMetricsWithFallback, doFallback), pkg/scaling/scale_handler.go (getScalerState),
pkg/scaling/executor/scale_scaledobjects.go (RequestScale, scaleToZeroOrIdle),
pkg/scalers/cron_scaler.go (GetMetricsAndActivity)."""

import math
from datetime import UTC, datetime

import pytest

from capacity.sim.control.cron import CronActivity, CronWindow
from capacity.sim.control.hpa import HorizontalPodAutoscaler, HpaBehavior, HpaScalingPolicy, HpaScalingRules
from capacity.sim.control.keda import (
    Fallback,
    KedaTrigger,
    ScaledObject,
    fallback_metric,
    fallback_replicas,
    milli,
    proposal,
)
from capacity.sim.control.scalers import CronScaler, MetricsAndActivity, PrometheusScaler

FAST = HpaBehavior(
    HpaScalingRules(0, "Max", (HpaScalingPolicy("Percent", 1000, 15),)),
    HpaScalingRules(0, "Max", (HpaScalingPolicy("Percent", 100, 15),)),
)
QUEUE = KedaTrigger("queueDepth", "AverageValue", 4)
KV = KedaTrigger("kvCache", "AverageValue", 0.7)
LATENCY = KedaTrigger("e2eLatency", "Value", 40)
CRON = KedaTrigger("cron", "AverageValue", 1.0)
# A cron trigger asking for one replica from 08:00 to 20:00 UTC, over a day from a Monday midnight.
ONE_REPLICA_BY_DAY = CronWindow("0 8 * * *", "0 20 * * *", "UTC", desired_replicas=1)
MONDAY = datetime(2024, 1, 1, tzinfo=UTC)
HOUR = 3600.0


def readings(**values: float | None) -> dict[str, MetricsAndActivity]:
    """Each trigger's reading as a Prometheus scaler (activationThreshold 0, ignoreNullValues
    false) returns it for a query result of this value; None, an empty result, is an error."""
    return {
        name: PrometheusScaler(lambda t, v=v: v, 0.0, False).metrics_and_activity(0.0) for name, v in values.items()
    }


def cron_reading(t: float) -> MetricsAndActivity:
    return CronScaler(CronActivity(ONE_REPLICA_BY_DAY, MONDAY, 24 * HOUR), 1).metrics_and_activity(t)


def scaled_object(min_replicas=1, fallback=None, triggers=(QUEUE, LATENCY), cooldown=300):
    return ScaledObject(
        triggers=triggers,
        hpa=HorizontalPodAutoscaler(max(min_replicas, 1), 10, FAST),
        min_replica_count=min_replicas,
        cooldown_period_seconds=cooldown,
        fallback=fallback,
    )


# --- values as the HPA reads them -------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [(2.1, 2100), (0.7, 700), (1.2345, 1234), (0.0004, 0), (12.0, 12000), (math.nan, 0), (math.inf, 0), (-1.0, 0)],
)
def test_keda_hands_values_over_with_three_decimals(value, expected):
    # quantityFromFloat64: resource.MustParse(fmt.Sprintf("%.3f", value)); NaN, Inf, negatives -> 0
    assert milli(value) == expected


def test_a_kv_sum_of_2_1_against_0_7_asks_for_3_replicas_not_4():
    assert proposal(KV, milli(2.1), spec_replicas=1, status_replicas=1, ready_replicas=1) == 3


def test_average_value_trigger_divides_the_sum_by_the_target():
    assert proposal(QUEUE, milli(13), spec_replicas=2, status_replicas=2, ready_replicas=2) == 4


def test_value_trigger_is_not_divided_by_replica_count():
    # the pitfall: a p99 latency as AverageValue would be divided by the replica count
    assert proposal(LATENCY, milli(60), spec_replicas=4, status_replicas=4, ready_replicas=4) == 6


def test_hpa_takes_the_max_over_triggers():
    so = scaled_object()
    assert so.hpa_sync(0, 2, 2, 2, readings(queueDepth=4, e2eLatency=100)) == 5


# --- fallback ---------------------------------------------------------------------------


def test_fallback_engages_only_after_more_than_failure_threshold_failures():
    so = scaled_object(fallback=Fallback(replicas=3, failure_threshold=2), triggers=(QUEUE,))
    assert so.hpa_sync(0, 1, 1, 1, readings(queueDepth=None)) == 1
    assert so.hpa_sync(15, 1, 1, 1, readings(queueDepth=None)) == 1
    assert so.hpa_sync(30, 1, 1, 1, readings(queueDepth=None)) == 3


def test_a_good_value_resets_the_failure_count():
    so = scaled_object(fallback=Fallback(replicas=3, failure_threshold=1), triggers=(QUEUE,))
    so.hpa_sync(0, 1, 1, 1, readings(queueDepth=None))
    so.hpa_sync(15, 1, 1, 1, readings(queueDepth=1))
    assert so.hpa_sync(30, 1, 1, 1, readings(queueDepth=None)) == 1


def test_the_polling_loop_counts_failures_too():
    # both loops call GetMetricsWithFallback, which bumps status.health[metric].numberOfFailures
    so = scaled_object(fallback=Fallback(replicas=3, failure_threshold=2), triggers=(QUEUE,))
    so.hpa_sync(0, 1, 1, 1, readings(queueDepth=None))
    so.poll(0, 1, 1, readings(queueDepth=None))
    assert so.hpa_sync(15, 1, 1, 1, readings(queueDepth=None)) == 3  # third failure, not the first two syncs


def test_the_hpa_asks_for_no_metric_while_the_target_is_at_zero():
    so = scaled_object(fallback=Fallback(replicas=3, failure_threshold=0), triggers=(QUEUE,))
    so.hpa_sync(0, 0, 0, 0, readings(queueDepth=None))
    assert so.failures == {}


def test_fallback_scales_down_to_fallback_replicas():
    so = scaled_object(fallback=Fallback(replicas=2, failure_threshold=0), triggers=(QUEUE,))
    assert so.hpa_sync(0, 6, 6, 6, readings(queueDepth=None)) == 2


def test_a_fractional_target_falls_back_to_exactly_the_fallback_replicas():
    # doFallback: int64(target x 1000 x replicas) milli; the 0.7 target is not truncated to 0
    assert fallback_metric(KV, Fallback(3), spec_replicas=1, ready_replicas=1) == 2100
    so = scaled_object(fallback=Fallback(replicas=3, failure_threshold=0), triggers=(KV,))
    assert so.hpa_sync(0, 1, 1, 1, readings(kvCache=None)) == 3


def test_a_value_trigger_falls_back_through_the_ready_pods():
    # doFallback for Value: target x replicas / ready pods, so the HPA's ceil(ratio x ready) = replicas
    assert fallback_metric(LATENCY, Fallback(3), spec_replicas=2, ready_replicas=2) == 60_000
    so = scaled_object(fallback=Fallback(replicas=3, failure_threshold=0), triggers=(LATENCY,))
    assert so.hpa_sync(0, 2, 2, 2, readings(e2eLatency=None)) == 3


def test_a_value_trigger_without_ready_pods_cannot_fall_back():
    assert fallback_metric(LATENCY, Fallback(3), spec_replicas=2, ready_replicas=0) is None
    so = scaled_object(fallback=Fallback(replicas=3, failure_threshold=0), triggers=(QUEUE, LATENCY))
    # the Value metric stays invalid, which blocks the scale-down the queue's 0 would ask for
    assert so.hpa_sync(0, 5, 5, 0, readings(queueDepth=0, e2eLatency=None)) == 5


def test_current_replicas_behaviors_read_the_spec_replicas():
    # resolver.GetCurrentReplicas: the Deployment's spec.replicas, not its pods
    assert fallback_replicas(Fallback(2, behavior="currentReplicasIfHigher"), spec_replicas=5) == 5
    assert fallback_replicas(Fallback(2, behavior="currentReplicasIfLower"), spec_replicas=5) == 2
    assert fallback_replicas(Fallback(2, behavior="currentReplicas"), spec_replicas=1) == 1
    assert fallback_replicas(Fallback(2), spec_replicas=5) == 2
    so = scaled_object(fallback=Fallback(2, failure_threshold=0, behavior="currentReplicas"), triggers=(QUEUE,))
    assert so.hpa_sync(0, 4, 3, 2, readings(queueDepth=None)) == 4  # spec 4, 3 pods, 2 ready


def test_without_fallback_an_invalid_metric_blocks_scale_down():
    so = scaled_object()
    assert so.hpa_sync(0, 5, 5, 5, readings(queueDepth=0, e2eLatency=None)) == 5


# --- the operator's loop: activation, minReplicaCount, scale to zero -----------------


def test_scale_to_zero_waits_until_the_cooldown_has_strictly_passed():
    so = scaled_object(min_replicas=0)
    assert so.poll(0, 1, 1, readings(queueDepth=2, e2eLatency=0)) == 1
    assert so.poll(300, 1, 1, readings(queueDepth=0, e2eLatency=0)) == 1  # lastActiveTime + 300 s is not before now
    assert so.poll(301, 1, 1, readings(queueDepth=0, e2eLatency=0)) == 0


def test_last_active_time_keeps_whole_seconds():
    so = scaled_object(min_replicas=0)
    so.poll(10.7, 1, 1, readings(queueDepth=2, e2eLatency=0))
    assert so.last_active == 10.0


def test_activation_from_zero_on_any_active_trigger():
    so = scaled_object(min_replicas=0)
    assert so.poll(0, 0, 0, readings(queueDepth=0, e2eLatency=0)) == 0
    assert so.poll(30, 0, 0, readings(queueDepth=0.5, e2eLatency=0)) == 1


def test_a_trigger_on_fallback_is_active_and_wakes_a_target_at_zero():
    # getScalerState: isActiveOrFallback := fallbackActive || isMetricActive
    so = scaled_object(min_replicas=0, fallback=Fallback(replicas=2, failure_threshold=0), triggers=(QUEUE,))
    assert so.poll(0, 0, 0, readings(queueDepth=None)) == 1


def test_an_erroring_trigger_never_scales_a_target_to_zero():
    for fallback in (None, Fallback(replicas=2, failure_threshold=5)):
        so = scaled_object(min_replicas=0, fallback=fallback, cooldown=0)
        so.last_active = 0.0
        assert so.poll(100, 1, 1, readings(queueDepth=0, e2eLatency=None)) == 1, fallback


def test_a_zero_replica_fallback_lets_an_erroring_target_go_to_zero():
    # RequestScale: only `fallback.replicas != 0` holds an erroring, inactive target
    so = scaled_object(min_replicas=0, fallback=Fallback(replicas=0, failure_threshold=5), cooldown=0)
    so.last_active = 0.0
    assert so.poll(100, 1, 1, readings(queueDepth=0, e2eLatency=None)) == 0


def test_a_partial_trigger_error_does_not_refresh_the_last_active_time():
    so = scaled_object(min_replicas=0)
    so.last_active = 0.0
    assert so.poll(200, 1, 1, readings(queueDepth=5, e2eLatency=None)) == 1  # active, but one trigger errors
    assert so.last_active == 0.0
    assert so.poll(301, 1, 1, readings(queueDepth=0, e2eLatency=0)) == 0


def test_keda_raises_a_target_to_min_replica_count_only_without_errors():
    so = scaled_object(min_replicas=2)
    assert so.poll(0, 1, 1, readings(queueDepth=0, e2eLatency=None)) == 1
    assert so.poll(15, 1, 1, readings(queueDepth=0, e2eLatency=0)) == 2


def test_an_active_target_above_zero_is_left_to_the_hpa():
    so = scaled_object(min_replicas=2)
    assert so.poll(0, 1, 1, readings(queueDepth=9, e2eLatency=0)) == 1


def test_min_replica_count_above_zero_never_deactivates():
    so = scaled_object(min_replicas=1)
    assert so.poll(10_000, 1, 1, readings(queueDepth=0, e2eLatency=0)) == 1


def test_a_cron_trigger_outside_its_window_does_not_wake_a_model_at_zero():
    # cron_scaler.go GetMetricsAndActivity: outside the window, metric 0 and isWithinInterval false
    so = scaled_object(min_replicas=0, triggers=(QUEUE, CRON))
    assert so.poll(7 * HOUR, 0, 0, {**readings(queueDepth=0), "cron": cron_reading(7 * HOUR)}) == 0


def test_a_cron_trigger_inside_its_window_wakes_a_model_at_zero_even_for_one_replica():
    # inside, metric desiredReplicas (1) and active: RequestScale's scaleFromZeroOrIdle
    so = scaled_object(min_replicas=0, triggers=(QUEUE, CRON))
    assert so.poll(9 * HOUR, 0, 0, {**readings(queueDepth=0), "cron": cron_reading(9 * HOUR)}) == 1
