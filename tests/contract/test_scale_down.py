"""The scale-down rule the policy pack and the planner share (`contract.scale_down`)."""

from contract.scale_down import MIN_SCALE_DOWN_WINDOW_S, rate, scale_down_problems, window

CALM = {
    "scaleUp": {"stabilizationWindowSeconds": 0, "policies": [{"type": "Pods", "value": 4, "periodSeconds": 60}]},
    "scaleDown": {"stabilizationWindowSeconds": 600, "policies": [{"type": "Pods", "value": 1, "periodSeconds": 300}]},
}


def test_a_slow_scale_down_passes():
    assert scale_down_problems(CALM, 10, MIN_SCALE_DOWN_WINDOW_S) == []


def test_a_scale_down_window_below_the_minimum_is_named():
    behavior = {**CALM, "scaleDown": {**CALM["scaleDown"], "stabilizationWindowSeconds": 120}}
    assert scale_down_problems(behavior, 10, 300) == ["scale-down stabilization window (120s) is below 300s"]


def test_a_scale_down_faster_than_scale_up_is_named():
    behavior = {
        **CALM,
        "scaleDown": {
            "stabilizationWindowSeconds": 600,
            "policies": [{"type": "Pods", "value": 8, "periodSeconds": 60}],
        },
    }
    (problem,) = scale_down_problems(behavior, 10, 300)
    assert problem.startswith(
        "scale-down rate (8.00 replicas/min) is not slower than the scale-up rate (4.00 replicas/min)"
    )


def test_unset_behaviour_reads_kubernetes_defaults():
    # pkg/apis/autoscaling/v2/defaults.go: scale up 0 s window, max(100%, 4 pods) per 15 s; down 300 s, 100% per 15 s
    assert window(None, "scaleUp") == 0 and window(None, "scaleDown") == 300
    assert rate(None, "scaleUp", 10) == max(10 / 15, 4 / 15)


def test_a_percent_policy_is_judged_at_the_largest_fleet():
    behavior = {"scaleDown": {"policies": [{"type": "Percent", "value": 50, "periodSeconds": 60}]}}
    assert rate(behavior, "scaleDown", 20) == 10 / 60


def test_a_disabled_direction_never_moves():
    assert rate({"scaleDown": {"selectPolicy": "Disabled"}}, "scaleDown", 10) == 0.0
