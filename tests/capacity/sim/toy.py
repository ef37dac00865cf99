"""The toy engine profile the simulator's tests replay: small, fast steps, a 40k-token KV cache
(numbers chosen for readable timings, not any GPU)."""

from capacity.engine import EngineProfile
from capacity.engine.roofline import StepCost

TOY = EngineProfile(
    "toy",
    "toy",
    "toy",
    max_num_seqs=16,
    max_num_batched_tokens=2048,
    kv_cache_tokens=40_000,
    max_model_len=4096,
    cost=StepCost(step_s=0.02, seq_s=0.002, token_s=1e-4),
)
