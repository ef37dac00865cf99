"""Tune's search rules, and one short search through the dev stack's policy."""

from pathlib import Path

from capacity.planning.evaluator import Candidate, Evaluated
from capacity.planning.stack import load_stack_model
from capacity.planning.run import RunOptions
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
    result = TuneResult(base, base, [("triggers.queueDepth.targetPerReplica", 8.0, 3.0), ("minReplicas", 2, 4)], 5, 0.99)
    assert config_set_lines(result, "m", "prod") == [
        "pulumi config set --path 'autoscaling.m.triggers.queueDepth.targetPerReplica' 3 -s prod",
        "pulumi config set --path 'autoscaling.m.minReplicas' 4 -s prod",
    ]


def test_knob_edits_go_into_the_model_block_only():
    edits = knob_edits("m", {"triggers.queueDepth.targetPerReplica": 2, "minReplicas": 3})
    assert edits == (("autoscaling.m.triggers.queueDepth.targetPerReplica", 2), ("autoscaling.m.minReplicas", 3))


def test_a_knob_at_the_value_the_model_block_holds_is_the_same_candidate():
    sm = load_stack_model("dev", root=ROOT)  # its block sets triggers.queueDepth.targetPerReplica: 2
    assert identity(sm, {"triggers.queueDepth.targetPerReplica": 2}) == ()
    assert identity(sm, {"triggers.queueDepth.targetPerReplica": 3}) == (("triggers.queueDepth.targetPerReplica", 3),)


def test_tune_finds_a_policy_no_worse_than_the_stack_and_prints_config_set_lines():
    sm = load_stack_model("dev", profile=PROFILE, root=ROOT)
    trace = load("synthetic:step:base=2,peak=20,at=60,length=240,duration=420,prompt=512,output=128")
    result = tune(sm, trace, target=0.9, options=RunOptions(), workers=2, max_passes=1)
    before, after = result.baseline.summary, result.best.summary
    assert (after.slo_attainment >= 0.9 and after.cost_usd <= before.cost_usd) or (
        after.slo_attainment >= before.slo_attainment
    )
    for line in config_set_lines(result, sm.model.name, "dev"):
        assert line.startswith(f"pulumi config set --path 'autoscaling.{sm.model.name}.") and line.endswith(" -s dev")
