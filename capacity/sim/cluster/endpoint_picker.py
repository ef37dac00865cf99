"""The Gateway API Inference Extension's endpoint picker (EPP), as the `inferencepool` chart v1.0.2
deploys it: its default plugins config scores every ready pod and picks the best.

Read at kubernetes-sigs/gateway-api-inference-extension tag v1.0.2:
- config/charts/inferencepool/templates/epp-config.yaml `default-plugins.yaml`: one scheduling
  profile of `queue-scorer`, `kv-cache-utilization-scorer` and `prefix-cache-scorer`, no filters;
  pkg/epp/config/loader/defaults.go gives every scorer without a weight `DefaultScorerWeight` = 1
  and a profile without a picker the `max-score-picker`;
- pkg/epp/scheduling/framework/plugins/scorer/queue.go `QueueScorer.Score`: (max - own) / (max -
  min) of the pods' waiting queues (`vllm:num_requests_waiting`), 1 for all when they are equal;
- scorer/kvcache_utilization.go `Score`: 1 - `vllm:kv_cache_usage_perc`;
- multi/prefix/plugin.go `hashPrompt`: the prompt cut into 64-byte blocks (`DefaultHashBlockSize`,
  at most `DefaultMaxPrefixBlocks` = 256, a last partial block ignored), each hash chained on the
  one before; `matchLongestPrefix`: walking the blocks in order until one no pod holds, each pod
  counts the blocks it is indexed for; `Score`: that count / the request's blocks;
  `PreRequest`: the picked pod is indexed for all the request's blocks;
- multi/prefix/indexer.go: per pod an LRU of `DefaultLRUCapacityPerServer` = 31,250 block hashes
  (hashicorp golang-lru `Add`: a known hash moves to the front, a new one evicts the oldest past
  the capacity, and the eviction drops the pod from that hash's pod set);
- picker/max_score_picker.go `Pick`: the highest weighted sum, ties broken at random.
The weighted sum adds the scorers in the profile's order (queue, KV, prefix).

What is modelled, not read: the prompt's bytes. A trace gives tokens and Mooncake block ids, so a
token is taken as 4 bytes (the plugin's own sizing comment: "a good guess of average characters
per token is 4"), which makes a 64-byte block one 16-token vLLM block; a block's identity is its
512-token unit's chained key (`capacity.engine.prefix_cache.unit_keys`) and its place in the unit,
and blocks past the known ids are the request's own. The EPP refreshes each pod's metrics every
50 ms (`DefaultRefreshMetricsInterval`, pkg/epp/server/runserver.go); the model reads them at the
request's arrival. A request without block ids scores 0 on the prefix scorer everywhere and is not
indexed (its blocks are its own: no other request could match them).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

from capacity.engine.prefix_cache import MOONCAKE_BLOCK_TOKENS
from capacity.engine.replica import Request

HASH_BLOCK_BYTES = 64  # DefaultHashBlockSize
MAX_PREFIX_BLOCKS = 256  # DefaultMaxPrefixBlocks
LRU_CAPACITY_PER_SERVER = 31_250  # DefaultLRUCapacityPerServer
BYTES_PER_TOKEN = 4  # the plugin's sizing assumption (see the module doc)
WEIGHTS = (1.0, 1.0, 1.0)  # queue, kv-cache-utilization, prefix-cache: DefaultScorerWeight each


class EppBackend(Protocol):
    @property
    def id(self) -> int: ...

    @property
    def waiting(self) -> int: ...

    @property
    def kv_usage(self) -> float: ...


def prompt_blocks(request: Request) -> list[int]:
    """`hashPrompt`: the request's block hashes, at most 256 (empty without block ids)."""
    if not request.prefix:
        return []
    tokens_per_block = HASH_BLOCK_BYTES // BYTES_PER_TOKEN
    per_unit = MOONCAKE_BLOCK_TOKENS // tokens_per_block
    count = min(MAX_PREFIX_BLOCKS, request.prompt_tokens * BYTES_PER_TOKEN // HASH_BLOCK_BYTES)
    prefix = request.prefix
    known = len(prefix) * per_unit
    return [
        hash((prefix[j // per_unit], j % per_unit)) if j < known else hash((-1, request.id, j)) for j in range(count)
    ]


class PrefixIndex:
    """indexer.go: the EPP's approximate view of which pod holds which block."""

    def __init__(self, capacity: int = LRU_CAPACITY_PER_SERVER) -> None:
        self.capacity = capacity
        self._pods: dict[int, OrderedDict[int, None]] = {}
        self._holders: dict[int, set[int]] = {}

    def add(self, hashes: Sequence[int], pod: int) -> None:
        lru = self._pods.setdefault(pod, OrderedDict())
        for h in hashes:
            if h in lru:
                lru.move_to_end(h)
                continue
            lru[h] = None
            if len(lru) > self.capacity:
                old, _ = lru.popitem(last=False)
                holders = self._holders.get(old)
                if holders is not None:
                    holders.discard(pod)
                    if not holders:
                        del self._holders[old]
        for h in hashes:
            self._holders.setdefault(h, set()).add(pod)

    def longest_prefix(self, hashes: Sequence[int]) -> dict[int, int]:
        """`matchLongestPrefix`: per pod, the blocks it is counted for."""
        matched: dict[int, int] = {}
        for h in hashes:
            holders = self._holders.get(h)
            if not holders:
                break
            for pod in holders:
                matched[pod] = matched.get(pod, 0) + 1
        return matched


class EndpointPicker:
    """The EPP's default scheduling profile over every ready pod."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self.index = PrefixIndex()

    def candidates(self, n: int) -> Sequence[int]:
        return range(n)

    def pick(self, ready: Sequence[EppBackend], candidates: Sequence[int], request: Request | None = None) -> int:
        hashes = prompt_blocks(request) if request is not None else []
        matched = self.index.longest_prefix(hashes) if hashes else {}
        total = len(hashes)
        waiting = [ready[i].waiting for i in candidates]
        low, high = min(waiting), max(waiting)
        wq, wkv, wprefix = WEIGHTS
        best: list[int] = []
        best_score = -1.0
        for i, queue in zip(candidates, waiting):
            pod = ready[i]
            score = (1.0 if high == low else (high - queue) / (high - low)) * wq
            score += (1 - pod.kv_usage) * wkv
            score += (matched.get(pod.id, 0) / total if total else 0.0) * wprefix
            if score > best_score:
                best, best_score = [i], score
            elif score == best_score:
                best.append(i)
        choice = best[0] if len(best) == 1 else self._rng.choice(best)
        if hashes:
            self.index.add(hashes, ready[choice].id)
        return choice
