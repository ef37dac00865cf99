"""The static fleets a plan that scales must not lose to: the fewest warm replicas of the winner's
deployment meeting the target, bisected on the searched traffic (planned ahead) and on the
held-out one (hindsight), each with its held-out numbers (`plan.static_fleets`), and how the plan
words them (`plan.static_notes`)."""

from pathlib import Path

import pytest

from capacity.planning import plan
from capacity.planning.days import plan_parts
from capacity.planning.evaluator import Evaluated
from capacity.planning.run import RunOptions, held_out_parts
from capacity.planning.stack import load_stack_model
from capacity.workload import traces

ROOT = Path(__file__).resolve().parents[3]
BUSY = "synthetic:step:base=2,peak=16,at=200,length=200,duration=600,prompt=512,output=128"  # needs 2 of 3
TARGET = 0.99


@pytest.fixture(scope="module")
def dev():
    sm = load_stack_model("dev", None, root=ROOT)
    types = {t.gpu: t for t in plan.gpu_types(sm)}
    committed = Evaluated(plan.candidate_of(sm, {"gpu": plan.current_gpu(sm), plan.COMMITTED: True}), None)
    return sm, types, committed


def attainment_with(dev, held, replicas: int) -> float:
    sm, types, committed = dev
    deployed = plan.deploy(sm, committed.candidate, types)
    feasible = lambda t: plan.servable(sm, t, types)  # noqa: E731
    return held_out_parts(deployed, held, RunOptions(), feasible, oracle=False, static=replicas).slo_attainment


def fleets(dev, searched: str, held: str, oracle: float = 1.0):
    sm, types, committed = dev
    ahead = plan_parts(traces.load(searched), 1, 0.3)[1]
    later = plan_parts(traces.load(held), 1, 0.3)[1]
    return ahead, later, plan.static_fleets(sm, committed, types, ahead, later, TARGET, RunOptions(), oracle)


def test_in_hindsight_the_static_fleet_is_the_fewest_replicas_meeting_the_target_held_out(dev):
    _, held, (_, hindsight) = fleets(dev, BUSY, BUSY)
    assert hindsight.chosen_on == "held out" and hindsight.replicas is not None and hindsight.replicas > 1
    assert hindsight.summary.slo_attainment >= TARGET > attainment_with(dev, held, hindsight.replicas - 1)


def test_planned_ahead_the_static_fleet_is_sized_on_the_searched_traffic_and_scored_held_out(dev):
    quiet = "synthetic:step:base=2,peak=2,at=200,length=200,duration=600,prompt=512,output=128"
    _, held, (ahead, hindsight) = fleets(dev, quiet, BUSY)
    assert (ahead.chosen_on, ahead.replicas) == ("searched", 1) and hindsight.replicas > 1  # quiet searched, busy held
    assert ahead.summary.slo_attainment == attainment_with(dev, held, 1) < TARGET


def test_its_oracle_ratio_is_over_the_winners_oracle_on_the_same_traffic(dev):
    _, _, (ahead, _) = fleets(dev, BUSY, BUSY, oracle=2.0)
    assert ahead.summary.oracle_gpu_hours == 2.0
    assert ahead.summary.oracle_ratio == pytest.approx(ahead.summary.gpu_hours / 2.0, abs=0.01)


def test_when_the_pools_whole_fleet_misses_there_is_no_static_fleet_and_the_pools_numbers_show(dev):
    sm, types, committed = dev
    flood = "synthetic:step:base=60,peak=60,at=0,length=60,duration=60,prompt=512,output=256"
    _, _, (ahead, hindsight) = fleets(dev, flood, flood)
    assert ahead.replicas is None and hindsight.replicas is None
    assert ahead.budget == plan.deploy(sm, committed.candidate, types).pool_replicas
    assert hindsight.summary.slo_attainment < TARGET


def _fleet(replicas, cost: float, attainment: float = 0.995) -> dict:
    held = {"slo_attainment": attainment, "cost_usd": cost, "gpu_hours": cost, "oracle_ratio": 1.5}
    return {"replicas": replicas, "pools_replicas": 8, "validation": held}


def _notes(ahead: dict, winner_cost: float, hindsight: dict | None = None) -> list[str]:
    static = {"ahead": ahead, "hindsight": hindsight or _fleet(2, 6.0)}
    return plan.static_notes(static, {"cost_usd": winner_cost}, TARGET)


def test_a_fleet_planned_ahead_cheaper_than_the_winner_and_meeting_the_target_is_a_warning():
    ahead, _ = _notes(_fleet(3, 10.0), 12.0)
    assert ahead.startswith("warning: a static fleet planned ahead, the fewest replicas meeting 99.0% on the searched")
    assert ahead.endswith("less than the winner's $12.00: scaling does not pay here")


def test_a_cheaper_fleet_planned_ahead_that_misses_held_out_is_no_warning():
    ahead, _ = _notes(_fleet(3, 10.0, attainment=0.98), 12.0)
    assert not ahead.startswith("warning") and "; it misses the target held out; the winner costs 1.20x that" in ahead


def test_a_winner_cheaper_than_the_fleet_planned_ahead_says_what_share_of_it_it_costs():
    ahead, _ = _notes(_fleet(3, 10.0), 7.5)
    assert ahead.endswith(
        "(3), attains 99.50% at $10.00 (10.00 GPU-h, 1.5x the oracle) held out; the winner costs 0.75x that"
    )


def test_the_hindsight_fleet_is_said_as_a_bound():
    _, hindsight = _notes(_fleet(3, 10.0), 7.5, _fleet(2, 6.0))
    assert hindsight.startswith("in hindsight, the fewest static replicas meeting 99.0% on the held-out traffic are 2:")
    assert "a bound no fleet chosen ahead reaches" in hindsight and hindsight.endswith("the winner costs 1.25x that")


def test_no_static_fleet_within_the_pools_is_said_with_their_size():
    ahead, hindsight = _notes(_fleet(None, 10.0), 7.5, _fleet(None, 10.0))
    assert ahead.startswith("no static fleet within the pools' 8 replicas meets 99.0% on the searched traffic")
    assert hindsight == (
        "no static fleet within the pools' 8 replicas meets 99.0% on the held-out traffic (all of them attain 99.50% "
        "held out)"
    )
