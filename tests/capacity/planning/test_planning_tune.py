"""Tune's search rules, and a short search that must lower a padded fleet and print lines that deploy it."""

from pathlib import Path

import pytest

from capacity.planning.evaluator import Candidate, Evaluated
from capacity.planning.run import RunOptions, feasible_requests, run_policy, summarize
from capacity.planning.stack import apply_config_set, load_stack_model
from capacity.planning.tune import TuneResult, _score, _spread, config_set_lines, identity, knob_edits, tune
from capacity.workload.traces import load
from tests.summaries import run

ROOT = Path(__file__).resolve().parents[3]
PROFILE = "8gb-qwen2.5-1.5b"


def summary(attainment, cost, gpu_hours=1.0):
    return run(slo_attainment=attainment, cost_usd=cost, gpu_hours=gpu_hours)


def test_a_policy_meeting_the_target_beats_any_that_misses_it():
    assert _score(summary(0.99, 9.0), 0.99) < _score(summary(0.98, 1.0), 0.99)


def test_among_policies_meeting_the_target_the_cheapest_wins():
    assert _score(summary(0.995, 4.0), 0.99) < _score(summary(0.999, 5.0), 0.99)


def test_while_none_meets_the_target_higher_attainment_wins():
    assert _score(summary(0.97, 9.0), 0.99) < _score(summary(0.95, 1.0), 0.99)


def test_candidates_spread_over_the_range_with_both_ends():
    assert _spread(0, 4, 13) == [0, 1, 2, 3, 4]
    spread = _spread(0, 100, 13)
    assert spread[0] == 0 and spread[-1] == 100 and len(spread) == 13


def test_config_set_lines_use_the_model_block_and_plain_numbers():
    base = Evaluated(Candidate(()), summary(0.9, 1.0))
    result = TuneResult(
        base, base, [("triggers.queueDepth.targetPerReplica", 8.0, 3.0), ("minReplicas", 2, 4)], 5, 0.99
    )
    assert config_set_lines(result, "m", "prod") == [
        "pulumi config set --path 'autoscaling.m.triggers.queueDepth.targetPerReplica' 3 -s prod",
        "pulumi config set --path 'autoscaling.m.minReplicas' 4 -s prod",
    ]


def test_knob_edits_go_into_the_model_block_only():
    edits = knob_edits("m", {"triggers.queueDepth.targetPerReplica": 2, "minReplicas": 3})
    assert edits == (("autoscaling.m.triggers.queueDepth.targetPerReplica", 2), ("autoscaling.m.minReplicas", 3))


def test_a_knob_at_the_value_the_model_block_holds_is_the_same_candidate():
    sm = load_stack_model("dev", root=ROOT)
    path, own = (
        "triggers.queueDepth.targetPerReplica",
        sm.raw_autoscaling[sm.model.name]["triggers"]["queueDepth"]["targetPerReplica"],
    )
    assert identity(sm, {path: own}) == ()
    assert identity(sm, {path: own + 1}) == ((path, own + 1),)


LIGHT = "synthetic:step:base=1,peak=2,at=60,length=120,duration=420,prompt=512,output=128"  # one replica serves it


@pytest.fixture(scope="module")
def padded():
    """dev's policy held at its ceiling, three warm replicas, on traffic one replica serves."""
    sm = load_stack_model("dev", profile=PROFILE, root=ROOT)
    return apply_config_set(sm, knob_edits(sm.model.name, {"minReplicas": 3, "maxReplicas": 3, "fallbackReplicas": 3}))


@pytest.fixture(scope="module")
def tuned(padded):
    return tune(padded, load(LIGHT), target=0.9, options=RunOptions(), workers=2, max_passes=1)


def test_tune_lowers_a_padded_fleet_to_a_cheaper_policy_that_still_meets_the_target(tuned):
    before, after = tuned.baseline.summary, tuned.best.summary
    assert before.slo_attainment >= 0.9 and after.slo_attainment >= 0.9
    assert after.cost_usd < before.cost_usd
    assert ("minReplicas", 3, 1) in tuned.changes


def test_the_printed_lines_deploy_the_policy_tune_simulated(padded, tuned):
    lines = config_set_lines(tuned, padded.model.name, "dev")
    assert lines and all(
        line.startswith(f"pulumi config set --path 'autoscaling.{padded.model.name}.") for line in lines
    )
    deployed = apply_config_set(
        padded, [(f"autoscaling.{padded.model.name}.{path}", after) for path, _, after in tuned.changes]
    )
    replayed = summarize(
        run_policy(deployed, load(LIGHT), RunOptions()), deployed, feasible_requests(deployed, load(LIGHT))
    )
    assert replayed == tuned.best.summary


# steady traffic past one replica's cliff: one replica attains 8%, three about 49% once they have started
BUSY = "synthetic:step:base=17,peak=17,at=60,length=100,duration=600,prompt=512,output=128"


def test_while_no_policy_meets_the_target_tune_raises_max_replicas_up_to_the_ceiling():
    sm = load_stack_model("dev", profile=PROFILE, root=ROOT)
    capped = apply_config_set(
        sm, knob_edits(sm.model.name, {"minReplicas": 1, "maxReplicas": 1, "fallbackReplicas": 1})
    )
    result = tune(capped, load(BUSY), target=0.4, options=RunOptions(), workers=2, max_passes=1, ceiling=3)
    assert result.baseline.summary.slo_attainment < 0.4 and result.meets_target
    raised = dict((path, after) for path, _, after in result.changes)
    assert 1 < raised["maxReplicas"] <= 3
