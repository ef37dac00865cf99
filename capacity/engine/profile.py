"""One replica's engine profile: GPU + model + vLLM settings, with its step-time parameters."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineProfile:
    """One replica: GPU + model + vLLM settings, with fitted step-time parameters (seconds)."""

    name: str
    description: str
    served_model_name: str
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_tokens: int
    max_model_len: int
    step_base_s: float  # fixed cost of one engine step (weights read, launch, sampling)
    step_per_seq_s: float  # extra cost per decoding request in the step
    step_per_kv_token_s: float  # attention cost per context token read by decoders
    prefill_token_s: float  # cost per prompt token computed (compute-bound prefill)
    block_size: int = 16

    def __post_init__(self) -> None:
        for key in ("max_num_seqs", "max_num_batched_tokens", "kv_cache_tokens", "max_model_len", "block_size"):
            if getattr(self, key) <= 0:
                raise ValueError(f"profile {self.name!r}: {key} must be > 0, got {getattr(self, key)}")
        for key in ("step_base_s", "step_per_seq_s", "step_per_kv_token_s", "prefill_token_s"):
            if getattr(self, key) < 0:
                raise ValueError(f"profile {self.name!r}: {key} must be >= 0, got {getattr(self, key)}")
        if self.step_base_s <= 0 and self.step_per_seq_s <= 0:
            raise ValueError(f"profile {self.name!r}: a decode step must take time (step_base_s or step_per_seq_s > 0)")

    @property
    def kv_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_size
