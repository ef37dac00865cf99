"""Named engine profiles: one vLLM replica (GPU + checkpoint + engine flags + vLLM version) each,
derived from physics (`capacity.engine.roofline`) with the calibration fitted on
../shared/calibration/ only (`capacity.engine.fit`).

- `a10g-r1-14b-awq`: the calibrated replica itself;
- `<gpu>-<model>` (e.g. `h100-qwen2.5-7b-awq`): every model of the stacks on every GPU in
  data/gpus.yaml, with the stack's engine flags, so a GPU that was never rented can be simulated;
- `8gb-qwen2.5-1.5b`, `8gb-qwen2.5-3b-eager`: the 8 GB consumer-GPU references of the README;
- measured profiles (`capacity.engine.measured`: data/measured/<name>.yaml, written by
  `python -m capacity profile --from-sweep`): a swept replica with its fitted calibration, looked
  up by name when no profile above has it.

tests/capacity/engine/test_engine_calibration.py holds each reference profile to its measurements.
"""

from __future__ import annotations

from dataclasses import replace

from capacity.engine import measured
from capacity.engine.hardware import Checkpoint, Gpu, Interconnect, checkpoint, gpu
from capacity.engine.profile import EngineProfile
from capacity.engine.roofline import Calibration, SchedulerCost, memory_plan, scheduler_of, step_cost

# Fitted by capacity.engine.fit on ../shared/calibration/ only (the A10G sweep and the public
# measurements); `benchmarks/engine_accuracy.py --fit` refits them and prints the fit, its
# leave-one-source-out errors and the A10G sweep's.
CALIBRATED = Calibration(
    bandwidth={"gddr": 0.8377, "hbm": 0.9},
    compute=0.8725,
    gemm_fill=0.2386,
    schedulers={
        "v0": SchedulerCost(step_s=0.009148, seq_s=2.022e-06, server_s=0.002506),
        "v1": SchedulerCost(step_s=0.001490, seq_s=6.882e-06, server_s=0.007163),
    },
)
PINNED_VLLM = "0.25.1"  # the stacks' image, vllm/vllm-openai:v0.25.1
V0_WATERMARK = 0.01  # V0 CacheConfig/BlockSpaceManager watermark: 1% of the blocks stay free


def derive(
    name: str,
    model: Checkpoint,
    device: Gpu,
    *,
    max_model_len: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    gpu_memory_utilization: float = 0.90,
    calibration: Calibration = CALIBRATED,
    kv_cache_tokens: int | None = None,
    description: str = "",
    served_model_name: str = "",
    vllm_version: str = PINNED_VLLM,
    tensor_parallel_size: int = 1,
    interconnect: Interconnect | None = None,
) -> EngineProfile:
    """The profile of `model` on `device` with these vLLM flags on this vLLM version; KV capacity
    derived from memory unless measured (`kv_cache_tokens`). With `tensor_parallel_size` > 1 the
    replica spans that many GPUs (vLLM's --tensor-parallel-size): each holds its share of the
    weights and KV heads (`Architecture.split`), KV capacity is one GPU's (every rank caches the
    same tokens), and each step pays its collectives over `interconnect` (`roofline.Collectives`,
    EXTRAPOLATED: no calibration row has more than one GPU). A ValueError says why a replica
    cannot start."""
    scheduler = scheduler_of(vllm_version)
    shard = model.split(tensor_parallel_size) if tensor_parallel_size != 1 else model
    plan = memory_plan(shard, device, gpu_memory_utilization, max_num_batched_tokens, max_num_seqs)
    per_gpu = f" per GPU of {tensor_parallel_size}" if tensor_parallel_size > 1 else ""
    if plan.budget_bytes < plan.weight_bytes:
        raise ValueError(
            f"{name}: {model.repo} weights ({plan.weight_bytes / 2**30:.1f} GiB{per_gpu}) do not fit "
            f"{gpu_memory_utilization:.0%} of {device.description} ({plan.budget_bytes / 2**30:.1f} GiB)"
        )
    tokens = kv_cache_tokens if kv_cache_tokens is not None else plan.kv_tokens()
    if tokens < max_model_len:
        raise ValueError(
            f"{name}: {model.repo} on {tensor_parallel_size}x {device.description} leaves KV cache for {tokens} "
            f"tokens, fewer than max_model_len {max_model_len} (vLLM refuses to start)"
        )
    return EngineProfile(
        name=name,
        description=description
        or f"{tensor_parallel_size}x {device.description}, {model.repo}, max-num-seqs {max_num_seqs}, "
        f"batched-tokens {max_num_batched_tokens}",
        served_model_name=served_model_name or model.short,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        kv_cache_tokens=tokens,
        max_model_len=max_model_len,
        cost=step_cost(shard, device, calibration, scheduler, interconnect),
        vllm_version=vllm_version,
        server_s=calibration.schedulers[scheduler].server_s,
        watermark=V0_WATERMARK if scheduler == "v0" else 0.0,
        prefix_caching=scheduler == "v1",
        gpu=device.name,
        checkpoint=model.repo,
        tensor_parallel_size=tensor_parallel_size,
    )


def with_lmcache(profile: EngineProfile, cpu_bytes: int) -> EngineProfile:
    """The profile with LMCache's CPU tier of `cpu_bytes` (`engine.lmcache`): the tokens of its
    checkpoint's KV that fit, and the seconds a token's KV takes over its GPU's host link (the
    datasheet's one-way PCIe figure, nominal: a pinned copy reaches less, so the load is a lower
    bound). A ValueError names what the data lacks."""
    if not cpu_bytes:
        return replace(profile, lmcache_tokens=0, kv_load_s_per_token=0.0)
    if not profile.gpu or not profile.checkpoint:
        raise ValueError(f"profile {profile.name!r} names no GPU and checkpoint: LMCache's tier cannot be sized")
    device = gpu(profile.gpu)
    if device.host_link_gb_s is None:
        raise ValueError(f"{device.description}: data/gpus.yaml has no host_link_gb_s, so LMCache cannot be modelled")
    per_token = checkpoint(profile.checkpoint).architecture.kv_bytes_per_token
    return replace(
        profile,
        lmcache_tokens=cpu_bytes // per_token,
        kv_load_s_per_token=per_token / (device.host_link_gb_s * 1e9),
    )


def calibrated(calibration: Calibration = CALIBRATED) -> EngineProfile:
    """One A10G (g5.xlarge), DeepSeek-R1-Distill-Qwen-14B-AWQ, vLLM v0.25.1, --gpu-memory-utilization
    0.90 --max-num-seqs 40 --max-model-len 15000 --max-num-batched-tokens 2048 (the calibration run)."""
    return derive(
        "a10g-r1-14b-awq",
        checkpoint("DeepSeek-R1-Distill-Qwen-14B-AWQ"),
        gpu("a10g"),
        max_model_len=15_000,
        max_num_seqs=40,
        max_num_batched_tokens=2048,
        calibration=calibration,
        description="1x A10G 24GB, DeepSeek-R1-Distill-Qwen-14B-AWQ, max-num-seqs 40, batched-tokens 2048 (calibrated)",
        served_model_name="deepseek-r1-distill-qwen-14b-awq",
    )


def _eight_gb_references() -> list[EngineProfile]:
    """The README's 8 GB consumer-GPU runs, on an 8 GB Ampere card (data/gpus.yaml says why);
    their KV capacity is the block count those runs reported."""
    device = gpu("rtx-3070")
    return [
        # Qwen2.5-1.5B FP16: 6,382 KV blocks, ~2,600 generated tokens/s at 64 concurrent
        # requests, TTFT p50 31 ms at low load; KV ~11% at 64 concurrent short requests.
        derive(
            "8gb-qwen2.5-1.5b",
            checkpoint("Qwen/Qwen2.5-1.5B-Instruct"),
            device,
            max_model_len=32_768,
            max_num_seqs=256,
            max_num_batched_tokens=2048,
            kv_cache_tokens=6_382 * 16,
            description="1x 8GB consumer GPU, Qwen2.5-1.5B FP16 (compute-bound reference)",
            served_model_name="qwen2.5-1.5b",
        ),
        # Qwen2.5-3B FP16, --enforce-eager, 2k context: 751 KV blocks, ~670 generated tokens/s;
        # long requests fill the cache (99.5%), requests queue and TTFT p95 reaches seconds.
        derive(
            "8gb-qwen2.5-3b-eager",
            checkpoint("Qwen/Qwen2.5-3B-Instruct"),
            device,
            max_model_len=2048,
            max_num_seqs=256,
            max_num_batched_tokens=2048,
            kv_cache_tokens=751 * 16,
            description="1x 8GB consumer GPU, Qwen2.5-3B FP16, enforce-eager, 2k context (KV-bound reference)",
            served_model_name="qwen2.5-3b",
        ),
    ]


# The stacks' models with their engine flags (Pulumi.prod.yaml, Pulumi.dev.yaml; unset
# gpuMemoryUtilization is vLLM's default 0.90).
STACK_MODELS: tuple[tuple[str, dict[str, int]], ...] = (
    ("Qwen/Qwen2.5-14B-Instruct-AWQ", {"max_model_len": 15_000, "max_num_seqs": 40, "max_num_batched_tokens": 2048}),
    ("Qwen/Qwen2.5-7B-Instruct-AWQ", {"max_model_len": 16_384, "max_num_seqs": 64, "max_num_batched_tokens": 4096}),
    ("Qwen/Qwen2.5-1.5B-Instruct", {"max_model_len": 8192, "max_num_seqs": 64, "max_num_batched_tokens": 4096}),
)


STACK_GPUS = ("a10g", "l4", "l40s", "a100-80gb", "h100", "h200")


def _stack_profiles() -> tuple[list[EngineProfile], dict[str, str]]:
    offered, refused = [], {}
    for repo, flags in STACK_MODELS:
        model = checkpoint(repo)
        for device in map(gpu, STACK_GPUS):
            name = f"{device.name}-{model.short}"
            try:
                offered.append(derive(name, model, device, **flags))
            except ValueError as exc:
                refused[name] = str(exc)
    return offered, refused


_STACK, UNAVAILABLE = _stack_profiles()
PROFILES: dict[str, EngineProfile] = {p.name: p for p in (calibrated(), *_eight_gb_references(), *_STACK)}
DEFAULT_PROFILE = "a10g-r1-14b-awq"


def from_measured(record: measured.MeasuredProfile) -> EngineProfile:
    """A measured profile: its replica derived with the calibration its sweep fitted."""
    f = record.flags
    try:
        return derive(
            record.name,
            checkpoint(record.checkpoint),
            gpu(record.gpu),
            max_model_len=f.max_model_len,
            max_num_seqs=f.max_num_seqs,
            max_num_batched_tokens=f.max_num_batched_tokens,
            gpu_memory_utilization=f.gpu_memory_utilization,
            calibration=record.calibration,
            vllm_version=f.vllm_version,
            description=f"{record.gpu}, {record.checkpoint}, max-num-seqs {f.max_num_seqs}, batched-tokens "
            f"{f.max_num_batched_tokens}, vLLM {f.vllm_version} (measured: {record.sweep})",
        )
    except ValueError as exc:
        raise ValueError(f"measured profile {record.path}: {exc}") from None


def profile_names() -> list[str]:
    """Every name `get_profile` accepts: the physics profiles and the measured ones found by name."""
    return sorted([*PROFILES, *measured.names()])


def get_profile(name: str) -> EngineProfile:
    """The named profile; a clear ValueError saying why it is not offered, or listing the known names."""
    if name in UNAVAILABLE:
        raise ValueError(f"engine profile {name!r} is not offered: {UNAVAILABLE[name]}")
    if name in PROFILES:
        return PROFILES[name]
    record = measured.find(name)
    if record is not None:
        return from_measured(record)
    raise ValueError(f"unknown engine profile {name!r}; known profiles: {', '.join(profile_names())}")
