"""Behaviour of the continuous-batching engine model."""

import dataclasses

import pytest

from capacity.engine import ReplicaEngine, Request, get_profile

CALIBRATED_A10G = get_profile("a10g-r1-14b-awq")
# The scheduler's own behaviour, without the API server's per-request time in front of it
# (test_api_server_cost_* below cover that).
A10G = dataclasses.replace(CALIBRATED_A10G, server_s=0.0)


def _run(engine: ReplicaEngine, until: float) -> list:
    done = []
    while (nxt := engine.next_event_time()) is not None and nxt <= until:
        done += engine.advance(nxt)
    return done + engine.advance(until)


def test_single_request_latency_is_prefill_plus_one_step_per_output_token():
    engine = ReplicaEngine(A10G)
    engine.submit(Request(1, 0.0, 1024, 128), 0.0)
    [done] = _run(engine, 60)
    cost = A10G.cost
    prefill = cost.step_time(seqs=1, tokens=1024, sampled=1, kv_tokens=1024, pairs=1024 * 1025 // 2)
    assert done.first_token_time == pytest.approx(prefill)
    assert done.finish_time == pytest.approx(prefill + cost.decode_span(1, 1024, 127))
    assert done.finish_time > prefill + 127 * cost.decode_step(1, 1024)


def test_api_server_cost_delays_the_first_token_by_its_time_per_request():
    engine = ReplicaEngine(CALIBRATED_A10G)
    engine.submit(Request(1, 0.0, 1024, 2), 0.0)
    [done] = _run(engine, 60)
    prefill = A10G.cost.step_time(seqs=1, tokens=1024, sampled=1, kv_tokens=1024, pairs=1024 * 1025 // 2)
    assert done.first_token_time == pytest.approx(CALIBRATED_A10G.server_s + prefill)


def test_api_server_cost_serializes_a_burst_one_request_per_server_time():
    profile = dataclasses.replace(A10G, server_s=0.2)
    engine = ReplicaEngine(profile)
    for i in range(3):
        engine.submit(Request(i, 0.0, 16, 400), 0.0)
    engine.advance(0.3)  # the first request reached the engine at 0.2, the second at 0.4
    assert (engine.num_running, engine.num_waiting) == (1, 2)
    engine.advance(0.7)
    assert (engine.num_running, engine.num_waiting) == (3, 0)


def test_no_more_than_max_num_seqs_run_and_the_rest_wait():
    profile = dataclasses.replace(A10G, max_num_seqs=4)
    engine = ReplicaEngine(profile)
    for i in range(10):
        engine.submit(Request(i, 0.0, 64, 500), 0.0)
    engine.advance(2.0)
    assert engine.num_running == 4
    assert engine.num_waiting == 6


def test_chunked_prefill_admits_at_most_the_token_budget_per_step():
    engine = ReplicaEngine(A10G)  # 2048 batched tokens
    for i in range(3):
        engine.submit(Request(i, 0.0, 1024, 10), 0.0)
    first_step_end = engine.next_event_time()
    engine.advance(first_step_end)
    assert len(engine.first_tokens()) == 2  # the third prompt did not fit the first step


def test_kv_exhaustion_queues_requests_even_with_free_slots():
    profile = dataclasses.replace(A10G, kv_cache_tokens=4096)
    engine = ReplicaEngine(profile)
    for i in range(4):
        engine.submit(Request(i, 0.0, 1500, 500), 0.0)
    engine.advance(2.0)
    assert engine.num_running < 4 and engine.num_waiting > 0
    assert engine.kv_usage > 0.7


def test_decode_that_outgrows_the_kv_cache_preempts_and_still_finishes_everything():
    profile = dataclasses.replace(A10G, kv_cache_tokens=3000)
    engine = ReplicaEngine(profile)
    for i in range(4):
        engine.submit(Request(i, 0.0, 200, 600), 0.0)
    done = _run(engine, 600)
    assert engine.total_preemptions > 0
    assert sorted(f.request.id for f in done) == [0, 1, 2, 3]


def test_decode_slows_as_the_batch_grows():
    def latency(n: int) -> float:
        engine = ReplicaEngine(A10G)
        for i in range(n):
            engine.submit(Request(i, 0.0, 16, 200), 0.0)
        return max(f.finish_time for f in _run(engine, 600))

    # memory-bound decode: the weights are read once per step for the whole batch, so 30
    # sequences cost more than one (KV, activations, overhead) but far less than 30x
    assert 1.1 * latency(1) < latency(30) < 2 * latency(1)


def test_advance_is_incremental_and_matches_one_big_advance():
    a, b = ReplicaEngine(A10G), ReplicaEngine(A10G)
    for e in (a, b):
        for i in range(5):
            e.submit(Request(i, 0.0, 512, 64), 0.0)
    big = a.advance(100.0)
    small = []
    t = 0.0
    while t < 100.0:
        t += 0.037
        small += b.advance(t)
    assert [f.finish_time for f in big] == pytest.approx([f.finish_time for f in small])


def test_requests_longer_than_max_model_len_are_rejected_naming_the_limit():
    with pytest.raises(ValueError, match="max_model_len"):
        ReplicaEngine(A10G).submit(Request(1, 0.0, 15_000, 10), 0.0)


def test_idle_engine_has_no_next_event_and_reports_zero_usage():
    engine = ReplicaEngine(A10G)
    assert engine.next_event_time() is None
    assert engine.kv_usage == 0 and engine.outstanding == 0


def test_abort_frees_the_slot_and_kv_of_a_running_request():
    engine = ReplicaEngine(A10G)
    engine.submit(Request(1, 0.0, 512, 1000), 0.0)
    engine.advance(1.0)
    assert engine.num_running == 1 and engine.kv_usage > 0
    assert engine.abort(1)
    assert engine.outstanding == 0 and engine.kv_usage == 0
    assert engine.next_event_time() is None
    assert not engine.abort(1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_load_on_a_tight_kv_cache_finishes_every_request_and_frees_every_block(seed):
    import random

    rng = random.Random(seed)
    profile = dataclasses.replace(A10G, kv_cache_tokens=6000, max_num_seqs=12)
    engine = ReplicaEngine(profile)
    t, submitted, done = 0.0, {}, []
    for i in range(300):
        t += rng.expovariate(3.0)
        done += engine.advance(t)
        request = Request(i, t, rng.randint(10, 2500), rng.randint(1, 600))
        engine.submit(request, t)
        submitted[i] = request
        assert 0 <= engine.kv_usage <= 1 and engine.num_running <= 12
    done += _run(engine, t + 10_000)
    assert engine.total_preemptions > 0  # the cache is tight enough to exercise recompute
    assert engine.outstanding == 0 and engine.kv_usage == 0
    assert sorted(f.request.id for f in done) == sorted(submitted)  # each exactly once, preempted or not
    early = [f for f in done if f.finish_time < f.request.arrival]
    assert not early
    assert all(f.request.arrival <= f.scheduled_time <= f.first_token_time <= f.finish_time for f in done)


def test_next_step_time_is_one_decode_step_ahead_while_requests_decode():
    engine = ReplicaEngine(A10G)
    engine.submit(Request(1, 0.0, 64, 100), 0.0)
    first_token = engine.next_step_time()
    engine.advance(first_token)
    second_token = engine.next_step_time()
    assert second_token == pytest.approx(first_token + A10G.cost.decode_step(1, 64))
    assert engine.next_event_time() > second_token  # the completion is 98 steps later


# --- vLLM's schedulers (the profile's version) ------------------------------------------------
# V1: vllm/v1/core/sched/scheduler.py Scheduler.schedule (vllm-project/vllm@00024d31) and
# vllm/v1/core/kv_cache_manager.py KVCacheManager.allocate_slots (@003df296). V0:
# vllm/core/scheduler.py Scheduler._schedule_default (prefills first, then decodes).


def _preempting_engine(**changes) -> ReplicaEngine:
    profile = dataclasses.replace(A10G, kv_cache_tokens=2400, max_num_batched_tokens=4096, **changes)
    engine = ReplicaEngine(profile, record_stats=True)
    for i in range(3):
        engine.submit(Request(i, 0.0, 600, 600), 0.0)
    return engine


def test_v1_preempts_the_most_recently_admitted_running_request():
    engine = _preempting_engine(prefix_caching=False)
    t = 0.0
    while engine.total_preemptions == 0:
        t += 0.02
        engine.advance(t)
    # `self.running.pop()`: the last admitted goes first; the first admitted keeps running
    assert engine._waiting[-1].req.id == 2 and 2 not in engine.running_progress()
    assert 0 in engine.running_progress()


def test_v1_admits_no_waiting_request_in_a_step_that_preempted():
    engine = _preempting_engine(prefix_caching=False)
    t = 0.0
    while engine.total_preemptions == 0:
        t += 0.02
        engine.advance(t)
    running = engine.num_running
    engine.advance(engine._clock + 1e-9)  # `if not preempted_reqs:` guards the waiting loop
    assert engine.num_running == running


def test_v1_prefix_cache_lets_a_preempted_request_resume_without_recomputing_its_cached_blocks():
    cold = _preempting_engine(prefix_caching=False)
    warm = _preempting_engine(prefix_caching=True)
    cold_done, warm_done = _run(cold, 600), _run(warm, 600)
    assert len(cold_done) == len(warm_done) == 3
    assert cold.total_preemptions and warm.total_preemptions
    # less recompute after each preemption: everything finishes sooner
    assert max(f.finish_time for f in warm_done) < max(f.finish_time for f in cold_done)


def test_v0_runs_prefills_first_while_decoders_wait():
    v0 = dataclasses.replace(A10G, vllm_version="0.5.4", max_num_batched_tokens=2048, prefix_caching=False)
    engine = ReplicaEngine(v0)
    engine.submit(Request(1, 0.0, 64, 200), 0.0)
    engine.advance(engine.next_event_time())  # request 1's prefill: its first token
    engine.submit(Request(2, engine._clock, 2000, 10), engine._clock)
    engine.advance(engine.next_event_time())  # a prefill-only step for request 2
    assert engine.generated_tokens(1) == 1  # request 1 did not decode during request 2's prefill
    assert engine.generated_tokens(2) == 1


def test_a_v0_prefill_under_way_is_not_restarted_by_an_arrival():
    # V0's API server shares the engine's event loop, but the forward pass runs in a worker
    # thread (AsyncLLMEngine.execute_model_async): tokenizing a new request delays the next
    # step, never the one already running. Arrivals faster than a step once starved the engine.
    profile = dataclasses.replace(A10G, vllm_version="0.5.4", server_s=0.01)
    engine = ReplicaEngine(profile)
    engine.submit(Request(1, 0.0, 1024, 2), 0.0)
    prefill = profile.cost.step_time(seqs=1, tokens=1024, sampled=1, kv_tokens=1024, pairs=1024 * 1025 // 2)
    arrivals = [0.01 + prefill * k / 4 for k in range(1, 4)]  # three, all during the prefill
    for i, t in enumerate(arrivals, start=2):
        engine.advance(t)
        engine.submit(Request(i, t, 16, 2), t)
    first = {f.request.id: f.first_token_time for f in _run(engine, 60)}
    assert first[1] == pytest.approx(0.01 + prefill)


def test_a_v0_burst_still_waits_for_the_server_to_hand_every_request_over():
    profile = dataclasses.replace(A10G, vllm_version="0.5.4", server_s=0.2)
    engine = ReplicaEngine(profile)
    for i in range(3):
        engine.submit(Request(i, 0.0, 16, 400), 0.0)
    assert engine.next_event_time() > 0.6  # one event loop: all three tokenized before the first step
