"""vLLM V1 automatic prefix caching in the engine model (capacity/engine/prefix_cache.py), as
vllm/v1/core/kv_cache_manager.py `get_computed_blocks` and vllm/v1/core/block_pool.py do it
(vllm-project/vllm@003df296)."""

import dataclasses

import pytest

from capacity.engine import ReplicaEngine, Request, get_profile
from capacity.engine.hardware import checkpoint
from capacity.engine.prefix_cache import BlockPool, CpuTier, unit_keys
from capacity.engine.profiles import with_lmcache

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


# --- LMCache's CPU tier (capacity.engine.prefix_cache.CpuTier) ---------------------------------

SMALL_GPU = dataclasses.replace(A10G, kv_cache_tokens=8192, max_model_len=8000)


def _evict_then_repeat(profile) -> tuple[ReplicaEngine, float]:
    """A prompt, then others that take every GPU block, then the first prompt again: its TTFT."""
    engine = ReplicaEngine(profile)
    _ttft(engine, Request(0, 0.0, PROMPT, 2, unit_keys(range(8))))
    for n in range(1, 4):
        _ttft(engine, Request(n, 100.0 * n, PROMPT, 2, unit_keys(range(100 * n, 100 * n + 8))))
    return engine, _ttft(engine, Request(9, 1000.0, PROMPT, 2, unit_keys(range(8))))


def test_a_prefix_evicted_from_the_gpu_is_loaded_from_lmcache_instead_of_computed():
    gpu_only, cold = _evict_then_repeat(SMALL_GPU)
    assert gpu_only.prefix_hits == 0  # evicted from the GPU
    with_cpu = dataclasses.replace(SMALL_GPU, lmcache_tokens=100_000, kv_load_s_per_token=1e-6)
    engine, warm = _evict_then_repeat(with_cpu)
    # LMCache held its whole 256-token chunks: 15 of them, loaded instead of prefilled
    assert engine.external_hits == PROMPT // 256 * 256
    assert warm < cold / 3


def test_what_lmcache_loads_costs_its_host_to_device_copy():
    fast = dataclasses.replace(SMALL_GPU, lmcache_tokens=100_000, kv_load_s_per_token=1e-6)
    slow = dataclasses.replace(fast, kv_load_s_per_token=1e-4)
    _, quick = _evict_then_repeat(fast)
    _, copied = _evict_then_repeat(slow)
    assert copied - quick == pytest.approx(PROMPT // 256 * 256 * (1e-4 - 1e-6), rel=1e-6)


def test_lmcache_evicts_its_least_recently_stored_chunks():
    tier = CpuTier(capacity_tokens=4 * 256)
    first, second = unit_keys([1, 2]), unit_keys([3, 4])
    tier.store(first, 1024)
    tier.store(second, 1024)  # 8 chunks in a 4-chunk tier: the first prompt's go
    assert tier.lookup(first, 1024) == 0
    assert tier.lookup(second, 1024) == 1024


def test_lmcache_keeps_whole_chunks_only():
    tier = CpuTier(capacity_tokens=10_000)
    tier.store(unit_keys([1, 2]), 900)  # 3 whole chunks of 256, the last 132 tokens dropped
    assert tier.lookup(unit_keys([1, 2]), 900) == 768


def test_an_lmcache_tier_holds_what_its_bytes_hold_of_the_checkpoint_s_kv():
    l4 = get_profile("l4-qwen2.5-14b-awq")
    per_token = checkpoint(l4.checkpoint).architecture.kv_bytes_per_token  # 2 x 48 layers x 8 KV heads x 128 x 2 bytes
    tier = with_lmcache(l4, 16 * 2**30)
    assert per_token == 196_608
    assert tier.lmcache_tokens == 16 * 2**30 // per_token
    assert tier.kv_load_s_per_token == pytest.approx(per_token / 32e9)  # PCIe Gen4 x16, one way


def test_lmcache_on_a_gpu_without_a_host_link_figure_is_refused_by_name():
    h100 = get_profile("h100-qwen2.5-7b-awq")
    with pytest.raises(ValueError, match="has no host_link_gb_s"):
        with_lmcache(h100, 2**30)
