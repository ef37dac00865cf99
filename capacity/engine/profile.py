"""One replica's engine profile: vLLM settings and the step cost of its GPU + model."""

from __future__ import annotations

from dataclasses import dataclass

from capacity.engine.roofline import StepCost


@dataclass(frozen=True)
class EngineProfile:
    """One replica: vLLM's scheduler limits, its KV cache, and what a step costs (`cost`)."""

    name: str
    description: str
    served_model_name: str
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_tokens: int
    max_model_len: int
    cost: StepCost
    block_size: int = 16

    def __post_init__(self) -> None:
        for key in ("max_num_seqs", "max_num_batched_tokens", "kv_cache_tokens", "max_model_len", "block_size"):
            if getattr(self, key) <= 0:
                raise ValueError(f"profile {self.name!r}: {key} must be > 0, got {getattr(self, key)}")

    @property
    def kv_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_size
