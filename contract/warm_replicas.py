"""How many replicas an interactive model keeps warm: the rule written once, for the policy pack
(`interactive-models-keep-a-warm-replica`) and the planner (the lowest minReplicas it draws).

One warm replica is the floor everywhere: a cold start costs minutes (node launch, image pull,
weight load). A stack that serves real users raises it to 2 in its policy config: a single
replica on spot capacity is one interruption notice (two minutes, EC2's Spot interruption
notice) away from an outage as long as a replacement takes to start.
"""

from __future__ import annotations

POLICY = "interactive-models-keep-a-warm-replica"
DEFAULT_MIN_WARM_REPLICAS = 1  # the policy's default `minReplicas`


def warm_replica_problem(what: str, replicas: int, minimum: int) -> str | None:
    """Why `replicas` warm replicas (as `what` names the field) break the rule, if they do."""
    if replicas >= minimum:
        return None
    if minimum == 1:
        return f"{what} is {replicas} for an interactive model"
    return f"{what} is {replicas} for an interactive model; this stack keeps at least {minimum} warm"
