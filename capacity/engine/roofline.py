"""One engine step's duration from physics: a roofline over the model's bytes and FLOPs.

A step (one forward pass over the batch) costs

    step_s + seq_s * sequences + max(memory time, compute time)

memory time  = (weights read + KV read for every context token + activation traffic) / achieved bandwidth
compute time = (linear FLOPs per scheduled token + lm_head FLOPs per sampled sequence
                + attention FLOPs per (query, context) token pair) / achieved FLOP/s

`StepCost` holds those terms as seconds per unit, derived by `step_cost` from a checkpoint, a GPU
and the efficiency factors (fitted on ../shared/calibration/ by `capacity.engine.fit`). A pure
decode batch of b sequences grows its context by b tokens per step, so both roofline sides are
linear in the step index and the step time is piecewise linear with at most one crossover:
`decode_span` / `decode_steps_within` sum and invert it in closed form (no per-step loop).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from capacity.engine.hardware import Checkpoint, Gpu

# Memory vLLM holds outside weights, KV cache and the profiled activations: the CUDA context's
# non-torch allocations (cuBLAS/NCCL workspaces) and the CUDA graph pool; vLLM's startup log
# reports a few hundred MiB of each on one GPU. Checked against the calibration's KV usage.
RUNTIME_RESERVE_BYTES = 2**29  # 0.5 GiB
SAMPLER_COPIES = 2  # FP32 logits and probabilities for every sequence in vLLM's profiling run


@dataclass(frozen=True)
class Efficiency:
    """The three fitted factors: achieved fractions of the datasheet peaks, and a fixed per-step
    overhead (scheduler, input preparation, sampling, kernel launches)."""

    bandwidth: float
    flops: float
    step_overhead_s: float

    def __post_init__(self) -> None:
        if not (0 < self.bandwidth <= 1 and 0 < self.flops <= 1) or self.step_overhead_s < 0:
            raise ValueError(f"efficiency factors out of range: {self}")


@dataclass(frozen=True)
class StepCost:
    """Seconds per unit of each roofline term (see the module docstring)."""

    step_s: float = 0.0  # fixed cost of one step
    seq_s: float = 0.0  # per sequence in the step
    weights_s: float = 0.0  # reading the weights once
    kv_token_s: float = 0.0  # reading one context token's K and V
    act_token_s: float = 0.0  # one scheduled token's activation traffic
    token_s: float = 0.0  # one scheduled token through the linear layers
    sample_s: float = 0.0  # lm_head for one sampled sequence
    attn_pair_s: float = 0.0  # one query token attending to one context token

    def __post_init__(self) -> None:
        for key, value in vars(self).items():
            if value < 0:
                raise ValueError(f"step cost {key} must be >= 0, got {value}")
        if self.step_s <= 0 and self.seq_s <= 0 and self.weights_s <= 0 and self.token_s <= 0:
            raise ValueError("a step must take time (step_s, seq_s, weights_s or token_s > 0)")

    # --- one step --------------------------------------------------------------------------
    def memory_time(self, tokens: int, kv_tokens: int) -> float:
        return self.weights_s + self.kv_token_s * kv_tokens + self.act_token_s * tokens

    def compute_time(self, tokens: int, sampled: int, pairs: int) -> float:
        return self.token_s * tokens + self.sample_s * sampled + self.attn_pair_s * pairs

    def step_time(self, seqs: int, tokens: int, sampled: int, kv_tokens: int, pairs: int) -> float:
        """One step over `seqs` sequences computing `tokens` tokens (`sampled` of them sampled),
        reading `kv_tokens` cached tokens' K/V, with `pairs` (query, context) attention pairs."""
        memory = self.memory_time(tokens, kv_tokens)
        compute = self.compute_time(tokens, sampled, pairs)
        return self.step_s + self.seq_s * seqs + (memory if memory > compute else compute)

    def decode_step(self, b: int, ctx: int) -> float:
        """A pure decode step: b sequences with `ctx` cached tokens in total."""
        return self.step_time(b, b, b, ctx, ctx)

    def memory_bound(self, tokens: int, sampled: int, kv_tokens: int, pairs: int) -> bool:
        return self.memory_time(tokens, kv_tokens) >= self.compute_time(tokens, sampled, pairs)

    # --- many pure decode steps (context grows by b per step) ------------------------------
    def _decode_lines(self, b: int, ctx: int) -> tuple[float, float, float, float, float]:
        """Step j's time as max of two lines a + g*j: (a1, g1) until step jx, then (a2, g2)
        (a2 already shifted to start at jx); jx = inf when one side dominates throughout."""
        fixed = self.step_s + self.seq_s * b
        am = fixed + self.weights_s + self.act_token_s * b + self.kv_token_s * ctx
        gm = self.kv_token_s * b
        ac = fixed + (self.token_s + self.sample_s) * b + self.attn_pair_s * ctx
        gc = self.attn_pair_s * b
        if (am, gm) < (ac, gc):
            am, gm, ac, gc = ac, gc, am, gm  # (am, gm): the side that is larger at j = 0
        if gc <= gm:
            return am, gm, math.inf, am, gm
        jx = math.floor((am - ac) / (gc - gm)) + 1  # first step where the other side is larger
        return am, gm, jx, ac + gc * jx, gc

    def decode_span(self, b: int, ctx: int, k: int) -> float:
        """Duration of k pure-decode steps of b sequences starting from `ctx` cached tokens."""
        a1, g1, jx, a2, g2 = self._decode_lines(b, ctx)
        if k <= jx:
            return k * a1 + g1 * k * (k - 1) / 2
        k1, k2 = int(jx), k - int(jx)
        return (k1 * a1 + g1 * k1 * (k1 - 1) / 2) + (k2 * a2 + g2 * k2 * (k2 - 1) / 2)

    def decode_steps_within(self, b: int, ctx: int, dt: float) -> int:
        """Largest k with decode_span(b, ctx, k) <= dt."""
        a1, g1, jx, a2, g2 = self._decode_lines(b, ctx)
        k = _steps_within(dt, a1, g1)
        if k < jx:
            return k
        k1 = int(jx)
        first = k1 * a1 + g1 * k1 * (k1 - 1) / 2
        k = k1 + _steps_within(dt - first, a2, g2)
        while k > k1 and self.decode_span(b, ctx, k) > dt + 1e-12:
            k -= 1  # the two-piece sum rounds differently from its parts
        return k


def _steps_within(dt: float, t0: float, c2: float) -> int:
    """Largest k with k*t0 + c2*k*(k-1)/2 <= dt: how many steps of a line t0 + c2*j fit in dt."""
    if dt <= 0 or t0 > dt + 1e-12:
        return 0
    if c2 <= 0:
        return int(dt / t0 + 1e-9)
    # (c2/2) k^2 + (t0 - c2/2) k - dt <= 0
    a, bq = c2 / 2, t0 - c2 / 2
    k = int((-bq + math.sqrt(bq * bq + 4 * a * dt)) / (2 * a) + 1e-9)
    while k > 0 and k * t0 + c2 * k * (k - 1) / 2 > dt + 1e-12:
        k -= 1
    return k


def step_cost(checkpoint: Checkpoint, gpu: Gpu, efficiency: Efficiency) -> StepCost:
    """The roofline terms of one checkpoint on one GPU at the given efficiencies."""
    a = checkpoint.architecture
    bandwidth = gpu.bandwidth_bytes_s * efficiency.bandwidth
    flops = gpu.peak_flops(checkpoint.quantization.compute) * efficiency.flops
    return StepCost(
        step_s=efficiency.step_overhead_s,
        weights_s=checkpoint.weight_bytes_read_per_step / bandwidth,
        kv_token_s=a.kv_bytes_per_token / bandwidth,
        act_token_s=a.activation_bytes_per_token / bandwidth,
        token_s=checkpoint.linear_flops_per_token / flops,
        sample_s=checkpoint.lm_head_flops_per_sample / flops,
        attn_pair_s=a.attention_flops_per_pair / flops,
    )


@dataclass(frozen=True)
class MemoryPlan:
    """How vLLM splits gpu_memory_utilization x GPU memory; what is left holds the KV cache."""

    budget_bytes: float
    weight_bytes: float
    activation_bytes: float
    runtime_bytes: float
    kv_bytes_per_token: int

    @property
    def kv_bytes(self) -> float:
        return self.budget_bytes - self.weight_bytes - self.activation_bytes - self.runtime_bytes

    def kv_tokens(self, block_size: int = 16) -> int:
        blocks = int(self.kv_bytes // (self.kv_bytes_per_token * block_size))
        return max(blocks, 0) * block_size


def memory_plan(
    checkpoint: Checkpoint, gpu: Gpu, gpu_memory_utilization: float, max_num_batched_tokens: int, max_num_seqs: int
) -> MemoryPlan:
    """vLLM's KV sizing: utilization x memory - weights - peak activations of a profiling pass
    (max_num_batched_tokens tokens, sampler logits for max_num_seqs) - runtime reserve."""
    a = checkpoint.architecture
    activations = max_num_batched_tokens * a.peak_activation_bytes_per_token
    sampler = SAMPLER_COPIES * max_num_seqs * a.vocab_size * 4
    return MemoryPlan(
        budget_bytes=gpu_memory_utilization * gpu.memory_bytes,
        weight_bytes=checkpoint.weight_bytes,
        activation_bytes=activations + sampler,
        runtime_bytes=RUNTIME_RESERVE_BYTES,
        kv_bytes_per_token=a.kv_bytes_per_token,
    )
