"""Does a committed policy still stand on its evidence?

The evidence comment above a model's autoscaling block names the `plan` command that chose its
thresholds and records what the policy did on the held-out part of that command's traffic. The
audit replays the committed policy there with the current engine model and control loop. It fails
when the policy breaks the planner's rules (`guardrails`: the guardrail triggers on above healthy
traffic, maxReplicas the pools' budget for the model), misses the stack's
`capacityPlanning.attainmentTarget`, or no longer reproduces the GPU-hours its evidence records
(more than `COST_SLACK` apart: the engine or the control loop moved under it). Given the planner's
answer now (`replan`: a reduced candidate budget on the search part, same seed and GPU type; about
30 s per model, so benchmarks/evidence_replan.py runs it, not the suite), it also fails when the
committed policy costs more than `COST_SLACK` above that answer. Its message names the thresholds
that differ from a reference policy (the planner's now, or the one the evidence planned) and the
command to re-plan with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from capacity.planning import plan
from capacity.planning.days import Part
from capacity.planning.evidence import Evidence
from capacity.planning.guardrails import guardrails
from capacity.planning.run import CombinedSummary, held_out_parts, validation_options
from capacity.planning.sensitivity import thresholds
from capacity.planning.stack import StackModel

COST_SLACK = 0.10  # the committed policy may cost this much more than the planner finds now, or its evidence records


@dataclass(frozen=True)
class Audit:
    stack: str
    model: str
    target: float
    committed: CombinedSummary  # the committed policy on the held-out days (or part of the trace)
    replanned: CombinedSummary | None  # the planner's winner now, on the same part (None: nothing ran)
    moves: list[tuple[str, Any, Any]]  # (config path, committed, what the planner sets now)
    command: str | None  # the evidence command, to re-plan with
    problems: list[str]

    def message(self) -> str:
        """One paragraph: what failed, which thresholds to re-plan, and the command to run."""
        lines = [f"{self.stack}/{self.model}: " + "; ".join(self.problems)]
        if self.moves:
            lines.append(
                "thresholds the planner sets differently now: "
                + ", ".join(f"{path} {old} -> {new}" for path, old, new in self.moves)
            )
        lines.append(
            f"re-plan with: {self.command}"
            if self.command
            else f"no evidence comment above autoscaling.{self.model} names the command: add one"
        )
        return "\n".join(lines)


@dataclass(frozen=True)
class Replan:
    """The planner's answer now: its winner's held-out summary and stack model (None: nothing ran)."""

    summary: CombinedSummary | None
    planned: StackModel | None
    trials: int


def replan(
    sm: StackModel, searched: Sequence[Part], held: Sequence[Part], trials: int, seed: int, workers: int
) -> Replan:
    """The planner on the searched parts, on the model's current GPU type, with the stack's target."""
    options = validation_options(sm, seed)
    result = plan.search(
        sm, searched, sm.attainment_target, trials, seed, workers, options, only=(plan.current_gpu(sm),)
    )
    if result.best is None:
        return Replan(None, None, trials)
    summary = plan.validate(sm, result.best, result.types, held, options)
    return Replan(summary, plan.deploy(sm, result.best.candidate, result.types), trials)


def audit(
    sm: StackModel,
    searched: Sequence[Part],
    held: Sequence[Part],
    seed: int,
    proof: Evidence | None,
    reference: StackModel | None = None,
    now: Replan | None = None,
) -> Audit:
    """The committed policy of `sm` against the stack's target, the held-out numbers its evidence
    `proof` records, and (given) the planner's answer `now`; `reference` (default: `now`'s
    winner) is the policy whose differing thresholds the message names."""
    target = sm.attainment_target
    committed = held_out_parts(sm, held, validation_options(sm, seed), oracle=False)  # no check reads the oracle's
    replanned = now.summary if now else None
    problems = []
    broken = guardrails(sm, [p.trace for p in searched]).breaks(sm.policy, sm.profile)
    if broken:
        problems.append("the committed policy breaks the planner's rules: " + "; ".join(broken))
    if committed.slo_attainment < target:
        problems.append(
            f"the committed policy attains {committed.slo_attainment:.2%} < the target {target:.2%} "
            f"on the held-out part ({', '.join(d.label for d in committed.days)})"
        )
    problems += _unreproduced(committed, proof)
    if (
        now
        and replanned
        and replanned.slo_attainment >= target
        and committed.cost_usd > (1 + COST_SLACK) * replanned.cost_usd
    ):
        problems.append(
            f"the committed policy costs ${committed.cost_usd:.2f}, more than {COST_SLACK:.0%} above the "
            f"${replanned.cost_usd:.2f} the planner finds now ({now.trials} candidates)"
        )
    against = reference or (now.planned if now else None)
    moves = _moves(sm, against) if against else []
    command = proof.command if proof else None
    return Audit(sm.stack, sm.model.name, target, committed, replanned, moves, command, problems)


def _unreproduced(committed: CombinedSummary, proof: Evidence | None) -> list[str]:
    """A problem when the held-out GPU-hours are more than COST_SLACK (plus the rounding of the
    written figure) from what the evidence records, or when it records none. When the evidence
    records each held-out part and the replay runs only some of them (the parts of the evidence
    traffic, not its --validate-trace files), the replayed parts' cost is compared with theirs."""
    recorded = proof.held_out() if proof else None
    per_day = proof.held_out_days() if proof else {}
    replayed = [d for d in committed.days if d.label in per_day]
    if recorded is not None and per_day and replayed and len(replayed) < len(per_day):
        cost, recorded_cost = sum(d.cost_usd for d in replayed), sum(per_day[d.label] for d in replayed)
        if abs(cost - recorded_cost) <= COST_SLACK * recorded_cost + 0.005 * len(replayed):
            return []
        return [
            f"the committed policy costs ${cost:.2f} on {', '.join(d.label for d in replayed)} where its evidence "
            f"records ${recorded_cost:.2f} (more than {COST_SLACK:.0%} apart): the evidence no longer describes it"
        ]
    if recorded is None:
        return ["its evidence records no held-out numbers ('validation (...): attainment X%, Y GPU-h')"]
    rounding = 0.5 * 10.0**-recorded.digits
    if abs(committed.gpu_hours - recorded.gpu_hours) <= COST_SLACK * recorded.gpu_hours + rounding:
        return []
    return [
        f"the committed policy takes {committed.gpu_hours:.2f} GPU-h on the held-out part where its evidence "
        f"records {recorded.gpu_hours:.{recorded.digits}f} (more than {COST_SLACK:.0%} apart): the evidence no "
        "longer describes it"
    ]


def _moves(committed: StackModel, planned: StackModel) -> list[tuple[str, Any, Any]]:
    now = {t.path: t.value for t in thresholds(planned)}
    return [(t.path, t.value, now[t.path]) for t in thresholds(committed) if t.path in now and now[t.path] != t.value]
