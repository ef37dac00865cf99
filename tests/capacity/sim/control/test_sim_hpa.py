"""The HPA algorithm against the Kubernetes docs' examples and the controller's own test tables
(pkg/controller/podautoscaler replica_calculator_test.go, horizontal_test.go; 1.34 rules)."""

import pytest

from capacity.sim.control.hpa import (
    DEFAULT_BEHAVIOR,
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    HorizontalPodAutoscaler,
    HpaBehavior,
    HpaScalingPolicy,
    HpaScalingRules,
    ScaleEvent,
    TimedValue,
    average_value_replicas,
    limit_rate,
    replicas_for_metrics,
    scale_down_limit,
    scale_up_limit,
    stabilize,
    store_scale_event,
    value_replicas,
    within_tolerance,
)

NO_STABILIZATION = HpaBehavior(
    HpaScalingRules(0, "Max", (HpaScalingPolicy("Percent", 1000, 15),)),
    HpaScalingRules(0, "Max", (HpaScalingPolicy("Percent", 100, 15),)),
)


# --- formulas (replica_calculator.go; values and targets in milli-units) ---------------


def test_average_value_is_ceil_of_sum_over_target():
    assert average_value_replicas(usage=13_000, target=4_000, status_replicas=1) == 4


def test_average_value_doubles_when_per_replica_value_is_twice_the_target():
    # docs: current 200m vs desired 100m -> twice the replicas
    assert average_value_replicas(usage=2 * 200, target=100, status_replicas=2) == 4


def test_average_value_halves_when_per_replica_value_is_half_the_target():
    assert average_value_replicas(usage=4 * 50, target=100, status_replicas=4) == 2


def test_average_value_within_tolerance_keeps_current_replicas():
    # 4 replicas at 1.09 x target: ratio within 10%, no change although ceil(4.36) = 5
    assert average_value_replicas(usage=4_360, target=1_000, status_replicas=4) == 4


def test_average_value_just_outside_tolerance_scales():
    assert average_value_replicas(usage=4_440, target=1_000, status_replicas=4) == 5


def test_average_value_from_zero_replicas_is_ceil_of_sum_over_target():
    assert average_value_replicas(usage=2_500, target=1_000, status_replicas=0) == 3


def test_tolerance_includes_both_ends():
    # Tolerances.isWithin since 1.33: (1 - 0.1) <= ratio <= (1 + 0.1); a ratio of exactly 1.1
    # (or 0.9) does not scale, where |1 - 1.1| = 0.10000000000000009 > 0.1 would.
    assert within_tolerance(4_400 / 4_000) and within_tolerance(3_600 / 4_000)
    assert average_value_replicas(usage=4_400, target=1_000, status_replicas=4) == 4
    assert average_value_replicas(usage=3_600, target=1_000, status_replicas=4) == 4
    assert not within_tolerance(4_401 / 4_000)


def test_the_controller_divides_whole_milli_units():
    # 2.1 / 0.7 = 3.0000000000000004 in floats; the HPA divides 2100m by 700m: exactly 3
    assert average_value_replicas(usage=2_100, target=700, status_replicas=1) == 3


def test_value_is_ceil_of_ratio_times_ready_replicas():
    # p99 of 60 s against a 40 s threshold on 3 ready replicas: ceil(1.5 x 3) = 5
    assert value_replicas(usage=60_000, target=40_000, spec_replicas=3, ready_replicas=3) == 5


def test_value_counts_only_ready_replicas():
    # 2 of 4 replicas still loading weights: ceil(1.5 x 2) = 3, below the current 4
    assert value_replicas(usage=60_000, target=40_000, spec_replicas=4, ready_replicas=2) == 3


def test_value_within_tolerance_keeps_current_replicas():
    assert value_replicas(usage=42_000, target=40_000, spec_replicas=3, ready_replicas=1) == 3


def test_value_below_target_scales_in():
    assert value_replicas(usage=10_000, target=40_000, spec_replicas=4, ready_replicas=4) == 1


def test_value_from_zero_spec_replicas_ignores_the_tolerance():
    # getUsageRatioReplicaCount: ceil(ratio) when currentReplicas is 0
    assert value_replicas(usage=1_050, target=1_000, spec_replicas=0, ready_replicas=0) == 2


# replica_calculator_test.go, the External-metric cases at the default tolerance:
# (test, metric type, current replicas, ready pods, usage, target, expected)
REPLICA_CALC_EXTERNAL = [
    ("TestReplicaCalcScaleUpCMExternalIgnoresUnreadyPods", "Value", 3, 1, 8600, 4400, 2),
    ("TestReplicaCalcScaleUpPerPodCMExternal", "AverageValue", 3, 3, 8600, 2150, 4),
    ("TestReplicaCalcScaleDownCMExternal", "Value", 5, 5, 8600, 14334, 3),
    ("TestReplicaCalcScaleDownPerPodCMExternal", "AverageValue", 5, 5, 8600, 2867, 3),
    ("TestReplicaCalcToleranceCMExternal", "Value", 3, 3, 8600, 8888, 3),
    ("TestReplicaCalcTolerancePerPodCMExternal", "AverageValue", 3, 3, 8600, 2900, 3),
]


@pytest.mark.parametrize("name, kind, current, ready, usage, target, expected", REPLICA_CALC_EXTERNAL)
def test_replica_calculator_external_table(name, kind, current, ready, usage, target, expected):
    if kind == "Value":
        assert value_replicas(usage, target, spec_replicas=current, ready_replicas=ready) == expected, name
    else:
        assert average_value_replicas(usage, target, status_replicas=current) == expected, name


def test_non_positive_target_is_rejected():
    with pytest.raises(ValueError, match="target must be > 0"):
        average_value_replicas(1, 0, 1)


# --- several metrics ------------------------------------------------------------------


def test_largest_proposal_across_metrics_wins():
    assert replicas_for_metrics([2, 5, 3], spec_replicas=3) == 5


def test_invalid_metric_blocks_scale_down():
    assert replicas_for_metrics([1, None], spec_replicas=3) is None


def test_invalid_metric_does_not_block_scale_up():
    assert replicas_for_metrics([5, None], spec_replicas=3) == 5


def test_all_metrics_invalid_means_no_decision():
    assert replicas_for_metrics([None, None], spec_replicas=3) is None


# --- stabilization --------------------------------------------------------------------


def test_scale_down_stabilization_uses_highest_recommendation_in_window():
    behavior = HpaBehavior(
        DEFAULT_BEHAVIOR.scale_up, HpaScalingRules(300, "Max", (HpaScalingPolicy("Percent", 100, 15),))
    )
    history = [TimedValue(100, 3), TimedValue(200, 4)]
    assert stabilize(history, now=350, desired=2, current=6, behavior=behavior) == 4


def test_scale_down_stabilization_forgets_recommendations_older_than_window():
    behavior = HpaBehavior(
        DEFAULT_BEHAVIOR.scale_up, HpaScalingRules(300, "Max", (HpaScalingPolicy("Percent", 100, 15),))
    )
    history = [TimedValue(0, 6), TimedValue(200, 4)]
    assert stabilize(history, now=301, desired=2, current=6, behavior=behavior) == 4


def test_scale_up_stabilization_uses_lowest_recommendation_in_window():
    behavior = HpaBehavior(HpaScalingRules(60, "Max", (HpaScalingPolicy("Pods", 10, 15),)), DEFAULT_BEHAVIOR.scale_down)
    history = [TimedValue(10, 3), TimedValue(40, 5)]
    assert stabilize(history, now=60, desired=8, current=2, behavior=behavior) == 3


def test_hpa_holds_replicas_through_a_dip_shorter_than_the_window():
    hpa = HorizontalPodAutoscaler(1, 10, DEFAULT_BEHAVIOR)
    assert hpa.reconcile(0, 5, lambda: [5]) == 5
    assert hpa.reconcile(15, 5, lambda: [2]) == 5  # default 300 s scale-down window


def test_hpa_scales_down_once_the_window_has_passed():
    hpa = HorizontalPodAutoscaler(1, 10, DEFAULT_BEHAVIOR)
    hpa.reconcile(0, 5, lambda: [5])
    for t in range(15, 301, 15):
        hpa.reconcile(t, 5, lambda: [2])
    assert hpa.reconcile(315, 5, lambda: [2]) == 2


def test_the_first_sync_seeds_the_history_with_the_current_replicas():
    # horizontal_test.go TestScaleDownStabilizeInitialSize: 5 replicas, metrics say 3, no history
    # yet (recordInitialRecommendation): the 300 s window holds the 5
    hpa = HorizontalPodAutoscaler(2, 6, DEFAULT_BEHAVIOR)
    assert hpa.reconcile(0, 5, lambda: [3]) == 5
    assert hpa.recommendations[0] == TimedValue(0, 5)


def test_the_history_is_seeded_even_while_scaling_is_disabled_at_zero():
    hpa = HorizontalPodAutoscaler(1, 6, DEFAULT_BEHAVIOR)
    assert hpa.reconcile(0, 0, lambda: [3]) == 0
    assert hpa.recommendations == [TimedValue(0, 0)]


def test_no_metrics_are_fetched_unless_the_hpa_scales_on_them():
    def fail():
        raise AssertionError("metrics fetched")

    hpa = HorizontalPodAutoscaler(1, 4, NO_STABILIZATION)
    assert hpa.reconcile(0, 0, fail) == 0  # ScalingDisabled at zero
    assert hpa.reconcile(15, 6, fail) == 4  # above maxReplicas


def test_a_new_recommendation_overwrites_the_last_sample_older_than_both_windows():
    # stabilizeRecommendationWithBehaviors keeps the index of the last old sample it sees
    hpa = HorizontalPodAutoscaler(1, 10, NO_STABILIZATION)
    hpa.recommendations = [TimedValue(0, 7), TimedValue(1, 8), TimedValue(20, 3)]
    hpa.reconcile(20, 3, lambda: [3])
    assert hpa.recommendations == [TimedValue(0, 7), TimedValue(20, 3), TimedValue(20, 3)]


# --- policies -------------------------------------------------------------------------


def test_pods_policy_limits_scale_up_per_period():
    rules = HpaScalingRules(0, "Max", (HpaScalingPolicy("Pods", 2, 60),))
    assert scale_up_limit(3, [], [], rules, now=0) == 5


def test_pods_policy_counts_scale_ups_inside_the_period():
    rules = HpaScalingRules(0, "Max", (HpaScalingPolicy("Pods", 2, 60),))
    assert scale_up_limit(5, [ScaleEvent(30, 2)], [], rules, now=60) == 5


def test_pods_policy_allows_again_after_the_period():
    rules = HpaScalingRules(0, "Max", (HpaScalingPolicy("Pods", 2, 60),))
    assert scale_up_limit(5, [ScaleEvent(30, 2)], [], rules, now=90) == 7


def test_percent_scale_up_rounds_up():
    rules = HpaScalingRules(0, "Max", (HpaScalingPolicy("Percent", 10, 60),))
    assert scale_up_limit(3, [], [], rules, now=0) == 4


def test_docs_example_pods_policy_wins_below_40_replicas_with_select_max():
    # docs: Pods 4 / 60 s and Percent 10 / 60 s; with 30 replicas 4 pods beat 3 (10%)
    rules = HpaScalingRules(0, "Max", (HpaScalingPolicy("Pods", 4, 60), HpaScalingPolicy("Percent", 10, 60)))
    assert scale_down_limit(30, [], [], rules, now=0) == 26


def test_docs_example_percent_policy_wins_at_80_replicas_with_select_max():
    # docs: at 80 replicas the 10% policy removes 8, at 72 it removes 8 again (72 x 0.9 = 64.8 -> 64)
    rules = HpaScalingRules(0, "Max", (HpaScalingPolicy("Pods", 4, 60), HpaScalingPolicy("Percent", 10, 60)))
    assert scale_down_limit(80, [], [], rules, now=0) == 72
    assert scale_down_limit(72, [], [], rules, now=0) == 64


def test_select_policy_min_picks_the_smallest_change():
    rules = HpaScalingRules(0, "Min", (HpaScalingPolicy("Pods", 4, 60), HpaScalingPolicy("Percent", 10, 60)))
    assert scale_down_limit(80, [], [], rules, now=0) == 76
    up = HpaScalingRules(0, "Min", (HpaScalingPolicy("Pods", 4, 60), HpaScalingPolicy("Percent", 100, 60)))
    assert scale_up_limit(10, [], [], up, now=0) == 14


def test_select_policy_disabled_forbids_scaling_in_that_direction():
    behavior = HpaBehavior(
        DEFAULT_BEHAVIOR.scale_up, HpaScalingRules(0, "Disabled", (HpaScalingPolicy("Pods", 1, 60),))
    )
    hpa = HorizontalPodAutoscaler(1, 10, behavior)
    assert hpa.reconcile(0, 5, lambda: [1]) == 5


def test_scale_down_policy_one_pod_per_period_across_syncs():
    behavior = HpaBehavior(DEFAULT_BEHAVIOR.scale_up, HpaScalingRules(0, "Min", (HpaScalingPolicy("Pods", 1, 300),)))
    hpa = HorizontalPodAutoscaler(1, 10, behavior)
    assert hpa.reconcile(0, 5, lambda: [1]) == 4
    assert hpa.reconcile(15, 4, lambda: [1]) == 4
    assert hpa.reconcile(301, 4, lambda: [1]) == 3


# --- min / max ------------------------------------------------------------------------


def test_max_replicas_caps_scale_up():
    hpa = HorizontalPodAutoscaler(1, 4, NO_STABILIZATION)
    assert hpa.reconcile(0, 2, lambda: [9]) == 4


def test_min_replicas_floors_scale_down():
    hpa = HorizontalPodAutoscaler(2, 4, NO_STABILIZATION)
    assert hpa.reconcile(0, 4, lambda: [0]) == 2


def test_current_above_max_is_brought_to_max_whatever_the_metrics():
    hpa = HorizontalPodAutoscaler(1, 4, NO_STABILIZATION)
    assert hpa.reconcile(0, 6, lambda: [9]) == 4


def test_scaled_to_zero_target_is_left_alone_when_min_is_positive():
    hpa = HorizontalPodAutoscaler(1, 4, NO_STABILIZATION)
    assert hpa.reconcile(0, 0, lambda: [3]) == 0


def test_max_below_min_is_rejected():
    with pytest.raises(ValueError, match=r"maxReplicas \(1\) must be >= minReplicas \(2\)"):
        HorizontalPodAutoscaler(2, 1)


# --- scale events (horizontal.go storeScaleEvent, getReplicasChangePerPeriod) ----------


def rules(pods, pods_period, percent, percent_period, window=0):
    """horizontal_test.go generateScalingRules (selectPolicy Max)."""
    policies = []
    if pods:
        policies.append(HpaScalingPolicy("Pods", pods, pods_period))
    if percent:
        policies.append(HpaScalingPolicy("Percent", percent, percent_period))
    return HpaScalingRules(window, "Max", tuple(policies))


NOW = 1_000.0
# TestStoreScaleEvents, the cases with a behavior: stored events (age s, change) before one
# more scale-up of 5, the events after it (change, outdated), the change inside the last 60 s before.
STORE_SCALE_EVENTS = [
    ("empty entries with two-policy-behavior", rules(10, 60, 100, 60), [], [(5, False)], 0),
    ("one outdated entry to be replaced with behavior", rules(10, 60, 100, 60), [(61, 7)], [(5, False)], 0),
    (
        "one actual entry to be not touched with behavior",
        rules(10, 60, 100, 60),
        [(58, 7)],
        [(7, False), (5, False)],
        7,
    ),
    ("two entries, one of them to be replaced", rules(10, 60, 0, 0), [(61, 7), (59, 6)], [(5, False), (6, False)], 6),
    (
        "replace one entry, use policies with different periods",
        rules(10, 60, 100, 30),
        [(29, 8), (59, 6), (61, 7), (61, 9)],
        [(8, False), (6, False), (7, True), (5, False)],
        14,
    ),
    ("two entries, both actual", rules(10, 120, 100, 30), [(58, 7), (59, 6)], [(7, False), (6, False), (5, False)], 13),
]


@pytest.mark.parametrize("name, scaling, before, after, change", STORE_SCALE_EVENTS)
def test_store_scale_events_table(name, scaling, before, after, change):
    events = [ScaleEvent(NOW - age, value) for age, value in before]
    pods_per_60s = HpaScalingRules(0, "Max", (HpaScalingPolicy("Pods", 0, 60),))
    assert scale_up_limit(10, events, [], pods_per_60s, NOW) == 10 - change, name
    store_scale_event(events, scaling, NOW, 5)
    assert [(e.value, e.outdated) for e in events] == after, name


def test_an_outdated_scale_up_still_counts_toward_a_longer_scale_down_period():
    # Two scale-ups older than the 60 s scale-up period; a third reuses the last slot only.
    up = [ScaleEvent(0, 2), ScaleEvent(10, 1)]
    store_scale_event(up, rules(4, 60, 0, 0), now=100, change=3)
    assert up == [ScaleEvent(0, 2, outdated=True), ScaleEvent(100, 3)]
    # A 300 s scale-down period still sees both: the period started at 10 - 2 - 3 = 5 replicas.
    down_rules = HpaScalingRules(0, "Max", (HpaScalingPolicy("Pods", 1, 300),))
    assert scale_down_limit(10, up, [], down_rules, now=150) == 4


def uniform_events(changes, period_s):
    """horizontal_test.go generateEventsUniformDistribution: each event centred in its segment."""
    segment = period_s / len(changes)
    return [ScaleEvent(NOW - (period_s - segment * (i + 1) + segment / 2), c) for i, c in enumerate(changes)]


# TestScalingWithRules: (name, up events, min, max, scale-up rules, scale-down rules, current, desired, expected)
SCALING_WITH_RULES = [
    ("prenormalized desired replicas within range", [], 3, 8, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN, 5, 7, 7),
    ("prenormalized desired replicas < minReplicas", [], 2, 8, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN, 3, 1, 2),
    (
        "scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies",
        [],
        1,
        2000,
        rules(0, 0, 1, 60),
        DEFAULT_SCALE_DOWN,
        3,
        1000,
        4,
    ),
    (
        "scaleDownLimit is the limit because scaleDownLimit > minReplicas with user defined policies",
        [],
        3,
        2000,
        DEFAULT_SCALE_UP,
        rules(20, 60, 0, 0),
        1000,
        3,
        980,
    ),
    ("scaleUp with default behavior", [], 1, 1000, DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN, 10, 50, 20),
    (
        "scaleUp with pods policy larger than percent policy",
        [],
        1,
        1000,
        rules(100, 60, 100, 60),
        DEFAULT_SCALE_DOWN,
        10,
        500,
        110,
    ),
    (
        "scaleDown with percent policy larger than pod policy",
        [],
        1,
        1000,
        DEFAULT_SCALE_UP,
        rules(20, 60, 1, 60, 300),
        100,
        2,
        80,
    ),
    (
        "scaleDown with spec MinReplicas limitation with large percent policy",
        [],
        5,
        1000,
        DEFAULT_SCALE_UP,
        rules(0, 0, 100, 60, 300),
        10,
        2,
        5,
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large pod policy and events",
        uniform_events([1, 5, 9], 120),
        1,
        200,
        rules(300, 60, 0, 0),
        DEFAULT_SCALE_DOWN,
        100,
        500,
        200,
    ),
    (
        "scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of recent scale up events",
        uniform_events([1, 5, 9], 120),
        1,
        1000,
        rules(5, 120, 0, 0),
        DEFAULT_SCALE_DOWN,
        100,
        500,
        100,
    ),
    (
        "scaleUp with pod policy and previous scale up events",
        uniform_events([1, 5, 9], 120),
        1,
        1000,
        rules(150, 120, 0, 0),
        DEFAULT_SCALE_DOWN,
        100,
        500,
        235,
    ),
]


@pytest.mark.parametrize("name, up_events, lo, hi, up, down, current, desired, expected", SCALING_WITH_RULES)
def test_scaling_with_rules_table(name, up_events, lo, hi, up, down, current, desired, expected):
    behavior = HpaBehavior(up, down)
    assert limit_rate(desired, current, lo, hi, up_events, [], behavior, NOW) == expected, name
