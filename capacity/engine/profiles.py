"""Named engine profiles: one vLLM replica (GPU + model + engine flags) each.

Step-time parameters are fitted to published measurements in ../shared/calibration/README.md;
tests/capacity/engine/test_engine_calibration.py holds each profile to its reference.
"""

from __future__ import annotations

from capacity.engine.profile import EngineProfile

# One A10G (g5.xlarge), DeepSeek-R1-Distill-Qwen-14B-AWQ, vLLM v0.25.1,
# --gpu-memory-utilization 0.90 --max-num-seqs 40 --max-model-len 15000 --max-num-batched-tokens 2048.
# KV capacity from the run's KV usage: 78% at 40 x ~1,090 tokens of context -> ~56k tokens.
# Step times fitted (closed loop, 1024+128 tokens) to the calibration CSV's rps and p99.
A10G_R1_14B_AWQ = EngineProfile(
    name="a10g-r1-14b-awq",
    description="1x A10G 24GB, DeepSeek-R1-Distill-Qwen-14B-AWQ, max-num-seqs 40, batched-tokens 2048",
    served_model_name="deepseek-r1-distill-qwen-14b-awq",
    max_num_seqs=40,
    max_num_batched_tokens=2048,
    kv_cache_tokens=56_000,
    max_model_len=15_000,
    step_base_s=0.0178,
    step_per_seq_s=0.0009,
    step_per_kv_token_s=1.8e-6,
    prefill_token_s=0.00021,
)

# Qwen2.5-1.5B FP16 on one 8 GB GPU: 6,382 KV blocks (~102k tokens), ~2,600 generated tokens/s
# sustained at 64 concurrent requests, TTFT p50 31 ms at low load (short ~150-token prompts
# assumed); compute-bound: KV stays ~11% at 64 concurrent short requests and no queue forms.
RTX8G_QWEN25_1_5B = EngineProfile(
    name="8gb-qwen2.5-1.5b",
    description="1x 8GB consumer GPU, Qwen2.5-1.5B FP16 (compute-bound reference)",
    served_model_name="qwen2.5-1.5b",
    max_num_seqs=256,
    max_num_batched_tokens=2048,
    kv_cache_tokens=6_382 * 16,
    max_model_len=32_768,
    step_base_s=0.0080,
    step_per_seq_s=0.00025,
    step_per_kv_token_s=0.0,
    prefill_token_s=0.00005,
)

# Qwen2.5-3B FP16 with --enforce-eager and a 2k context on one 8 GB GPU: 751 KV blocks
# (~12k tokens), ~670 generated tokens/s; KV-bound: long requests fill the cache (99.5%),
# requests queue and TTFT p95 reaches seconds.
RTX8G_QWEN25_3B = EngineProfile(
    name="8gb-qwen2.5-3b-eager",
    description="1x 8GB consumer GPU, Qwen2.5-3B FP16, enforce-eager, 2k context (KV-bound reference)",
    served_model_name="qwen2.5-3b",
    max_num_seqs=256,
    max_num_batched_tokens=2048,
    kv_cache_tokens=751 * 16,
    max_model_len=2_048,
    step_base_s=0.018,
    step_per_seq_s=0.00035,
    step_per_kv_token_s=0.0,
    prefill_token_s=0.00025,
)

PROFILES: dict[str, EngineProfile] = {
    p.name: p for p in (A10G_R1_14B_AWQ, RTX8G_QWEN25_1_5B, RTX8G_QWEN25_3B)
}
DEFAULT_PROFILE = A10G_R1_14B_AWQ.name


def get_profile(name: str) -> EngineProfile:
    """The named profile; a clear ValueError listing the known names otherwise."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown engine profile {name!r}; known profiles: {', '.join(sorted(PROFILES))}") from None
