"""The HPA algorithm against the examples of the Kubernetes docs and the controller source."""

import pytest

from capacity.sim.control.hpa import (
    DEFAULT_BEHAVIOR,
    HpaBehavior,
    HorizontalPodAutoscaler,
    HpaScalingPolicy,
    HpaScalingRules,
    TimedValue,
    average_value_replicas,
    replicas_for_metrics,
    scale_down_limit,
    scale_up_limit,
    stabilize,
    value_replicas,
)

NO_STABILIZATION = HpaBehavior(
    HpaScalingRules(0, "Max", (HpaScalingPolicy("Percent", 1000, 15),)),
    HpaScalingRules(0, "Max", (HpaScalingPolicy("Percent", 100, 15),)),
)


# --- formulas -------------------------------------------------------------------------


def test_average_value_is_ceil_of_sum_over_target():
    assert average_value_replicas(total=13, target=4, status_replicas=1) == 4


def test_average_value_doubles_when_per_replica_value_is_twice_the_target():
    # docs: current 200m vs desired 100m -> twice the replicas
    assert average_value_replicas(total=2 * 200, target=100, status_replicas=2) == 4


def test_average_value_halves_when_per_replica_value_is_half_the_target():
    assert average_value_replicas(total=4 * 50, target=100, status_replicas=4) == 2


def test_average_value_within_tolerance_keeps_current_replicas():
    # 4 replicas at 1.09 x target: ratio within 10%, no change although ceil(4.36) = 5
    assert average_value_replicas(total=4.36, target=1, status_replicas=4) == 4


def test_average_value_just_outside_tolerance_scales():
    assert average_value_replicas(total=4.44, target=1, status_replicas=4) == 5


def test_average_value_from_zero_replicas_is_ceil_of_sum_over_target():
    assert average_value_replicas(total=2.5, target=1, status_replicas=0) == 3


def test_value_is_ceil_of_ratio_times_ready_replicas():
    # p99 of 60 s against a 40 s threshold on 3 ready replicas: ceil(1.5 x 3) = 5
    assert value_replicas(value=60, target=40, current_replicas=3, ready_replicas=3) == 5


def test_value_counts_only_ready_replicas():
    # 2 of 4 replicas still loading weights: ceil(1.5 x 2) = 3, below the current 4
    assert value_replicas(value=60, target=40, current_replicas=4, ready_replicas=2) == 3


def test_value_within_tolerance_keeps_current_replicas():
    assert value_replicas(value=42, target=40, current_replicas=3, ready_replicas=1) == 3


def test_value_below_target_scales_in():
    assert value_replicas(value=10, target=40, current_replicas=4, ready_replicas=4) == 1


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
    behavior = HpaBehavior(DEFAULT_BEHAVIOR.scale_up, HpaScalingRules(300, "Max", (HpaScalingPolicy("Percent", 100, 15),)))
    history = [TimedValue(100, 3), TimedValue(200, 4)]
    assert stabilize(history, now=350, desired=2, current=6, behavior=behavior) == 4


def test_scale_down_stabilization_forgets_recommendations_older_than_window():
    behavior = HpaBehavior(DEFAULT_BEHAVIOR.scale_up, HpaScalingRules(300, "Max", (HpaScalingPolicy("Percent", 100, 15),)))
    history = [TimedValue(0, 6), TimedValue(200, 4)]
    assert stabilize(history, now=301, desired=2, current=6, behavior=behavior) == 4


def test_scale_up_stabilization_uses_lowest_recommendation_in_window():
    behavior = HpaBehavior(HpaScalingRules(60, "Max", (HpaScalingPolicy("Pods", 10, 15),)), DEFAULT_BEHAVIOR.scale_down)
    history = [TimedValue(10, 3), TimedValue(40, 5)]
    assert stabilize(history, now=60, desired=8, current=2, behavior=behavior) == 3


def test_hpa_holds_replicas_through_a_dip_shorter_than_the_window():
    hpa = HorizontalPodAutoscaler(1, 10, DEFAULT_BEHAVIOR)
    assert hpa.reconcile(0, 5, [5]) == 5
    assert hpa.reconcile(15, 5, [2]) == 5  # default 300 s scale-down window


def test_hpa_scales_down_once_the_window_has_passed():
    hpa = HorizontalPodAutoscaler(1, 10, DEFAULT_BEHAVIOR)
    hpa.reconcile(0, 5, [5])
    for t in range(15, 301, 15):
        hpa.reconcile(t, 5, [2])
    assert hpa.reconcile(315, 5, [2]) == 2


# --- policies -------------------------------------------------------------------------


def test_pods_policy_limits_scale_up_per_period():
    rules = HpaScalingRules(0, "Max", (HpaScalingPolicy("Pods", 2, 60),))
    assert scale_up_limit(3, [], [], rules, now=0) == 5


def test_pods_policy_counts_scale_ups_inside_the_period():
    rules = HpaScalingRules(0, "Max", (HpaScalingPolicy("Pods", 2, 60),))
    assert scale_up_limit(5, [TimedValue(30, 2)], [], rules, now=60) == 5


def test_pods_policy_allows_again_after_the_period():
    rules = HpaScalingRules(0, "Max", (HpaScalingPolicy("Pods", 2, 60),))
    assert scale_up_limit(5, [TimedValue(30, 2)], [], rules, now=90) == 7


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
    behavior = HpaBehavior(DEFAULT_BEHAVIOR.scale_up, HpaScalingRules(0, "Disabled", (HpaScalingPolicy("Pods", 1, 60),)))
    hpa = HorizontalPodAutoscaler(1, 10, behavior)
    assert hpa.reconcile(0, 5, [1]) == 5


def test_scale_down_policy_one_pod_per_period_across_syncs():
    behavior = HpaBehavior(DEFAULT_BEHAVIOR.scale_up, HpaScalingRules(0, "Min", (HpaScalingPolicy("Pods", 1, 300),)))
    hpa = HorizontalPodAutoscaler(1, 10, behavior)
    assert hpa.reconcile(0, 5, [1]) == 4
    assert hpa.reconcile(15, 4, [1]) == 4
    assert hpa.reconcile(301, 4, [1]) == 3


# --- min / max ------------------------------------------------------------------------


def test_max_replicas_caps_scale_up():
    hpa = HorizontalPodAutoscaler(1, 4, NO_STABILIZATION)
    assert hpa.reconcile(0, 2, [9]) == 4


def test_min_replicas_floors_scale_down():
    hpa = HorizontalPodAutoscaler(2, 4, NO_STABILIZATION)
    assert hpa.reconcile(0, 4, [0]) == 2


def test_current_above_max_is_brought_to_max_whatever_the_metrics():
    hpa = HorizontalPodAutoscaler(1, 4, NO_STABILIZATION)
    assert hpa.reconcile(0, 6, [9]) == 4


def test_scaled_to_zero_target_is_left_alone_when_min_is_positive():
    hpa = HorizontalPodAutoscaler(1, 4, NO_STABILIZATION)
    assert hpa.reconcile(0, 0, [3]) == 0


def test_max_below_min_is_rejected():
    with pytest.raises(ValueError, match=r"maxReplicas \(1\) must be >= minReplicas \(2\)"):
        HorizontalPodAutoscaler(2, 1)
