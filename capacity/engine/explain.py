"""What limits a replica at one operating point: the prediction plus its binding bound.

For `python -m capacity model`: the closed-loop steady state (`predict`) and which of the four
bounds holds it back:
- "kv-capacity": the KV cache is (nearly) full and requests queue for blocks;
- "scheduler": more clients than `max_num_seqs`, so requests wait for a batch slot;
- "memory" / "compute": otherwise, the roofline side that bounds most busy engine steps
  (memory: bytes of weights + KV read; compute: FLOPs of prefill chunks and decode tokens).
The memory bound names the GPU's memory type (data/gpus.yaml memory_class): an A10G or L4 reads
GDDR6, an A100 or H100 HBM.
"""

from __future__ import annotations

from dataclasses import dataclass

from capacity.engine.hardware import gpus
from capacity.engine.profile import EngineProfile
from capacity.engine.steady_state import SteadyState, predict

KV_FULL = 0.85  # average KV usage from which requests queue for free blocks (block rounding, growth)
BOUNDS = ("memory", "compute", "kv-capacity", "scheduler")


@dataclass(frozen=True)
class Explained:
    state: SteadyState
    bound: str  # one of BOUNDS
    why: str


def limiting_bound(profile: EngineProfile, state: SteadyState) -> tuple[str, str]:
    """(bound, one-line reason) for a steady state of `profile`."""
    if state.avg_kv_usage >= KV_FULL and state.avg_waiting >= 0.5:
        return "kv-capacity", (
            f"KV cache {state.avg_kv_usage:.0%} full on average ({profile.kv_cache_tokens} tokens), "
            f"{state.avg_waiting:.1f} requests waiting"
        )
    if state.concurrency > profile.max_num_seqs:
        return "scheduler", f"{state.concurrency} clients for max_num_seqs {profile.max_num_seqs} batch slots"
    share = state.memory_bound_share
    if share >= 0.5:
        return (
            "memory",
            f"{share:.0%} of busy steps bound by {memory_type(profile)} bandwidth (weights + KV read)",
        )
    return "compute", f"{1 - share:.0%} of busy steps bound by FLOPs (prefill chunks + decode tokens)"


MEMORY_TYPES = {"gddr": "GDDR", "hbm": "HBM"}  # data/gpus.yaml memory_class -> what its datasheet says


def memory_type(profile: EngineProfile) -> str:
    """The memory a profile's GPU reads its bytes from ('GDDR', 'HBM'; 'memory' when unknown)."""
    device = gpus().get(profile.gpu)
    return MEMORY_TYPES[device.memory_class] if device is not None else "memory"


def explain(
    profile: EngineProfile, concurrency: int, prompt_tokens: int, output_tokens: int, seed: int = 0
) -> Explained:
    """The closed-loop steady state at one point and the bound that limits it."""
    state = predict(profile, concurrency, prompt_tokens, output_tokens, seed=seed)
    bound, why = limiting_bound(profile, state)
    return Explained(state, bound, why)
