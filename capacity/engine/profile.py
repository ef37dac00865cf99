"""One replica's engine profile: vLLM settings, its version's scheduler, and the step cost of its GPU + model."""

from __future__ import annotations

from dataclasses import dataclass, replace

from capacity.engine.roofline import StepCost, scheduler_of


@dataclass(frozen=True)
class EngineProfile:
    """One replica: vLLM's scheduler limits, its KV cache, and what a step costs (`cost`).

    `vllm_version` names the vLLM release the replica runs; `scheduler` follows from it (V0
    prefill-first before 0.7, V1 chunked prefill after: `roofline.scheduler_of`). `server_s` is
    the API server's time per request (tokenize, detokenize, HTTP/SSE), serialized in front of the
    engine. `watermark` is the fraction of KV blocks an admission must leave free (V0's block
    manager: 0.01; V1's KVCacheManager: 0.0 by default). `prefix_caching` lets a request
    resumed after a preemption reuse its blocks that were not evicted meanwhile (on by default
    in V1)."""

    name: str
    description: str
    served_model_name: str
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_tokens: int
    max_model_len: int
    cost: StepCost
    block_size: int = 16
    vllm_version: str = "0.25.1"
    server_s: float = 0.0
    watermark: float = 0.0
    prefix_caching: bool = True
    # LMCache's CPU tier (LMCacheConnectorV1 with its local CPU backend): tokens of KV it holds
    # (0: no LMCache) and the seconds loading one token's KV from host memory takes
    lmcache_tokens: int = 0
    kv_load_s_per_token: float = 0.0
    gpu: str = ""  # data/gpus.yaml name of a derived profile ("" for a hand-built one)
    checkpoint: str = ""  # data/models.yaml checkpoint of a derived profile
    tensor_parallel_size: int = 1  # GPUs one replica spans (vLLM --tensor-parallel-size)
    # How many times its derivation's step times `cost` holds (`with_step_time_scale`): 1 as derived
    # or measured; a planner moves it within the profile's error band (capacity/engine/trust.py).
    step_time_scale: float = 1.0

    def __post_init__(self) -> None:
        keys = ("max_num_seqs", "max_num_batched_tokens", "kv_cache_tokens", "max_model_len", "block_size")
        for key in (*keys, "tensor_parallel_size"):
            if getattr(self, key) <= 0:
                raise ValueError(f"profile {self.name!r}: {key} must be > 0, got {getattr(self, key)}")
        if not self.step_time_scale > 0:
            raise ValueError(f"profile {self.name!r}: step_time_scale must be > 0, got {self.step_time_scale}")
        if self.server_s < 0 or not 0 <= self.watermark < 1:
            raise ValueError(f"profile {self.name!r}: server_s must be >= 0 and watermark in [0, 1)")
        scheduler_of(self.vllm_version)  # a ValueError names a version that is not one

    def with_step_time_scale(self, scale: float) -> EngineProfile:
        """This replica with every engine step `scale` times as long as derived (its `cost`, which
        every step of the simulated engine reads, scaled: replica.py's `_cost`); the API server's
        per-request time, the scheduler limits and the KV cache are kept."""
        if not scale > 0:
            raise ValueError(f"profile {self.name!r}: step_time_scale must be > 0, got {scale}")
        if scale == self.step_time_scale:
            return self
        return replace(self, cost=self.cost.scaled(scale / self.step_time_scale), step_time_scale=scale)

    @property
    def scheduler(self) -> str:
        """ "v0" (prefill-first) or "v1" (chunked prefill), from `vllm_version`."""
        return scheduler_of(self.vllm_version)

    @property
    def kv_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_size

    @property
    def watermark_blocks(self) -> int:
        return int(self.watermark * self.kv_blocks)
