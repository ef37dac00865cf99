"""KEDA: trigger types, fallback and activation, on top of the HPA model."""

from capacity.sim.control.hpa import HpaBehavior, HorizontalPodAutoscaler, HpaScalingPolicy, HpaScalingRules
from capacity.sim.control.keda import Fallback, ScaledObject, KedaTrigger, fallback_replicas, proposal

FAST = HpaBehavior(
    HpaScalingRules(0, "Max", (HpaScalingPolicy("Percent", 1000, 15),)),
    HpaScalingRules(0, "Max", (HpaScalingPolicy("Percent", 100, 15),)),
)
QUEUE = KedaTrigger("queueDepth", "AverageValue", 4)
LATENCY = KedaTrigger("e2eLatency", "Value", 40)


def scaled_object(min_replicas=1, fallback=None, triggers=(QUEUE, LATENCY)):
    return ScaledObject(
        triggers=triggers,
        hpa=HorizontalPodAutoscaler(max(min_replicas, 1), 10, FAST),
        min_replica_count=min_replicas,
        fallback=fallback,
    )


def test_average_value_trigger_divides_the_sum_by_the_target():
    assert proposal(QUEUE, value=13, status_replicas=2, ready_replicas=2) == 4


def test_value_trigger_is_not_divided_by_replica_count():
    # the pitfall: a p99 latency as AverageValue would be divided by the replica count
    assert proposal(LATENCY, value=60, status_replicas=4, ready_replicas=4) == 6


def test_hpa_takes_the_max_over_triggers():
    so = scaled_object()
    assert so.hpa_sync(0, 2, 2, {"queueDepth": 4, "e2eLatency": 100}) == 5


def test_fallback_engages_only_after_more_than_failure_threshold_failures():
    so = scaled_object(fallback=Fallback(replicas=3, failure_threshold=2), triggers=(QUEUE,))
    assert so.hpa_sync(0, 1, 1, {"queueDepth": None}) == 1
    assert so.hpa_sync(15, 1, 1, {"queueDepth": None}) == 1
    assert so.hpa_sync(30, 1, 1, {"queueDepth": None}) == 3


def test_a_good_value_resets_the_failure_count():
    so = scaled_object(fallback=Fallback(replicas=3, failure_threshold=1), triggers=(QUEUE,))
    so.hpa_sync(0, 1, 1, {"queueDepth": None})
    so.hpa_sync(15, 1, 1, {"queueDepth": 1})
    assert so.hpa_sync(30, 1, 1, {"queueDepth": None}) == 1


def test_fallback_scales_down_to_fallback_replicas():
    so = scaled_object(fallback=Fallback(replicas=2, failure_threshold=0), triggers=(QUEUE,))
    assert so.hpa_sync(0, 6, 6, {"queueDepth": None}) == 2


def test_value_trigger_has_no_fallback_and_its_failure_blocks_scale_down():
    so = scaled_object(fallback=Fallback(replicas=1, failure_threshold=0))
    assert so.hpa_sync(0, 5, 5, {"queueDepth": 0, "e2eLatency": None}) == 5


def test_fallback_behaviors_follow_current_replicas():
    assert fallback_replicas(Fallback(2, behavior="currentReplicasIfHigher"), 5) == 5
    assert fallback_replicas(Fallback(2, behavior="currentReplicasIfLower"), 5) == 2
    assert fallback_replicas(Fallback(2, behavior="currentReplicas"), 1) == 1
    assert fallback_replicas(Fallback(2), 5) == 2


def test_scale_to_zero_waits_for_the_cooldown_period():
    so = scaled_object(min_replicas=0)
    so.cooldown_period_seconds = 300
    assert so.poll(0, 1, {"queueDepth": 2}) == 1
    assert so.poll(299, 1, {"queueDepth": 0}) == 1
    assert so.poll(300, 1, {"queueDepth": 0}) == 0


def test_activation_from_zero_on_any_active_trigger():
    so = scaled_object(min_replicas=0)
    assert so.poll(0, 0, {"queueDepth": 0, "e2eLatency": 0}) == 0
    assert so.poll(30, 0, {"queueDepth": 0.5, "e2eLatency": 0}) == 1


def test_min_replica_count_above_zero_never_deactivates():
    so = scaled_object(min_replicas=1)
    assert so.poll(10_000, 1, {"queueDepth": 0}) == 1


CRON = KedaTrigger("cron", "AverageValue", 1.0)


def test_a_cron_trigger_outside_its_window_does_not_wake_a_model_at_zero():
    # KEDA's cron scaler reports a metric of 1 outside its window, but inactive
    so = scaled_object(min_replicas=0, triggers=(QUEUE, CRON))
    assert so.poll(0, 0, {"queueDepth": 0, "cron": 1.0}, reported={"cron": False}) == 0


def test_a_cron_trigger_inside_its_window_wakes_a_model_at_zero_even_for_one_replica():
    so = scaled_object(min_replicas=0, triggers=(QUEUE, CRON))
    assert so.poll(0, 0, {"queueDepth": 0, "cron": 1.0}, reported={"cron": True}) == 1
