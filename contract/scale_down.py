"""Scale up fast, scale down slowly: the rule written once, for the policy pack (every
autoscaler it sees) and the planner (every candidate it would print).

It reads an HPA `behavior` as a manifest spells it (a ScaledObject's
`spec.advanced.horizontalPodAutoscalerConfig.behavior`, an HPA's `spec.behavior`), with
Kubernetes' defaults for what is not set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The policy pack's default for `minScaleDownStabilizationSeconds`: the HPA's own default
# scale-down window, so a stack that sets none is never refused for it.
MIN_SCALE_DOWN_WINDOW_S = 300

# Kubernetes' HPA defaults when `behavior` (or one direction of it) is not set
# (kubernetes pkg/apis/autoscaling/v2/defaults.go GenerateHPAScaleUpRules/GenerateHPAScaleDownRules).
HPA_DEFAULT_BEHAVIOR: dict[str, dict[str, Any]] = {
    "scaleUp": {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": 15},
            {"type": "Pods", "value": 4, "periodSeconds": 15},
        ],
    },
    "scaleDown": {
        "stabilizationWindowSeconds": 300,
        "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
    },
}


def _rules(behavior: Mapping[str, Any] | None, direction: str) -> Mapping[str, Any]:
    rules = behavior.get(direction) if isinstance(behavior, Mapping) else None
    return rules if isinstance(rules, Mapping) else {}


def window(behavior: Mapping[str, Any] | None, direction: str) -> float:
    """Stabilization window (seconds) of one direction, with the HPA default where unset."""
    default = HPA_DEFAULT_BEHAVIOR[direction]["stabilizationWindowSeconds"]
    value = _rules(behavior, direction).get("stabilizationWindowSeconds")
    return float(default if value is None else value)


def rate(behavior: Mapping[str, Any] | None, direction: str, max_replicas: int) -> float:
    """The fastest change (replicas per second) the selected policies allow in one direction."""
    rules, default = _rules(behavior, direction), HPA_DEFAULT_BEHAVIOR[direction]
    select = rules.get("selectPolicy") or default["selectPolicy"]
    if select == "Disabled":
        return 0.0
    policies = [p for p in rules.get("policies") or () if isinstance(p, Mapping)] or default["policies"]
    rates = []
    for policy in policies:
        value, period = float(policy.get("value") or 0), float(policy.get("periodSeconds") or 15)
        # A percentage is judged at the largest fleet the autoscaler may reach.
        replicas = value if policy.get("type") == "Pods" else value / 100 * max_replicas
        rates.append(replicas / max(period, 1.0))
    return (min(rates) if select == "Min" else max(rates)) if rates else 0.0


def scale_down_problems(behavior: Mapping[str, Any] | None, max_replicas: int, min_window: float) -> list[str]:
    """Why this behaviour scales down too fast, if it does: a scale-down window no longer than
    the scale-up one or shorter than `min_window`, or a scale-down rate not slower than scale-up."""
    problems = []
    up_window, down_window = window(behavior, "scaleUp"), window(behavior, "scaleDown")
    if down_window <= up_window:
        problems.append(
            f"scale-down stabilization window ({down_window:g}s) is not longer than the scale-up window ({up_window:g}s)"
        )
    if down_window < min_window:
        problems.append(f"scale-down stabilization window ({down_window:g}s) is below {min_window:g}s")
    up_rate, down_rate = rate(behavior, "scaleUp", max_replicas), rate(behavior, "scaleDown", max_replicas)
    if down_rate > 0 and down_rate >= up_rate:
        problems.append(
            f"scale-down rate ({down_rate * 60:.2f} replicas/min) is not slower than the scale-up rate "
            f"({up_rate * 60:.2f} replicas/min); set explicit behavior policies"
        )
    return problems
