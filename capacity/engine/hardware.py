"""Checkpoints and GPUs as typed data (data/models.yaml, data/gpus.yaml, sources cited there),
with the byte and FLOP counts of one forward pass that the roofline needs. Architectures are
config.json fields (capacity.engine.architecture derives their shapes)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import yaml

from capacity.engine.architecture import (
    ACT_BYTES,
    Architecture,
    ArchitectureError,
    TensorParallelError,
    from_config,
    read_config,
)

DATA = Path(__file__).with_name("data")
MARLIN_MIN_THREAD_N = 64
MARLIN_MIN_THREAD_K = 128


@dataclass(frozen=True)
class Quantization:
    name: str
    linear_bits: int
    group_size: int
    group_overhead_bytes: float
    compute: str  # which tensor-core datatype the matrix multiplies run in ("fp16", "fp8", "int8")
    source: str = ""

    @property
    def linear_bytes_per_param(self) -> float:
        overhead = self.group_overhead_bytes / self.group_size if self.group_size else 0.0
        return self.linear_bits / 8 + overhead


@dataclass(frozen=True)
class Checkpoint:
    """A served model: an architecture stored in a weight format."""

    repo: str
    short: str
    architecture: Architecture
    quantization: Quantization
    revision: str = ""

    @property
    def lm_head_params(self) -> int:
        return self.architecture.embedding_params

    @property
    def weight_bytes(self) -> float:
        """Bytes resident in GPU memory: quantized linear layers, FP16 embeddings (and lm_head
        when untied), norms and biases."""
        a = self.architecture
        embeddings = a.embedding_params * (1 if a.tie_word_embeddings else 2)
        return a.linear_params * self.quantization.linear_bytes_per_param + ACT_BYTES * (embeddings + a.small_params)

    @property
    def tensor_parallel(self) -> int:
        return self.architecture.tensor_parallel

    def split(self, tp: int) -> Checkpoint:
        """One GPU's share of a `tp`-GPU tensor-parallel replica (`Architecture.split`); a
        ValueError says why vLLM refuses it, the quantized kernels' shape rules included."""
        shard = replace(self, architecture=self.architecture.split(tp))
        problems = shard.kernel_shape_problems()
        if problems:
            raise TensorParallelError(f"{self.repo} at tensor parallel size {tp}: " + "; ".join(problems))
        return shard

    def kernel_shape_problems(self) -> list[str]:
        """A grouped 4-bit checkpoint runs on vLLM's Marlin kernels, which refuse a weight shard
        whose output is not a multiple of 64, whose input is not a multiple of 128 or of the group
        size (vllm model_executor/layers/quantization/utils/marlin_utils.py,
        verify_marlin_supports_shape: GPTQ_MARLIN_MIN_THREAD_N 64, GPTQ_MARLIN_MIN_THREAD_K 128).
        Sharded by tensor parallelism: qkv and gate/up outputs, o_proj and down_proj inputs."""
        group = self.quantization.group_size
        if not group:
            return []
        a = self.architecture
        problems = []
        for name, size in (("qkv_proj output", a.qkv_dim), ("gate_up_proj output", a.intermediate_per_rank)):
            if size % MARLIN_MIN_THREAD_N:
                problems.append(f"{name} per GPU ({size}) is not a multiple of {MARLIN_MIN_THREAD_N}")
        for name, size in (("o_proj input", a.q_dim), ("down_proj input", a.intermediate_per_rank)):
            for multiple in sorted({MARLIN_MIN_THREAD_K, group}):
                if size % multiple:
                    problems.append(f"{name} per GPU ({size}) is not a multiple of {multiple}")
        return problems

    @property
    def weight_bytes_read_per_step(self) -> float:
        """Bytes every forward pass streams from HBM: all linear layers and the lm_head (the
        input embedding is a gather of a few rows, not a read of the table). A MoE counts every
        expert: an upper bound at small batches, which route to fewer of them."""
        a = self.architecture
        return a.linear_params * self.quantization.linear_bytes_per_param + ACT_BYTES * (
            self.lm_head_params + a.small_params
        )

    @property
    def linear_flops_per_token(self) -> int:
        """2 FLOPs per weight per token through the decoder's linear layers it runs (a MoE's
        routed experts only)."""
        return 2 * self.architecture.active_linear_params

    @property
    def lm_head_flops_per_sample(self) -> int:
        """vLLM computes logits only for the positions it samples (one per sequence in the step)."""
        return 2 * self.lm_head_params


MEMORY_CLASSES = ("gddr", "hbm")
# A GPU without a GEMM measurement sustains this fraction of its datasheet dense FP16 figure: the
# median sustained / datasheet ratio of the measured GPUs in data/gpus.yaml (L4 0.46, A100 0.66,
# H100 0.78, A10G 0.96), computed by `sustained_ratio` from the file itself.
SUSTAINED_RATIO_SOURCE = "median sustained/datasheet FP16 ratio of the GPUs measured in data/gpus.yaml"


@dataclass(frozen=True)
class Gpu:
    name: str
    description: str
    memory_gb: float
    memory_mib: int
    bandwidth_gb_s: float
    fp16_tflops: float
    int8_tops: float | None
    fp8_tflops: float | None
    source: str = ""
    memory_class: str = "hbm"
    sustained_fp16_tflops: float | None = None  # torch.matmul GEMM measurement; None: derived
    sustained_source: str = ""
    sustained_from: str | None = None  # another GPU's measurement applies (same die, clocks, power)
    board_power_w: float | None = None
    board_power_source: str = ""
    derived_sustained_ratio: float = 0.0  # set by `gpus()` for a GPU without a measurement
    # host-to-device GB/s one way over its host link (LMCache's CPU tier loads KV over it);
    # None: not in the data, LMCache cannot be modelled on it
    host_link_gb_s: float | None = None
    host_link_source: str = ""

    def __post_init__(self) -> None:
        if self.memory_class not in MEMORY_CLASSES:
            raise ValueError(
                f"GPU {self.name!r}: memory_class must be one of {MEMORY_CLASSES}, got {self.memory_class!r}"
            )
        for key in ("memory_mib", "bandwidth_gb_s", "fp16_tflops"):
            if not getattr(self, key) > 0:
                raise ValueError(f"GPU {self.name!r}: {key} must be > 0, got {getattr(self, key)}")

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * 2**20

    @property
    def bandwidth_bytes_s(self) -> float:
        return self.bandwidth_gb_s * 1e9

    @property
    def sustained_measured(self) -> bool:
        """Its sustained compute comes from a GEMM measurement (its own or its twin's)."""
        return self.sustained_fp16_tflops is not None

    def peak_flops(self, compute: str) -> float:
        """Dense tensor throughput (FLOP/s) in the datatype a checkpoint computes in."""
        peak = {"fp16": self.fp16_tflops, "fp8": self.fp8_tflops, "int8": self.int8_tops}[compute]
        if peak is None:
            raise ValueError(f"GPU {self.name!r} has no {compute} tensor cores")
        return peak * 1e12

    def sustained_flops(self, compute: str) -> float:
        """Dense GEMM FLOP/s this GPU sustains in `compute`: the measured FP16 figure (or the
        datasheet's times the measured GPUs' median ratio), scaled by the datasheet's FP8/INT8
        to FP16 ratio for those datatypes (the same power and clock limits apply)."""
        fp16 = (
            self.sustained_fp16_tflops * 1e12
            if self.sustained_fp16_tflops is not None
            else self.peak_flops("fp16") * (self.derived_sustained_ratio or 1.0)
        )
        return fp16 * self.peak_flops(compute) / self.peak_flops("fp16")


def _read(name: str) -> dict:
    with (DATA / name).open() as f:
        return yaml.safe_load(f)


def architecture_entry(name: str, entry: dict) -> Architecture:
    """A data/models.yaml architecture: config.json fields inline, or `config:` a checked-in
    config.json (relative to data/); `source` says where the fields come from."""
    fields = dict(entry)
    source = str(fields.pop("source", ""))
    try:
        if "config" in fields:
            path = DATA / str(fields.pop("config"))
            if fields:
                raise ArchitectureError(f"{sorted(fields)[0]}: not with config (the file holds every field)")
            return replace(read_config(path, name), source=source or str(path))
        return from_config(fields, name, source)
    except ArchitectureError as exc:
        raise ArchitectureError(f"data/models.yaml architectures.{name}: {exc}") from None


@cache
def architectures() -> dict[str, Architecture]:
    return {name: architecture_entry(name, e) for name, e in _read("models.yaml")["architectures"].items()}


@cache
def quantizations() -> dict[str, Quantization]:
    return {name: Quantization(name=name, **fields) for name, fields in _read("models.yaml")["quantizations"].items()}


@cache
def checkpoints() -> dict[str, Checkpoint]:
    archs, quants = architectures(), quantizations()
    return {
        repo: Checkpoint(
            repo=repo,
            short=c["short"],
            architecture=archs[c["architecture"]],
            quantization=quants[c["quantization"]],
            revision=c.get("revision", ""),
        )
        for repo, c in _read("models.yaml")["checkpoints"].items()
    }


def sustained_ratio(measured: list[Gpu]) -> float:
    """The median sustained / datasheet dense FP16 ratio of GPUs with a GEMM measurement."""
    ratios = sorted(g.sustained_fp16_tflops / g.fp16_tflops for g in measured if g.sustained_fp16_tflops)
    if not ratios:
        raise ValueError("data/gpus.yaml: no GPU has a sustained_fp16_tflops measurement")
    mid = len(ratios) // 2
    return ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2


def gpu_from_fields(key: str, fields: dict, ratio: float) -> Gpu:
    """A Gpu from datasheet fields (data/gpus.yaml's or a scenario file's); a missing sustained
    figure is derived with `ratio`."""
    fields = dict(fields)
    description = fields.pop("name", key)
    device = Gpu(name=key, description=description, **fields)
    if device.sustained_fp16_tflops is None:
        device = replace(device, derived_sustained_ratio=ratio)
    return device


@cache
def gpus() -> dict[str, Gpu]:
    raw = {k: dict(g) for k, g in _read("gpus.yaml")["gpus"].items()}
    for g in raw.values():
        if g.get("sustained_from"):
            g["sustained_fp16_tflops"] = raw[g["sustained_from"]]["sustained_fp16_tflops"]
    measured = [
        Gpu(name=k, description=k, **{f: v for f, v in g.items() if f != "name"})
        for k, g in raw.items()
        if not g.get("sustained_from")
    ]
    ratio = sustained_ratio(measured)
    return {key: gpu_from_fields(key, g, ratio) for key, g in raw.items()}


def checkpoint(repo: str) -> Checkpoint:
    try:
        return checkpoints()[repo]
    except KeyError:
        raise ValueError(f"unknown checkpoint {repo!r}; known: {', '.join(sorted(checkpoints()))}") from None


def gpu(name: str) -> Gpu:
    try:
        return gpus()[name]
    except KeyError:
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(sorted(gpus()))}") from None


LINK_KINDS = ("pcie", "nvlink")


@dataclass(frozen=True)
class Interconnect:
    """The GPU-to-GPU link of an instance family (data/interconnects.yaml): PCIe or NVLink, and
    NCCL's bus bandwidth over it."""

    name: str
    kind: str
    bus_bandwidth_gb_s: float
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind not in LINK_KINDS:
            raise ValueError(f"interconnect {self.name!r}: kind must be one of {LINK_KINDS}, got {self.kind!r}")
        if not self.bus_bandwidth_gb_s > 0:
            raise ValueError(f"interconnect {self.name!r}: bus_bandwidth_gb_s must be > 0")

    @property
    def bus_bandwidth_bytes_s(self) -> float:
        return self.bus_bandwidth_gb_s * 1e9


@cache
def family_interconnects() -> dict[str, Interconnect]:
    """Instance family -> the link between its GPUs."""
    raw = _read("interconnects.yaml")
    links = {name: Interconnect(name=name, **fields) for name, fields in raw["links"].items()}
    return {family: links[link] for family, link in raw["families"].items()}


def interconnect(family: str) -> Interconnect:
    try:
        return family_interconnects()[family]
    except KeyError:
        known = ", ".join(sorted(family_interconnects()))
        raise ValueError(f"no GPU interconnect known for instance family {family!r}; known: {known}") from None
