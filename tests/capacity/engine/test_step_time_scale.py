"""One place scales how long the engine's steps take (the planner's pessimistic bound and error
band, issue 22 item 4): the profile's step cost, which every simulated step reads."""

import dataclasses

import pytest

from capacity.engine import ReplicaEngine, Request, get_profile

PROFILE = "l4-qwen2.5-1.5b"


def test_a_scaled_step_cost_takes_exactly_that_many_times_as_long_on_either_roof():
    cost = get_profile(PROFILE).cost
    slow = cost.scaled(1.25)
    for seqs, tokens, kv in ((1, 1, 100), (64, 64, 200_000), (1, 2048, 0)):  # decode, long context, prefill
        assert slow.step_time(seqs, tokens, seqs, kv, kv) == pytest.approx(
            1.25 * cost.step_time(seqs, tokens, seqs, kv, kv)
        )
        assert slow.memory_bound(tokens, seqs, kv, kv) == cost.memory_bound(tokens, seqs, kv, kv)
    assert slow.decode_span(8, 4000, 50) == pytest.approx(1.25 * cost.decode_span(8, 4000, 50))
    assert slow.fill_tokens == cost.fill_tokens  # a row count, not a time


def test_a_profiles_step_time_scale_is_relative_to_its_derivation_not_compounded():
    profile = get_profile(PROFILE)
    twice = profile.with_step_time_scale(1.2).with_step_time_scale(0.9)
    assert twice.step_time_scale == 0.9
    assert twice.cost.decode_step(4, 1000) == pytest.approx(0.9 * profile.cost.decode_step(4, 1000))
    assert profile.with_step_time_scale(1.0) is profile


def _one_request(profile) -> tuple[float, float]:
    """(first token, finish) of one 1,024-in / 128-out request alone on a replica of `profile`."""
    engine = ReplicaEngine(profile)
    engine.submit(Request(1, 0.0, 1024, 128), 0.0)
    done = []
    while (nxt := engine.next_event_time()) is not None and nxt <= 600:
        done += engine.advance(nxt)
    [request] = done
    return request.first_token_time, request.finish_time


def test_the_simulated_engine_runs_every_step_at_the_scaled_cost():
    nominal = dataclasses.replace(get_profile(PROFILE), server_s=0.0)  # the API server's time is not a step
    first, finish = _one_request(nominal)
    slow_first, slow_finish = _one_request(nominal.with_step_time_scale(1.5))
    assert (slow_first, slow_finish) == (pytest.approx(1.5 * first), pytest.approx(1.5 * finish))


def test_a_step_time_scale_must_be_positive():
    with pytest.raises(ValueError, match="step_time_scale must be > 0"):
        get_profile(PROFILE).with_step_time_scale(0.0)
