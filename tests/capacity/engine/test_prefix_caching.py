"""vLLM V1 automatic prefix caching in the engine model (capacity/engine/prefix_cache.py), as
vllm/v1/core/kv_cache_manager.py `get_computed_blocks` and vllm/v1/core/block_pool.py do it
(vllm-project/vllm@003df296)."""

import dataclasses

import pytest

from capacity.engine import ReplicaEngine, Request, get_profile
from capacity.engine.prefix_cache import BlockPool, unit_keys

A10G = dataclasses.replace(get_profile("a10g-r1-14b-awq"), server_s=0.0)
PROMPT = 4000  # 8 Mooncake blocks of 512 tokens, the last one partly filled


def _run(engine: ReplicaEngine, until: float) -> list:
    done = []
    while (nxt := engine.next_event_time()) is not None and nxt <= until:
        done += engine.advance(nxt)
    return done + engine.advance(until)


def _ttft(engine: ReplicaEngine, request: Request) -> float:
    engine.submit(request, request.arrival)
    [done] = _run(engine, request.arrival + 50)
    return done.ttft


def test_a_warm_prefix_skips_its_prefill():
    prefix = unit_keys(range(8))
    cold = _ttft(ReplicaEngine(A10G), Request(1, 0.0, PROMPT, 2, prefix))
    engine = ReplicaEngine(A10G)
    _ttft(engine, Request(0, 0.0, PROMPT, 2, prefix))
    warm = _ttft(engine, Request(1, 100.0, PROMPT, 2, prefix))
    # every full block but the one holding the last token is found: 16 tokens are computed
    assert engine.prefix_hits == (PROMPT - 1) // 16 * 16
    assert warm < cold / 10


def test_a_hit_leaves_at_least_the_last_prompt_token_to_compute():
    prefix = unit_keys(range(2))
    engine = ReplicaEngine(A10G)
    _ttft(engine, Request(0, 0.0, 1024, 2, prefix))
    _ttft(engine, Request(1, 100.0, 1024, 2, prefix))  # fully cached: 1024 = 2 x 512
    assert engine.prefix_hits == 1024 - 16


def test_a_block_is_shared_only_when_everything_before_it_agrees():
    engine = ReplicaEngine(A10G)
    _ttft(engine, Request(0, 0.0, PROMPT, 2, unit_keys([0, 1, 2, 3, 4, 5, 6, 7])))
    # the same ids after a different first block: a different chain, nothing shared
    _ttft(engine, Request(1, 100.0, PROMPT, 2, unit_keys([99, 1, 2, 3, 4, 5, 6, 7])))
    assert engine.prefix_hits == 0


def test_a_request_without_block_ids_never_hits():
    engine = ReplicaEngine(A10G)
    _ttft(engine, Request(0, 0.0, PROMPT, 2))
    _ttft(engine, Request(1, 100.0, PROMPT, 2))
    assert (engine.prefix_queries, engine.prefix_hits) == (2 * PROMPT, 0)


def test_prefix_caching_off_finds_nothing():
    engine = ReplicaEngine(dataclasses.replace(A10G, prefix_caching=False))
    prefix = unit_keys(range(8))
    _ttft(engine, Request(0, 0.0, PROMPT, 2, prefix))
    _ttft(engine, Request(1, 100.0, PROMPT, 2, prefix))
    assert engine.prefix_hits == 0


def test_free_cached_blocks_are_evicted_least_recently_freed_first():
    pool = BlockPool(total_blocks=64, unit_blocks=32)
    first, second, third = (unit_keys([n]) for n in (1, 2, 3))
    for keys in (first, second):
        pool.evict_to(32)  # a request allocates its 32 blocks
        pool.acquire(keys[0], 32)
        pool.release(keys, 32)
    pool.evict_to(32)  # a third request takes 32 blocks: the oldest freed ones go
    pool.acquire(third[0], 32)
    assert pool.lookup(first, 512) == (0, 0)
    assert pool.lookup(second, 512) == (32, 1)


def test_eviction_takes_a_freed_request_s_deepest_blocks_first():
    pool = BlockPool(total_blocks=64, unit_blocks=32)
    keys = unit_keys([1, 2])
    pool.evict_to(0)
    pool.acquire(keys[0], 32)
    pool.acquire(keys[1], 32)
    pool.release(keys, 64)
    pool.evict_to(40)  # 24 blocks allocated: taken from the second unit's deep end
    assert pool.lookup(keys, 1024) == (40, 2)


def test_a_held_block_is_never_evicted():
    pool = BlockPool(total_blocks=32, unit_blocks=32)
    keys = unit_keys([1])
    pool.evict_to(0)
    pool.acquire(keys[0], 32)
    pool.evict_to(0)
    assert pool.lookup(keys, 512) == (32, 1)


@pytest.mark.parametrize("prompt,unit,blocks", [(4000, 0, 32), (4000, 7, 26), (4000, 8, 0), (15, 0, 0)])
def test_a_prompt_fills_each_512_token_unit_with_whole_16_token_blocks(prompt, unit, blocks):
    assert BlockPool(64, 32).blocks_of(prompt, unit) == blocks
