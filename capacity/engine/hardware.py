"""Model architectures and GPUs as typed data (data/models.yaml, data/gpus.yaml, sources cited
there), with the byte and FLOP counts of one forward pass that the roofline needs."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import yaml

DATA = Path(__file__).with_name("data")
ACT_BYTES = 2  # FP16/BF16 activations and KV cache (vLLM's dtype "auto" for these checkpoints)


@dataclass(frozen=True)
class Architecture:
    """A decoder-only dense transformer as its config.json describes it (Qwen2, Llama, Mistral)."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    tie_word_embeddings: bool
    source: str = ""
    attention_bias: bool = True  # q/k/v projection biases (Qwen2: yes; Llama, Mistral: no)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def qkv_dim(self) -> int:
        """Output width of the fused q/k/v projection (GQA: few KV heads)."""
        return (self.num_attention_heads + 2 * self.num_key_value_heads) * self.head_dim

    @property
    def layer_linear_params(self) -> int:
        """Weights of one layer's matrix multiplies: qkv, o_proj, gate/up and down projections."""
        h, i = self.hidden_size, self.intermediate_size
        return h * self.qkv_dim + h * h + 3 * h * i

    @property
    def linear_params(self) -> int:
        return self.num_hidden_layers * self.layer_linear_params

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def small_params(self) -> int:
        """Norm weights and q/k/v biases (stay FP16 under AWQ; negligible but counted)."""
        biases = self.qkv_dim if self.attention_bias else 0
        return self.num_hidden_layers * (2 * self.hidden_size + biases) + self.hidden_size

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of one token in every layer: 2 x layers x kv_heads x head_dim x 2 bytes."""
        return 2 * self.num_hidden_layers * self.num_key_value_heads * self.head_dim * ACT_BYTES

    @property
    def attention_flops_per_pair(self) -> int:
        """FLOPs of one query token attending to one context token: QK^T and PV in every layer."""
        return 4 * self.num_hidden_layers * self.num_attention_heads * self.head_dim

    @property
    def activation_bytes_per_token(self) -> int:
        """HBM traffic of one token's activations per forward pass: every intermediate tensor of a
        layer (qkv, attention out, o_proj out, gate/up, activated, down, residual + norm) written
        once and read once."""
        h, i = self.hidden_size, self.intermediate_size
        per_layer = self.qkv_dim + 5 * h + 3 * i
        return 2 * ACT_BYTES * self.num_hidden_layers * per_layer

    @property
    def peak_activation_bytes_per_token(self) -> int:
        """Largest set of live activations per token inside one layer (MLP: gate/up, activated,
        residual + normed hidden), what vLLM's profiling forward pass peaks at."""
        return ACT_BYTES * (3 * self.intermediate_size + 2 * self.hidden_size)


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
    def weight_bytes_read_per_step(self) -> float:
        """Bytes every forward pass streams from HBM: all linear layers and the lm_head (the
        input embedding is a gather of a few rows, not a read of the table)."""
        a = self.architecture
        return a.linear_params * self.quantization.linear_bytes_per_param + ACT_BYTES * (
            self.lm_head_params + a.small_params
        )

    @property
    def linear_flops_per_token(self) -> int:
        """2 FLOPs per weight per token through the decoder's linear layers."""
        return 2 * self.architecture.linear_params

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


@cache
def architectures() -> dict[str, Architecture]:
    return {name: Architecture(name=name, **fields) for name, fields in _read("models.yaml")["architectures"].items()}


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
