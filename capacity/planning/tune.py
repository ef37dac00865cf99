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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from capacity.planning.evaluator import Candidate, Evaluated, evaluators
from capacity.planning.run import RunOptions, RunSummary, feasible_requests, run_policy, slo_targets, summarize
from capacity.planning.stack import ConfigEdit, Policy, StackModel, apply_config_set, config_command
from capacity.workload.traces import Trace
from contract.triggers import TRIGGERS, Trigger, enabled_triggers

# (key path under the model's block, candidates given the policy, current value)
Knob = tuple[str, Callable[[Policy], Sequence[Any]], Callable[[Policy], Any]]


def _knobs(policy: Policy, triggers: Sequence[Trigger] = TRIGGERS, ceiling: int | None = None) -> list[Knob]:
    """Every enabled trigger's target the trigger has candidates for, then the non-trigger knobs;
    with a `ceiling` above the policy's maxReplicas, maxReplicas up to it too."""
    knobs: list[Knob] = [
        (t.target_path(), t.search, t.target) for t in enabled_triggers(policy, triggers) if t.search(policy)
    ]
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
    if ceiling is not None and ceiling > policy.max_replicas:
        knobs.append(("maxReplicas", lambda p: _spread(p.max_replicas, ceiling, 4), lambda p: p.max_replicas))
    # Up to maxReplicas: on steady traffic a (nearly) static fleet can be the cheapest policy.
    knobs.append(("minReplicas", lambda p: _spread(0, p.max_replicas, 13), lambda p: p.min_replicas))
    return knobs


def _spread(lo: int, hi: int, count: int) -> list[int]:
    """At most `count` integers from lo to hi, evenly spread, both ends included."""
    if hi - lo + 1 <= count:
        return list(range(lo, hi + 1))
    return sorted({round(lo + (hi - lo) * i / (count - 1)) for i in range(count)})


def knob_edits(model: str, knobs: Mapping[str, Any]) -> tuple[ConfigEdit, ...]:
    """The edits setting each knob (a key path under a scope) in the model's own block."""
    return tuple((f"autoscaling.{model}.{path}", value) for path, value in knobs.items())


def knob_candidate(model: str, knobs: Mapping[str, Any]) -> Candidate:
    return Candidate(knob_edits(model, knobs), dict(knobs))


_UNSET = object()


def _written(block: Any, path: str) -> Any:
    """The value a scope's block, as written, holds at a dotted key path (`_UNSET`: none)."""
    for key in path.split("."):
        if not isinstance(block, dict) or key not in block:
            return _UNSET
        block = block[key]
    return block


def identity(sm: StackModel, knobs: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """What a candidate changes in the model's block as written: a knob set to the value the
    block already holds deploys the same section, so it is the same candidate."""
    own = sm.raw_autoscaling.get(sm.model.name)
    return tuple(sorted((path, v) for path, v in knobs.items() if _written(own, path) != v))


@dataclass(frozen=True)
class TuneResult:
    baseline: Evaluated[RunSummary]
    best: Evaluated[RunSummary]
    changes: list[tuple[str, Any, Any]]  # (path, before, after)
    evaluated: int
    target: float
    ceiling: int | None = None  # the highest maxReplicas searched (the pools' budget for the model)

    @property
    def meets_target(self) -> bool:
        return self.best.summary is not None and self.best.summary.slo_attainment >= self.target


def _score(summary: RunSummary, target: float) -> tuple:
    meets = summary.slo_attainment >= target
    if meets:
        return (0, summary.cost_usd, summary.gpu_hours)
    return (1, -summary.slo_attainment, summary.cost_usd)


@dataclass(frozen=True)
class TuneJob:
    """A candidate's edits on the stack, run once over the whole trace. The feasible requests
    are the same for every candidate (the knobs never touch the SLO)."""

    sm: StackModel
    trace: Trace
    options: RunOptions
    feasible: np.ndarray

    def deploy(self, candidate: Candidate) -> StackModel:
        return apply_config_set(self.sm, candidate.edits)

    def score(self, deployed: StackModel) -> RunSummary:
        return summarize(run_policy(deployed, self.trace, self.options), deployed, self.feasible)


def tune(
    sm: StackModel,
    trace: Trace,
    target: float | None = None,
    options: RunOptions = RunOptions(),
    workers: int = 2,
    max_passes: int = 3,
    ceiling: int | None = None,
    progress: Callable[[int, int | None], None] | None = None,
) -> TuneResult:
    """`target`: the attainment to reach (share of feasible requests within the SLO); default
        the SLO's own objective (the P95 of its key names). `ceiling`: while no policy meets the
        target, maxReplicas is searched up to it too (the pools' budget for the model: more would
        not deploy); a policy that meets it keeps its ceiling. `progress(evaluated, None)` after each
    policy evaluated (how many there will be depends on what improves)."""
    target = slo_targets(sm).objective if target is None else target
    job = TuneJob(sm, trace, options, feasible_requests(sm, trace))
    cache: dict[tuple[tuple[str, Any], ...], Evaluated[RunSummary]] = {}
    model = sm.model.name

    def key(candidate: Candidate) -> tuple[tuple[str, Any], ...]:
        return identity(sm, candidate.params)

    with evaluators(job, workers) as evaluator:

        def evaluate_all(candidates: Iterable[Candidate]) -> None:
            todo = list({key(c): c for c in candidates if key(c) not in cache}.values())
            for done in evaluator.map(todo):
                cache[key(done.candidate)] = done
                if progress is not None:
                    progress(len(cache), None)

        evaluate_all([Candidate(())])  # the stack as it is
        baseline = best = cache[()]
        if baseline.summary is None:
            raise ValueError(f"the stack's own policy does not run: {baseline.refused}")
        knobs: dict[str, Any] = {}
        for _ in range(max_passes):
            improved = False
            policy = apply_config_set(sm, best.candidate.edits).policy
            missing = best.summary is None or best.summary.slo_attainment < target
            for path, candidates, _ in _knobs(policy, ceiling=ceiling if missing else None):
                tried = [knob_candidate(model, {**knobs, path: v}) for v in candidates(policy)]
                evaluate_all(tried)
                for candidate in tried:
                    done = cache[key(candidate)]
                    if done.summary is not None and _score(done.summary, target) < _score(best.summary, target):  # type: ignore[arg-type]  # a best that ran is kept from the baseline on
                        best, improved = done, True
                knobs = dict(best.params)
                policy = apply_config_set(sm, best.candidate.edits).policy
            if not improved:
                break
    before, after = sm.policy, apply_config_set(sm, best.candidate.edits).policy
    changes = [
        (path, current(before), current(after))
        for path, _, current in _knobs(before, ceiling=ceiling)
        if current(before) != current(after)
    ]
    evaluated = sum(1 for e in cache.values() if e.summary is not None)
    return TuneResult(baseline, best, changes, evaluated, target, ceiling)


def shortfall(result: TuneResult, sm: StackModel) -> str:
    """Why the closest policy misses the target: the ceiling it is pinned at, or what else limits it."""
    s = result.best.summary
    assert s is not None  # the baseline ran, so the best did
    policy = apply_config_set(sm, result.best.candidate.edits).policy
    why = [f"the closest attains {s.slo_attainment:.2%} < the target {result.target:.2%}"]
    if s.max_replicas_used >= policy.max_replicas:
        at_budget = result.ceiling is not None and policy.max_replicas >= result.ceiling
        why.append(
            f"its fleet is pinned at maxReplicas {policy.max_replicas}"
            + (
                ", the pools' replica budget for the model (the most the settings allow): raise "
                "gpuCapacity.pools[].gpuLimit or lower the other models' maxReplicas"
                if at_budget
                else ""
            )
        )
    else:
        why.append(
            f"its fleet peaked at {s.max_replicas_used} of maxReplicas {policy.max_replicas}, so replicas are not "
            "what it lacks: requests miss while new replicas start, or are slower than the SLO on a busy replica"
        )
    lost = s.failed_requests + s.rejected_requests + s.unfinished_requests
    if lost:
        why.append(f"{lost} of {s.requests} requests failed, were rejected or did not finish")
    return "; ".join(why)


def config_set_lines(result: TuneResult, model: str, stack: str) -> list[str]:
    """The `pulumi config set` commands that deploy the winner."""
    return [config_command((f"autoscaling.{model}.{path}", after), stack) for path, _, after in result.changes]
