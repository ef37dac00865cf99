"""One engine step's duration from physics: per-kernel rooflines over the model's bytes and FLOPs.

A step (one forward pass over the batch) costs

    step_s + seq_s * sequences                                   (CPU: scheduler, inputs, sampler)
    + max(weights + activations read / bandwidth, linear FLOPs / GEMM rate)       (the matmuls)
    + max(KV read / bandwidth, attention FLOPs / attention rate)                  (attention)

The matmuls and attention are separate kernels, so each has its own roofline and they add.
- bandwidth: the datasheet's times the achieved fraction of its memory class (GDDR or HBM);
- GEMM rate: the GPU's SUSTAINED dense FLOP/s (a torch.matmul measurement: power and clock limits
  included) times a fitted fraction, at a batch of `tokens` rows reaching tokens / (tokens +
  fill_tokens) of it: a matmul needs enough rows to fill the SMs, which a small decode batch or a
  small prefill chunk does not (fill_tokens = a fitted fraction of the GPU's ridge point, the
  FLOP per byte where its compute and bandwidth roofs meet);
- attention rate: the GEMM rate times ATTENTION_VS_GEMM; decode attention reads every context
  token's K/V (memory), long prefill attends c x context pairs (compute).

`StepCost` holds those terms as seconds per unit, derived by `step_cost` from a checkpoint, a GPU,
the fitted `Calibration` (capacity.engine.fit, on ../shared/calibration/ only) and the scheduler
version's CPU costs. A pure decode batch of b sequences grows its context by b tokens per step;
its matmul side is constant and its attention side linear in the context, so k decode steps sum to
an arithmetic series: `decode_span` / `decode_steps_within` sum and invert it in closed form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from capacity.engine.architecture import ACT_BYTES
from capacity.engine.hardware import Checkpoint, Gpu, Interconnect

# Memory vLLM holds outside weights, KV cache and the profiled activations: the CUDA context's
# non-torch allocations (cuBLAS/NCCL workspaces) and the CUDA graph pool; vLLM's startup log
# reports a few hundred MiB of each on one GPU. Checked against the calibration's KV usage.
RUNTIME_RESERVE_BYTES = 2**29  # 0.5 GiB
SAMPLER_COPIES = 2  # FP32 logits and probabilities for every sequence in vLLM's profiling run
# FlashAttention-2 forward reaches 50-73% of the A100's peak where cuBLAS GEMMs reach ~80-90%
# (Dao, "FlashAttention-2", 2023, section 4.1): attention runs at about 0.7 of the GEMM rate.
ATTENTION_VS_GEMM = 0.7
SCHEDULERS = ("v0", "v1")
# A fit bound, not a measurement: DRAM never streams its full datasheet rate (refresh, bank and
# page overheads), so the search may not trade per-step CPU time for bandwidth beyond this.
MAX_BANDWIDTH_FRACTION = 0.9


@dataclass(frozen=True)
class SchedulerCost:
    """CPU time of a vLLM engine generation: per engine step (fixed, and per sequence), and the
    API server's per request (tokenize, detokenize, HTTP/SSE). V1 runs the API server in its own
    process in front of the engine core; V0 runs both on one event loop, so there a request's
    server time stalls the engine too (replica.py)."""

    step_s: float
    seq_s: float
    server_s: float = 0.0


@dataclass(frozen=True)
class Calibration:
    """What is fitted (capacity.engine.fit, on ../shared/calibration/ only), and nothing else:
    achieved bandwidth per memory class, the achieved fraction of the sustained GEMM rate, the
    GEMM fill (fraction of the ridge point), and each engine generation's CPU costs: per step,
    per sequence, and the API server's per request (tokenize, detokenize, HTTP/SSE)."""

    bandwidth: dict[str, float]  # memory class -> achieved fraction of the datasheet bandwidth
    compute: float  # achieved fraction of the sustained GEMM FLOP/s
    gemm_fill: float  # fill_tokens = gemm_fill x ridge point (FLOP/byte)
    schedulers: dict[str, SchedulerCost]  # "v0" (vLLM < 0.7), "v1" (>= 0.7)

    def __post_init__(self) -> None:
        if not all(0 < f <= 1 for f in self.bandwidth.values()) or not 0 < self.compute <= 1.5:
            raise ValueError(f"calibration fractions out of range: {self}")
        costs = [v for c in self.schedulers.values() for v in (c.step_s, c.seq_s, c.server_s)]
        if self.gemm_fill < 0 or min(costs) < 0 or set(self.schedulers) != set(SCHEDULERS):
            raise ValueError(f"calibration out of range: {self}")

    def as_vector(self) -> list[float]:
        return [
            self.bandwidth["gddr"],
            self.bandwidth["hbm"],
            self.compute,
            self.gemm_fill,
            *(getattr(self.schedulers[g], k) for g in SCHEDULERS for k in ("step_s", "seq_s", "server_s")),
        ]

    @classmethod
    def from_vector(cls, v: list[float]) -> Calibration:
        """The calibration of a search vector; bandwidth clipped at MAX_BANDWIDTH_FRACTION."""
        return cls(
            bandwidth={"gddr": min(v[0], MAX_BANDWIDTH_FRACTION), "hbm": min(v[1], MAX_BANDWIDTH_FRACTION)},
            compute=min(v[2], 1.5),
            gemm_fill=v[3],
            schedulers={"v0": SchedulerCost(v[4], v[5], v[6]), "v1": SchedulerCost(v[7], v[8], v[9])},
        )


def scheduler_of(vllm_version: str) -> str:
    """vLLM's engine generation for a version string: "v0" (prefill-first, before 0.7: V1 became
    the default engine in v0.8.0 and was an opt-in from v0.7; the published pre-0.7 runs are V0)
    or "v1" (chunked prefill, one token budget shared by decodes and prefills)."""
    text = vllm_version.strip().lstrip("v~").split()[0]
    try:
        major, minor = (int(x.rstrip("x")) for x in text.split(".")[:2])
    except ValueError:
        raise ValueError(f"vllm_version {vllm_version!r} is not a version like 0.6.3 or 0.25.1") from None
    return "v0" if (major, minor) < (0, 7) else "v1"


# NCCL's own cost model of a ring collective on one node (NVIDIA/nccl src/graph/tuning.cc at
# b6475625fbcaa2c3c0e50eed2fa1255d7514d4a2, ncclTopoTuneModel and ncclTopoGetAlgoTime): a call
# takes baseLat + nsteps x hwLat[link] microseconds plus bytes / algBw, algBw = busBw x n / nsteps
# (nsteps: 2(n-1) for an all-reduce, n-1 for an all-gather; so an all-reduce moves 2(n-1)/n x
# bytes over each link, nccl-tests doc/PERFORMANCE.md), and NCCL runs the protocol predicted
# fastest. Per protocol: (baseLat, hwLat NVLink, hwLat PCI) in us, busBw factor for an all-reduce
# and for an all-gather (LL: 1/4 and 1/3; LL128: 0.92, enabled by default on NVLink only).
# LL's bus bandwidth is capped at llMaxBws[Ampere/Hopper][one node] = 87.7 GB/s (every GPU listed
# is Ampere or newer). Tree, NVLS and vLLM's custom all-reduce kernels are not modelled.
NCCL_RING_PROTOCOLS: dict[str, tuple[float, float, float, float, float]] = {
    "LL": (6.6, 0.6, 1.0, 1 / 4, 1 / 3),
    "LL128": (14.0, 1.9, 2.5, 0.92, 0.92),
    "Simple": (8.4, 3.4, 5.7, 1.0, 1.0),
}
NCCL_LL_MAX_BUS_BANDWIDTH = 87.7e9


@dataclass(frozen=True)
class Collectives:
    """The communication of one step of a tensor-parallel replica (EXTRAPOLATED: no calibration
    row has more than one GPU): `allreduces` all-reduces of every scheduled token's hidden state,
    and one all-gather of the sampled positions' logits (vLLM LogitsProcessor._gather_logits), as
    NCCL rings over the instance's link. vLLM does not overlap them with compute: they add."""

    ranks: int
    link: str  # "pcie" or "nvlink"
    bus_bandwidth_bytes_s: float
    allreduces: int
    allreduce_bytes_per_token: int
    gather_bytes_per_sample: int
    time_scale: float = 1.0  # StepCost.scaled: a pessimistic bound or an error-band edge scales these too

    def _ring(self, nbytes: float, steps: int, collective: int) -> float:
        best = math.inf
        for name, (base, nvlink, pci, *factors) in NCCL_RING_PROTOCOLS.items():
            if name == "LL128" and self.link != "nvlink":
                continue
            latency = (base + steps * (nvlink if self.link == "nvlink" else pci)) * 1e-6
            bus = self.bus_bandwidth_bytes_s * factors[collective]
            if name == "LL":
                bus = min(bus, NCCL_LL_MAX_BUS_BANDWIDTH)
            bandwidth = bus * self.ranks / steps
            best = min(best, latency + nbytes / bandwidth)
        return best

    def allreduce_time(self, nbytes: float) -> float:
        return self._ring(nbytes, 2 * (self.ranks - 1), 0)

    def allgather_time(self, nbytes: float) -> float:
        return self._ring(nbytes, self.ranks - 1, 1)

    def time(self, tokens: int, sampled: int) -> float:
        """Seconds one step spends in collectives for `tokens` scheduled, `sampled` sampled."""
        reduce = self.allreduces * self.allreduce_time(tokens * self.allreduce_bytes_per_token)
        gather = self.allgather_time(sampled * self.gather_bytes_per_sample) if sampled else 0.0
        return (reduce + gather) * self.time_scale


@dataclass(frozen=True)
class StepCost:
    """Seconds per unit of each term (see the module docstring); `comm`: a tensor-parallel
    replica's collectives (None on one GPU)."""

    step_s: float = 0.0  # fixed cost of one step
    seq_s: float = 0.0  # per sequence in the step
    weights_s: float = 0.0  # reading the weights once
    kv_token_s: float = 0.0  # reading one context token's K and V
    act_token_s: float = 0.0  # one scheduled token's activation traffic
    token_s: float = 0.0  # one scheduled token through the linear layers at the full GEMM rate
    sample_s: float = 0.0  # lm_head for one sampled sequence
    attn_pair_s: float = 0.0  # one query token attending to one context token
    fill_tokens: float = 0.0  # rows a matmul needs to reach half its rate (GEMM fill)
    comm: Collectives | None = None

    def __post_init__(self) -> None:
        for key, value in vars(self).items():
            if not isinstance(value, Collectives) and value is not None and value < 0:
                raise ValueError(f"step cost {key} must be >= 0, got {value}")
        if self.step_s <= 0 and self.seq_s <= 0 and self.weights_s <= 0 and self.token_s <= 0:
            raise ValueError("a step must take time (step_s, seq_s, weights_s or token_s > 0)")

    def scaled(self, factor: float) -> StepCost:
        """Every step `factor` times as long: each seconds-per-unit term scaled, the GEMM fill (a
        row count) kept. Each side of every roofline scales alike, so `step_time` is exactly
        `factor` x, the bound (memory or compute) is unchanged, and the decode series stay
        consistent with it (capacity/planning/plan.py's pessimistic bound and error band)."""
        if not factor > 0:
            raise ValueError(f"a step-time scale must be > 0, got {factor}")
        seconds = {key: value * factor for key, value in vars(self).items() if key not in ("fill_tokens", "comm")}
        comm = None if self.comm is None else replace(self.comm, time_scale=self.comm.time_scale * factor)
        return replace(self, **seconds, comm=comm)

    # --- one step --------------------------------------------------------------------------
    def linear_memory_time(self, tokens: int) -> float:
        return self.weights_s + self.act_token_s * tokens

    def linear_compute_time(self, tokens: int, sampled: int) -> float:
        return self.token_s * (tokens + self.fill_tokens) + self.sample_s * sampled

    def memory_time(self, tokens: int, kv_tokens: int) -> float:
        return self.linear_memory_time(tokens) + self.kv_token_s * kv_tokens

    def compute_time(self, tokens: int, sampled: int, pairs: int) -> float:
        return self.linear_compute_time(tokens, sampled) + self.attn_pair_s * pairs

    def step_time(self, seqs: int, tokens: int, sampled: int, kv_tokens: int, pairs: int) -> float:
        """One step over `seqs` sequences computing `tokens` tokens (`sampled` of them sampled),
        reading `kv_tokens` cached tokens' K/V, with `pairs` (query, context) attention pairs."""
        # linear_memory_time(tokens) and linear_compute_time(tokens, sampled), inline (a hot path)
        lm = self.weights_s + self.act_token_s * tokens
        lc = self.token_s * (tokens + self.fill_tokens) + self.sample_s * sampled
        am, ac = self.kv_token_s * kv_tokens, self.attn_pair_s * pairs
        t = self.step_s + self.seq_s * seqs + (lm if lm > lc else lc) + (am if am > ac else ac)
        return t if self.comm is None else t + self.comm.time(tokens, sampled)

    def decode_step(self, b: int, ctx: int) -> float:
        """A pure decode step: b sequences with `ctx` cached tokens in total."""
        return self.step_time(b, b, b, ctx, ctx)

    def memory_bound(self, tokens: int, sampled: int, kv_tokens: int, pairs: int) -> bool:
        return self.memory_time(tokens, kv_tokens) >= self.compute_time(tokens, sampled, pairs)

    # --- many pure decode steps (context grows by b per step) ------------------------------
    def decode_line(self, b: int, ctx: int) -> DecodeLine:
        """The pure-decode steps of b sequences from `ctx` cached tokens: step j takes a + g*j
        (the matmul side is constant in j, attention linear); its first step is exactly
        `decode_step(b, ctx)` (max(kv*ctx, attn*ctx) == max(kv, attn)*ctx for ctx >= 0)."""
        return _line(self.decode_terms(b), self.decode_per_ctx, b, ctx)

    @property
    def decode_per_ctx(self) -> float:
        """A decode step's attention per cached token (the larger of its two roofs)."""
        return self.kv_token_s if self.kv_token_s > self.attn_pair_s else self.attn_pair_s

    def decode_terms(self, b: int) -> tuple[float, float | None]:
        """The terms of a decode line that depend on b only: its first step's time before
        attention, and its collectives' time (None on one GPU)."""
        lm, lc = self.linear_memory_time(b), self.linear_compute_time(b, b)
        head = self.step_s + self.seq_s * b + (lm if lm > lc else lc)
        return head, (None if self.comm is None else self.comm.time(b, b))

    def decode_span(self, b: int, ctx: int, k: int) -> float:
        """Duration of k pure-decode steps of b sequences starting from `ctx` cached tokens."""
        return self.decode_line(b, ctx).span(k)

    def decode_steps_within(self, b: int, ctx: int, dt: float) -> int:
        """Largest k with decode_span(b, ctx, k) <= dt."""
        return self.decode_line(b, ctx).steps_within(dt)


def _line(terms: tuple[float, float | None], per_ctx: float, b: int, ctx: int) -> DecodeLine:
    """The decode line of b sequences from `ctx` cached tokens, from its b-only terms."""
    head, comm = terms
    a = head + per_ctx * ctx
    if comm is not None:
        a += comm
    return DecodeLine(a, per_ctx * b)


class DecodeLines:
    """`StepCost.decode_line` with its b-only terms kept per batch size: an engine asks for a
    line per decode segment, over a few batch sizes."""

    __slots__ = ("_cost", "_per_ctx", "_terms")

    def __init__(self, cost: StepCost) -> None:
        self._cost = cost
        self._per_ctx = cost.decode_per_ctx
        self._terms: dict[int, tuple[float, float | None]] = {}

    def line(self, b: int, ctx: int) -> DecodeLine:
        terms = self._terms.get(b)
        if terms is None:
            terms = self._terms[b] = self._cost.decode_terms(b)
        head, comm = terms  # == _line(terms, per_ctx, b, ctx), inline: one per decode segment
        per_ctx = self._per_ctx
        a = head + per_ctx * ctx
        if comm is not None:
            a += comm
        return DecodeLine(a, per_ctx * b)


class DecodeLine:
    """Pure-decode steps whose j-th takes `first + slope * j` seconds, summed and inverted in
    closed form; the engine asks one line several questions per decode segment."""

    __slots__ = ("first", "slope")

    def __init__(self, first: float, slope: float) -> None:
        self.first = first
        self.slope = slope

    def span(self, k: int) -> float:
        """Duration of the first k steps."""
        return k * self.first + self.slope * k * (k - 1) / 2

    def steps_within(self, dt: float) -> int:
        """Largest k with span(k) <= dt: k*t0 + c2*k*(k-1)/2 <= dt for the line t0 + c2*j."""
        t0, c2 = self.first, self.slope
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


def step_cost(
    checkpoint: Checkpoint,
    gpu: Gpu,
    calibration: Calibration,
    scheduler: str = "v1",
    interconnect: Interconnect | None = None,
) -> StepCost:
    """The step-cost terms of one checkpoint on one GPU under one scheduler generation. A
    checkpoint split over tensor-parallel GPUs (`Checkpoint.split`) costs one GPU's share of the
    weights, FLOPs and KV, plus its collectives over `interconnect` (required then)."""
    a = checkpoint.architecture
    bandwidth = gpu.bandwidth_bytes_s * calibration.bandwidth[gpu.memory_class]
    flops = gpu.sustained_flops(checkpoint.quantization.compute) * calibration.compute
    cpu = calibration.schedulers[scheduler]
    ridge = flops / bandwidth  # FLOP per byte where the two roofs meet
    comm = None
    if a.tensor_parallel > 1:
        if interconnect is None:
            raise ValueError(
                f"{checkpoint.repo}: tensor parallel size {a.tensor_parallel} needs the GPUs' interconnect"
            )
        comm = Collectives(
            ranks=a.tensor_parallel,
            link=interconnect.kind,
            bus_bandwidth_bytes_s=interconnect.bus_bandwidth_bytes_s,
            allreduces=a.allreduces_per_step,
            allreduce_bytes_per_token=a.allreduce_bytes_per_token,
            gather_bytes_per_sample=a.vocab_size * ACT_BYTES,
        )
    return StepCost(
        step_s=cpu.step_s,
        seq_s=cpu.seq_s,
        weights_s=checkpoint.weight_bytes_read_per_step / bandwidth,
        kv_token_s=a.kv_bytes_per_token / bandwidth,
        act_token_s=a.activation_bytes_per_token / bandwidth,
        token_s=checkpoint.linear_flops_per_token / flops,
        sample_s=checkpoint.lm_head_flops_per_sample / flops,
        attn_pair_s=a.attention_flops_per_pair / (flops * ATTENTION_VS_GEMM),
        fill_tokens=calibration.gemm_fill * ridge,
        comm=comm,
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
