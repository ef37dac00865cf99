"""The planner's search as Optuna runs it: cost the objective, deploying and the target constraints,
the committed policy the first trial of its GPU type's study, the frontier Optuna's Pareto front."""

import math
from pathlib import Path

import optuna
import pytest
from optuna.distributions import (
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from capacity.planning import journal, plan
from capacity.planning.days import Part
from capacity.planning.evaluator import Candidate, Evaluated, evaluate
from capacity.planning.journal import StorageSpec
from capacity.planning.run import RunOptions
from capacity.planning.space import committed_point, distributions, snap
from capacity.planning.stack import apply_config_set, load_stack_model
from capacity.workload.traces import load
from tests.summaries import searched

ROOT = Path(__file__).resolve().parents[3]
STEP = "synthetic:step:base=2,peak=12,at=300,length=300,duration=900,prompt=512,output=128"


def ran(cost: float, attainment: float, broken: tuple[str, ...] = ()) -> Evaluated:
    params = {"gpu": "l4", plan.RULES_BROKEN: list(broken)}
    return Evaluated(Candidate((), params), searched(cost_usd=cost, slo_attainment=attainment))


REFUSED = Evaluated(Candidate(()), None, "would not deploy: (test)")


def test_a_refused_candidate_violates_deploying_and_attains_nothing():
    assert plan.violations(REFUSED, 0.95) == {"deploys": 1.0, "attainment": 0.95, "rules": 0.0}


def test_each_broken_rule_is_a_violation():
    assert (
        plan.violations(ran(1.0, 1.0, ("the kvCache guardrail is off", "maxReplicas 1 is not ...")), 0.95)["rules"] == 2
    )
    assert not plan.meets(ran(1.0, 1.0, ("the kvCache guardrail is off",)), 0.95)


def test_attainment_short_of_the_target_is_a_violation_and_reaching_it_is_not():
    assert plan.violations(ran(1.0, 0.90), 0.95)["attainment"] == pytest.approx(0.05)
    assert plan.meets(ran(1.0, 0.95), 0.95) and not plan.meets(ran(1.0, 0.9499), 0.95)


def test_the_winner_is_the_cheapest_feasible_candidate_else_the_closest():
    cheap_short, dear_meeting, cheaper_meeting = ran(1.0, 0.9), ran(3.0, 0.99), ran(2.0, 0.96)
    cheapest_breaking_a_rule = ran(0.5, 1.0, ("the e2eLatency guardrail is off",))
    assert (
        plan.winner([REFUSED, cheap_short, dear_meeting, cheaper_meeting, cheapest_breaking_a_rule], 0.95)
        is cheaper_meeting
    )
    assert plan.winner([REFUSED, cheap_short, ran(0.5, 0.8)], 0.95) is cheap_short
    assert plan.winner([REFUSED], 0.95) is None


def test_of_candidates_costing_the_same_the_one_attaining_more_wins():
    first, better = ran(2.0, 0.96), ran(2.0, 0.99)
    assert plan.winner([first, better], 0.95) is better


def test_the_frontier_is_the_pareto_front_cheapest_first_one_per_point():
    a, b, dominated, cheapest, same_as_a = ran(1.0, 0.9), ran(2.0, 0.95), ran(2.0, 0.9), ran(0.5, 0.5), ran(1.0, 0.9)
    assert plan.frontier([a, b, dominated, REFUSED, cheapest, same_as_a]) == [cheapest, a, b]


def test_the_committed_point_snaps_to_the_space():
    assert snap(100, CategoricalDistribution((16, 96, 128))) == 96
    assert snap(0.77, FloatDistribution(0.05, 0.95, step=0.05)) == 0.75
    assert snap(12, IntDistribution(1, 8)) == 8 and snap(False, CategoricalDistribution((True, False))) is False


def known(sm):
    """dev with a policy and engine flags the space holds, set here rather than by the last plan."""
    scope, model = "autoscaling.qwen25-1p5b", "models[0]"
    return apply_config_set(
        sm,
        [
            (f"{scope}.triggers.queueDepth.targetPerReplica", 2),
            (f"{scope}.triggers.queueDepth.windowSeconds", 30),
            (f"{scope}.triggers.kvCache.targetPerReplica", 0.75),
            (f"{scope}.behavior.scaleDown.stabilizationWindowSeconds", 600),
            (f"{model}.engine.maxNumSeqs", 32),
            (f"{model}.engine.maxNumBatchedTokens", 4096),
            ("gpuCapacity.pools[0].consolidateAfter", "15m"),
            ("gpuCapacity.pools[1].consolidateAfter", "15m"),
        ],
    )


def test_the_committed_point_holds_the_stacks_values_where_the_space_does():
    dev = known(load_stack_model("dev", root=ROOT))
    point = committed_point(dev, distributions(dev.pool_replicas, True, (300, 600, 900), guardrails=False), 0.05, 34.5)
    assert (point["queueTarget"], point["queueWindow"], point["kvTarget"], point["scaleDownWindow"]) == (
        2,
        30,
        0.75,
        600,
    )
    assert (point["maxNumSeqs"], point["maxNumBatchedTokens"], point["consolidateAfter"]) == (32, 4096, "15m")


def test_the_committed_kv_target_is_filed_as_its_headroom_over_the_floor():
    dev = known(load_stack_model("dev", root=ROOT))  # kv 0.75
    point = committed_point(dev, distributions(dev.pool_replicas, False, (600,)), 0.55, 34.5)
    assert point["kvHeadroom"] == 0.5 and "kvTarget" not in point  # 0.75 is halfway from 0.55 to 0.95


@pytest.fixture(scope="module")
def searched_dev(tmp_path_factory):
    scope = "autoscaling.qwen25-1p5b"  # pinned at one replica: it breaks the ceiling rule (the pools hold 3)
    dev = apply_config_set(
        load_stack_model("dev", root=ROOT),
        [(f"{scope}.minReplicas", 1), (f"{scope}.maxReplicas", 1), (f"{scope}.fallbackReplicas", 1)],
    )
    path = tmp_path_factory.mktemp("journal") / "plan.journal"
    result = plan.search(
        dev,
        [Part("step", load(STEP))],
        0.9,
        trials=4,
        seed=0,
        workers=1,
        options=RunOptions(),
        storage=StorageSpec(path),
    )
    return dev, result, path


def test_the_committed_policy_is_the_first_trial_of_its_gpu_types_study_run_as_committed(searched_dev):
    dev, result, _ = searched_dev
    first_on_l4 = next(t for t in result.trials if t.params["gpu"] == "l4")
    assert first_on_l4 is result.committed and first_on_l4.candidate.edits == ()
    as_committed = evaluate(
        plan.PlanJob(dev, (Part("step", load(STEP)),), RunOptions(), result.types), Candidate((), {"gpu": "l4"})
    )
    assert first_on_l4.summary == as_committed.summary


def test_every_told_trial_carries_its_cost_and_constraints(searched_dev):
    _, result, path = searched_dev
    storage = journal.storage(path)
    told = [
        t
        for s in optuna.get_all_study_summaries(storage)
        for t in optuna.load_study(study_name=s.study_name, storage=storage).trials
        if t.state.is_finished()  # the seeds beyond the budget wait for a bigger one
    ]
    assert len(told) == len(result.trials) == 4
    for trial in told:
        kept, params = trial.user_attrs[journal.RESULT], trial.user_attrs[journal.CANDIDATE]
        rules = len(params.get(plan.RULES_BROKEN, []))  # the committed policy's maxReplicas 1 of 3
        if isinstance(kept, str):  # refused: no cost, and it attains nothing
            assert (trial.value, trial.constraints) == (math.inf, {"deploys": 1.0, "attainment": 0.9, "rules": rules})
            continue
        assert trial.value == kept["cost_usd"]
        assert trial.constraints == {
            "deploys": 0.0,
            "attainment": pytest.approx(0.9 - kept["slo_attainment"]),
            "rules": rules,
        }
    assert sum(t.constraints["rules"] for t in told) == 1


def test_the_gpu_table_picks_each_types_winner_by_the_same_constraints():
    breaking, planned = ran(0.5, 1.0, ("the kvCache guardrail is off",)), ran(1.0, 0.99)
    kind = plan.GpuType("g6", "l4", 0.8, 0.36, "g6.xlarge")
    result = plan.PlanResult([breaking, planned], planned, breaking, 0.95, {"l4": kind}, rules=None)  # type: ignore[arg-type]  # no rules needed to read the table
    (row,) = plan.per_gpu_type(result)
    assert row.meets_target and row.pick is planned.summary
