"""Search the threshold space for the cheapest policy that meets an SLO-attainment target
(by default the SLO's objective: 95% of the feasible requests within TTFT and TPOT targets).

Coordinate descent over the knobs a platform team actually turns (each enabled trigger's
target that `contract.triggers` gives search candidates for, the stabilization windows,
minReplicas): each pass tries every
candidate of one knob with the others fixed, keeps the best, and moves on; it stops when a
pass changes nothing. "Best" is the lowest cost among policies that meet the target, or the
highest attainment while none does. Every candidate is validated by the program's settings
rules, so the winner deploys as simulated; edits go into the model's own autoscaling block.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import ValidationError

from capacity.runtime import worker_pool
from capacity.planning.stack import Policy, StackModel, config_command
from capacity.planning.run import RunOptions, feasible_requests, run_policy, slo_targets, summarize
from capacity.workload.traces import Trace
from contract.triggers import TRIGGERS, Trigger, enabled_triggers

# (key path under the model's block, candidates given the policy, current value)
Knob = tuple[str, Callable[[Policy], Sequence[Any]], Callable[[Policy], Any]]


def _knobs(policy: Policy, triggers: Sequence[Trigger] = TRIGGERS) -> list[Knob]:
    """Every enabled trigger's target the trigger has candidates for, then the non-trigger knobs."""
    knobs: list[Knob] = [(t.target_path(), t.search, t.target) for t in enabled_triggers(policy, triggers) if t.search(policy)]
    knobs.append(
        (
            "behavior.scaleUp.stabilizationWindowSeconds",
            lambda p: [0, 30, 60],
            lambda p: p.behavior.scale_up.stabilization_window_seconds,
        )
    )
    knobs.append(
        (
            "behavior.scaleDown.stabilizationWindowSeconds",
            lambda p: [60, 120, 300, 600, 900],
            lambda p: p.behavior.scale_down.stabilization_window_seconds,
        )
    )
    # Up to maxReplicas: on steady traffic a (nearly) static fleet can be the cheapest policy.
    knobs.append(("minReplicas", lambda p: _spread(0, p.max_replicas, 13), lambda p: p.min_replicas))
    return knobs


def _spread(lo: int, hi: int, count: int) -> list[int]:
    """At most `count` integers from lo to hi, evenly spread, both ends included."""
    if hi - lo + 1 <= count:
        return list(range(lo, hi + 1))
    return sorted({round(lo + (hi - lo) * i / (count - 1)) for i in range(count)})


def set_path(raw: dict[str, Any], model: str, path: str, value: Any) -> dict[str, Any]:
    """A copy of the autoscaling section with `<model>.<path>` set (the model's override block)."""
    out = copy.deepcopy(raw)
    node = out.setdefault(model, {})
    *parents, leaf = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return out


@dataclass(frozen=True)
class Candidate:
    raw: dict[str, Any]
    summary: dict[str, Any]


@dataclass(frozen=True)
class TuneResult:
    baseline: Candidate
    best: Candidate
    changes: list[tuple[str, Any, Any]]  # (path, before, after)
    evaluated: int
    target: float


def _score(summary: dict[str, Any], target: float) -> tuple:
    meets = summary["slo_attainment"] >= target
    if meets:
        return (0, summary["cost_usd"], summary["gpu_hours"])
    return (1, -summary["slo_attainment"], summary["cost_usd"])


# Worker state: set once per process (fork), so a candidate ships only its policy dict. The
# feasible requests are the same for every candidate (the knobs never touch the SLO).
_JOB: tuple[StackModel, Trace, RunOptions, np.ndarray] | None = None


def _init(sm: StackModel, trace: Trace, options: RunOptions, feasible: np.ndarray) -> None:
    global _JOB
    _JOB = (sm, trace, options, feasible)


def _evaluate(raw: dict[str, Any]) -> dict[str, Any] | None:
    sm, trace, options, feasible = _JOB  # type: ignore[misc]
    try:
        candidate = sm.with_policy(raw)
    except (ValidationError, ValueError):
        return None  # a policy the program would refuse to deploy
    return summarize(run_policy(candidate, trace, options), candidate, feasible)


def tune(
    sm: StackModel,
    trace: Trace,
    target: float | None = None,
    options: RunOptions = RunOptions(),
    workers: int = 2,
    max_passes: int = 3,
) -> TuneResult:
    """`target`: the attainment to reach (share of feasible requests within the SLO); default
    the SLO's own objective (the P95 of its key names)."""
    target = slo_targets(sm).objective if target is None else target
    job = (sm, trace, options, feasible_requests(sm, trace))
    _init(*job)
    cache: dict[str, dict[str, Any] | None] = {}
    key = lambda raw: json.dumps(raw, sort_keys=True)  # noqa: E731

    with worker_pool(workers, _init, job) as pool:

        def evaluate_all(raws: Iterable[dict[str, Any]]) -> None:
            todo = [r for r in raws if key(r) not in cache]
            for raw, summary in zip(todo, pool.map(_evaluate, todo)):
                cache[key(raw)] = summary

        base_raw = sm.raw_autoscaling
        evaluate_all([base_raw])
        baseline = Candidate(base_raw, cache[key(base_raw)])  # type: ignore[arg-type]
        best = baseline
        for _ in range(max_passes):
            improved = False
            policy = sm.with_policy(best.raw).policy
            for path, candidates, _ in _knobs(policy):
                raws = [set_path(best.raw, sm.model.name, path, v) for v in candidates(policy)]
                evaluate_all(raws)
                for raw in raws:
                    summary = cache[key(raw)]
                    if summary is not None and _score(summary, target) < _score(best.summary, target):
                        best, improved = Candidate(raw, summary), True
                policy = sm.with_policy(best.raw).policy
            if not improved:
                break
    before, after = sm.policy, sm.with_policy(best.raw).policy
    changes = [
        (path, current(before), current(after))
        for path, _, current in _knobs(before)
        if current(before) != current(after)
    ]
    return TuneResult(baseline, best, changes, sum(1 for v in cache.values() if v is not None), target)


def config_set_lines(result: TuneResult, model: str, stack: str) -> list[str]:
    """The `pulumi config set` commands that deploy the winner."""
    return [config_command((f"autoscaling.{model}.{path}", after), stack) for path, _, after in result.changes]
