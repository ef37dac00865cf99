"""The winner within its engine profile's error band (issue 22, item 4): how far the plan's choice
and its attainment target hold if the engine model is off by the error its trust level rests on.

The band of a profile is its held-out error in the saturated regime (capacity/engine/trust.py,
`plan.BAND_REGIME`): at its slow edge every engine step takes (1 + error) x the derived time, at its
fast edge (1 - error) x. The winner is simulated again at each edge on the searched traffic, with
the search's seed (an extrapolated winner was already ranked at its slow edge: that run is reused).
At each edge one challenger is re-scored at its own profile's edge, the candidate that edge could
promote over the winner:

- fast edge: the cheaper candidate that came closest to the target (faster steps can carry it over);
- slow edge: the runner-up, the planner's own pick without the winner (slower steps can sink the
  winner below the target while it still holds).

The choice flips at an edge when the planner's rule (`plan.winner`) picks the challenger over the
winner there. Other candidates are not re-scored: the band costs at most four simulations per plan,
not one per trial.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from capacity.engine.trust import Trust, trust_of
from capacity.planning import plan
from capacity.planning.days import Part
from capacity.planning.evaluator import Candidate, evaluate, evaluators
from capacity.planning.run import CombinedSummary, RunOptions
from capacity.planning.stack import StackModel, apply_config_set

EDGES = ("fast", "slow")  # step times x (1 - error), x (1 + error)


@dataclass(frozen=True)
class Edge:
    """The winner, and the candidate that edge could promote over it, both re-scored there."""

    name: str  # one of EDGES
    step_time_scale: float  # the winner's steps over their derived time at this edge
    winner: CombinedSummary
    meets_target: bool
    challenger: plan.Trial | None  # re-scored at its own profile's edge; None: no candidate could take over
    flips: bool  # the planner's rule picks the challenger over the winner at this edge

    def as_dict(self) -> dict[str, Any]:
        other = self.challenger
        return {
            "edge": self.name,
            "step_time_scale": self.step_time_scale,
            "slo_attainment": self.winner.slo_attainment,
            "cost_usd": self.winner.cost_usd,
            "meets_target": self.meets_target,
            "challenger": (
                {
                    "gpu": other.params["gpu"],
                    "step_time_scale": other.summary.step_time_scale if other.summary else None,
                    "slo_attainment": other.summary.slo_attainment if other.summary else None,
                    "cost_usd": other.summary.cost_usd if other.summary else None,
                    "refused": other.refused,
                    "params": {k: v for k, v in other.params.items() if k != plan.STEP_TIME_SCALE},
                }
                if other
                else None
            ),
            "choice_flips": self.flips,
        }


@dataclass(frozen=True)
class Band:
    trust: Trust  # of the winner's profile: the error the band spans
    target: float
    searched: CombinedSummary  # the winner as it was ranked
    ranked_meets: bool  # the winner met the target (and the planner's rules) as it was ranked
    edges: tuple[Edge, ...]  # fast, slow

    @property
    def error(self) -> float:
        return self.trust.error(plan.BAND_REGIME)

    @property
    def target_flips(self) -> bool:
        """At some edge the winner's verdict on the target differs from its ranked one."""
        return any(edge.meets_target != self.ranked_meets for edge in self.edges)

    @property
    def choice_flips(self) -> bool:
        return any(edge.flips for edge in self.edges)

    def as_dict(self) -> dict[str, Any]:
        return {
            "trust": self.trust.level,
            "regime": plan.BAND_REGIME,
            "error": round(self.error, 4),
            "ranked_step_time_scale": self.searched.step_time_scale,
            "ranked_slo_attainment": self.searched.slo_attainment,
            "ranked_meets_target": self.ranked_meets,
            "edges": [edge.as_dict() for edge in self.edges],
            "target_flips": self.target_flips,
            "choice_flips": self.choice_flips,
        }


def candidate_trust(sm: StackModel, candidate: Candidate) -> Trust:
    """The trust level of the profile `candidate` runs with (its GPU and engine flags)."""
    return trust_of(apply_config_set(sm, candidate.edits).profile)


def edge_scale(trust: Trust, edge: str) -> float:
    """The step-time scale at `edge` of the band of a profile of `trust`."""
    error = trust.error(plan.BAND_REGIME)
    return round(1.0 - error if edge == "fast" else 1.0 + error, 4)


def challengers(result: plan.PlanResult) -> dict[str, plan.Trial | None]:
    """Per edge, the candidate that could take the winner's place there (see the module docstring):
    among those that ran, keep the planner's rules and deploy other edits than the winner's."""
    best = result.best
    assert best is not None and best.summary is not None, "a band needs a winner that ran"
    others = [
        t
        for t in result.trials
        if t.summary is not None and not t.params.get(plan.RULES_BROKEN) and t.candidate.edits != best.candidate.edits
    ]
    cost = best.summary.cost_usd
    cheaper = [t for t in others if t.summary.cost_usd < cost]  # type: ignore[union-attr]  # only candidates that ran
    closest = max(cheaper, key=lambda t: (t.summary.slo_attainment, -t.summary.cost_usd), default=None)  # type: ignore[union-attr]  # only candidates that ran
    return {"fast": closest, "slow": plan.winner(others, result.target)}


def at_scale(trial: plan.Trial, scale: float) -> Candidate | None:
    """The trial's candidate simulated at `scale`; None when its ranked run already was."""
    if trial.summary is not None and trial.summary.step_time_scale == scale:
        return None
    return replace(trial.candidate, params={**trial.params, plan.STEP_TIME_SCALE: scale})


def band(
    sm: StackModel, result: plan.PlanResult, parts: Sequence[Part], options: RunOptions, workers: int
) -> Band | None:
    """The winner re-scored at both edges of its profile's error band on the searched `parts`
    (`options`: the search's, its seed), with each edge's challenger; None without a winner."""
    best = result.best
    if best is None or best.summary is None:
        return None
    trust = candidate_trust(sm, best.candidate)
    rivals = challengers(result)
    wanted: list[tuple[str, plan.Trial, float]] = [(edge, best, edge_scale(trust, edge)) for edge in EDGES]
    for edge, rival in rivals.items():
        if rival is not None:
            wanted.append((edge, rival, edge_scale(candidate_trust(sm, rival.candidate), edge)))
    runs = [(edge, trial, at_scale(trial, scale)) for edge, trial, scale in wanted]
    todo = [candidate for _, _, candidate in runs if candidate is not None]
    job = plan.PlanJob(sm, tuple(parts), options, result.types)
    if workers > 1 and len(todo) > 1:
        with evaluators(job, min(workers, len(todo))) as evaluator:
            done = list(evaluator.map(todo))
    else:  # one at a time: here, without starting a worker
        done = [evaluate(job, candidate) for candidate in todo]
    scored = iter(done)
    at_edge = {(edge, id(trial)): trial if candidate is None else next(scored) for edge, trial, candidate in runs}
    edges = []
    for edge in EDGES:
        mine, rival = at_edge[edge, id(best)], rivals[edge]
        other = at_edge[edge, id(rival)] if rival is not None else None
        assert mine.summary is not None, "the winner deployed in the search, so it deploys at the band's edges"
        flips = other is not None and plan.winner([mine, other], result.target) is other
        edges.append(
            Edge(edge, mine.summary.step_time_scale, mine.summary, plan.meets(mine, result.target), other, flips)
        )
    return Band(trust, result.target, best.summary, plan.meets(best, result.target), tuple(edges))
