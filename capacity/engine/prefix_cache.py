"""vLLM V1's automatic prefix caching on one replica: which prompt blocks are cached, and which go first.

Ported from vLLM at vllm-project/vllm@003df296 (the V1 KV cache the pinned v0.25.1 runs):
- a block's identity is its hash chained over every block before it (vllm/v1/core/kv_cache_utils.py
  `hash_block_tokens(hash_function, parent_block_hash, curr_block_token_ids, extra_keys)`), so two
  prompts share a cached block only if they agree on everything up to its end;
- a request's prefix hit is its longest run of leading full blocks found in the cache, at most all
  but the last prompt token (vllm/v1/core/kv_cache_manager.py `KVCacheManager.get_computed_blocks`:
  `max_cache_hit_length = request.num_tokens - 1`, full blocks only);
- a hit block is shared (`BlockPool.touch`: its ref count goes up and, if it was free, it leaves the
  free queue); a request's freed blocks go to the tail of the free queue in reverse order, its last
  block first (`SingleTypeKVCacheManager.free`, `BlockPool.free_blocks`), and a new allocation takes
  the head of the queue, evicting the cached block found there (`BlockPool.get_new_blocks`,
  `_maybe_evict_cached_block`; `FreeKVCacheBlockQueue` is that doubly linked LRU list). So free
  cached blocks are evicted least recently freed first, and of one request's blocks the deepest go
  first, its leading blocks last.

A request's prefix is what the trace knows of it: Mooncake `hash_ids`, one id per 512-token block.
`unit_keys` chains them the way vLLM chains block hashes, and each 512-token unit stands for its
512 / block_size vLLM blocks (32 of 16 tokens), which are allocated, touched, freed and evicted
together except that eviction takes a unit's blocks from its deep end one at a time (the order
above), so a unit can be left with only its leading blocks cached. Tokens past the trace's ids and
generated tokens are never shared (their identity is unknown); they still hold blocks.

What is approximated: a block shared by running requests is counted once per request that holds
it in the engine's KV accounting (vLLM counts it once), so a shared prefix makes the model preempt
a little earlier than vLLM would; a unit hit in part is touched whole.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence

MOONCAKE_BLOCK_TOKENS = 512  # Mooncake traces' hash_ids: one id per 512 prompt tokens
# LMCache's chunk: `chunk_size` 256 (lmcache/v1/config.py), the `lmcache_chunk_size` of
# lmcache/integration/vllm/vllm_v1_adapter.py `ReqMeta.from_request_tracker`
LMCACHE_CHUNK_TOKENS = 256
_ROOT = 0x9E3779B97F4A7C15  # the chain's parent of the first block (vLLM's NONE_HASH)


def unit_keys(block_ids: Sequence[int]) -> tuple[int, ...]:
    """Each 512-token unit's key, chained over every unit before it (`hash_block_tokens`:
    hash((parent hash, block contents))); Python's hash of a tuple of ints is deterministic."""
    keys: list[int] = []
    parent = _ROOT
    for block in block_ids:
        parent = hash((parent, block))
        keys.append(parent)
    return tuple(keys)


class CpuTier:
    """LMCache's CPU tier on one replica (lmcache/integration/vllm/vllm_v1_adapter.py at
    LMCache/LMCache@0043281d, `LMCacheConnectorV1Impl`): after each prefill step the connector
    saves the prompt's KV in whole 256-token chunks (`ReqMeta.from_request_tracker`: partial
    chunks discarded, decode tokens not saved), keyed by the prefix up to each chunk, into pinned
    host memory of `max_local_cpu_size`, evicting the least recently used chunk when full; at
    admission `get_num_new_matched_tokens` returns the leading tokens it holds beyond vLLM's own
    hit (less the last one when every token is held), which are loaded over the host link instead
    of computed. Chunks are kept here per 512-token unit (two each), least recently stored first,
    so a request's leading chunks are the first of its own to go, as LMCache's LRU does."""

    def __init__(self, capacity_tokens: int) -> None:
        self.capacity = capacity_tokens // LMCACHE_CHUNK_TOKENS  # chunks
        self._units: OrderedDict[int, int] = OrderedDict()  # unit key -> leading chunks stored
        self._stored = 0

    @staticmethod
    def _chunks_of(prompt_tokens: int, unit: int) -> int:
        per_unit = MOONCAKE_BLOCK_TOKENS // LMCACHE_CHUNK_TOKENS
        return max(0, min(per_unit, (prompt_tokens - unit * MOONCAKE_BLOCK_TOKENS) // LMCACHE_CHUNK_TOKENS))

    def lookup(self, keys: Sequence[int], prompt_tokens: int) -> int:
        """Leading prompt tokens held (whole chunks, up to the first missing one)."""
        hit = 0
        units = self._units
        for i, key in enumerate(keys):
            stored = units.get(key)
            own = self._chunks_of(prompt_tokens, i)
            if stored is None or own <= 0:
                break
            n = stored if stored < own else own
            hit += n * LMCACHE_CHUNK_TOKENS
            if n < MOONCAKE_BLOCK_TOKENS // LMCACHE_CHUNK_TOKENS:
                break
        return hit

    def store(self, keys: Sequence[int], prompt_tokens: int) -> None:
        """The prompt's whole chunks are saved (most recently used), the oldest evicted past capacity."""
        units = self._units
        for i, key in enumerate(keys):
            own = self._chunks_of(prompt_tokens, i)
            if own <= 0:
                break
            old = units.pop(key, 0)
            new = own if own > old else old
            units[key] = new
            self._stored += new - old
        while self._stored > self.capacity and units:
            _, chunks = units.popitem(last=False)
            self._stored -= chunks


class _Unit:
    """One 512-token unit in the pool: how many of its leading vLLM blocks are cached, how many
    running requests hold it (vLLM's ref_cnt), and its entry in the free queue while free."""

    __slots__ = ("cached", "entry", "refs")

    def __init__(self, cached: int) -> None:
        self.cached = cached
        self.refs = 0
        self.entry: list[int] | None = None  # [key, count, alive] in the free queue


class BlockPool:
    """The free block queue and the cached units of one replica (cold when created: a new pod)."""

    def __init__(self, total_blocks: int, unit_blocks: int) -> None:
        self.unit_blocks = unit_blocks
        self._units: dict[int, _Unit] = {}
        # The free queue, head first: runs of [key, count, alive]; key -1: blocks with no hash.
        self._queue: deque[list[int]] = deque([[-1, total_blocks, 1]])
        self._free = total_blocks  # blocks in the queue

    def blocks_of(self, prompt_tokens: int, unit: int) -> int:
        """Full vLLM blocks of a prompt of `prompt_tokens` inside its `unit`-th 512-token unit."""
        tokens = prompt_tokens - unit * self.unit_blocks * self._block_tokens
        return max(0, min(self.unit_blocks, tokens // self._block_tokens))

    @property
    def _block_tokens(self) -> int:
        return MOONCAKE_BLOCK_TOKENS // self.unit_blocks

    def cached_units(self) -> int:
        return len(self._units)

    def lookup(self, keys: Sequence[int], prompt_tokens: int) -> tuple[int, int]:
        """(cached leading blocks, units they span) of a prompt (`find_longest_cache_hit`: the
        run stops at the first block not cached)."""
        hit = 0
        units = 0
        per_unit = self.unit_blocks
        for i, key in enumerate(keys):
            unit = self._units.get(key)
            if unit is None:
                break
            own = self.blocks_of(prompt_tokens, i)
            n = unit.cached if unit.cached < own else own
            if n <= 0:
                break
            hit += n
            units += 1
            if n < per_unit:
                break
        return hit, units

    def evict_to(self, free_blocks: int) -> None:
        """Allocations took blocks from the head of the free queue until `free_blocks` (the engine's
        count) are left: the cached ones taken are evicted (`get_new_blocks` ->
        `_maybe_evict_cached_block`)."""
        queue = self._queue
        if self._free < free_blocks:
            # blocks the engine freed that no release put back (a shared unit's second holder):
            # free now, at the tail
            queue.append([-1, free_blocks - self._free, 1])
            self._free = free_blocks
        while self._free > free_blocks and queue:
            entry = queue[0]
            if not entry[2] or entry[1] <= 0:
                queue.popleft()
                continue
            take = min(entry[1], self._free - free_blocks)
            entry[1] -= take
            self._free -= take
            if entry[0] != -1:
                unit = self._units[entry[0]]
                unit.cached -= take
                if unit.cached <= 0:
                    del self._units[entry[0]]
            if entry[1] <= 0:
                queue.popleft()

    def acquire(self, key: int, blocks: int) -> None:
        """A running request holds this unit: a hit touches it (out of the free queue), a computed
        one is cached (`cache_full_blocks`), with at least `blocks` leading blocks."""
        unit = self._units.get(key)
        if unit is None:
            unit = self._units[key] = _Unit(blocks)
        elif unit.refs == 0 and unit.entry is not None:
            unit.entry[2] = 0  # touched: no longer an eviction candidate
            self._free -= unit.entry[1]
            unit.cached = unit.entry[1]
            unit.entry = None
        if blocks > unit.cached:
            unit.cached = blocks
        unit.refs += 1

    def deepen(self, key: int, blocks: int) -> None:
        """A held unit now has at least `blocks` leading blocks cached (its holder computed them)."""
        unit = self._units[key]
        if blocks > unit.cached:
            unit.cached = blocks

    def release(self, keys: Sequence[int], held_blocks: int) -> None:
        """A request's blocks are freed (finished, preempted or aborted): its `held_blocks` in all,
        of which the units `keys` (in prompt order); the deepest go to the queue first."""
        units = self._units
        queue = self._queue
        shared = 0
        for key in keys:
            shared += units[key].cached
        rest = held_blocks - shared
        if rest > 0:
            queue.append([-1, rest, 1])
            self._free += rest
        for key in reversed(keys):
            unit = units[key]
            unit.refs -= 1
            if unit.refs == 0:
                unit.entry = [key, unit.cached, 1]
                queue.append(unit.entry)
                self._free += unit.cached
