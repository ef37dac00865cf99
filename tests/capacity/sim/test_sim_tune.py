"""Tune's search rules, without simulations."""

from capacity.tune import Candidate, TuneResult, _score, _spread, config_set_lines


def summary(attainment, cost, gpu_hours=1.0):
    return {"slo_attainment": attainment, "cost_usd": cost, "gpu_hours": gpu_hours}


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
    base = Candidate({}, summary(0.9, 1.0))
    result = TuneResult(base, base, [("triggers.queueDepth.targetPerReplica", 8.0, 3.0), ("minReplicas", 2, 4)], 5, 0.99)
    assert config_set_lines(result, "m", "prod") == [
        "pulumi config set --path 'autoscaling.m.triggers.queueDepth.targetPerReplica' 3 -s prod",
        "pulumi config set --path 'autoscaling.m.minReplicas' 4 -s prod",
    ]
