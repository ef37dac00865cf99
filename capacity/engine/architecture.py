"""A decoder-only transformer from its Hugging Face `config.json` fields: the one home of the
architecture-to-shape logic (parameters, FLOPs per token, KV bytes per token, activation bytes),
on one GPU or on one rank of a tensor-parallel replica.

Shapes follow Hugging Face transformers' modeling code (huggingface/transformers, main at commit
000c33fdfde12e1ffafbfcdb3c926df5727a00b6, src/transformers/models/<type>/modeling_<type>.py):

- llama (LlamaAttention, LlamaMLP): q/k/v/o projections with bias = `attention_bias` (default
  false), gate/up/down with bias = `mlp_bias` (default false); head_dim = config.head_dim or
  hidden_size // num_attention_heads; two RMSNorms per layer and a final one.
- mistral (MistralAttention): as llama without biases; `sliding_window` on every layer.
- qwen2 (Qwen2Attention): q/k/v with bias, o_proj without (fixed in the code, no config field);
  sliding window only with `use_sliding_window` (layers from `max_window_layers` on).
- qwen3 (Qwen3Attention): q/k/v/o with bias = `attention_bias` (default false); RMSNorm of
  head_dim on q and on k in every layer (q_norm, k_norm); head_dim given explicitly (default 128).
- gemma (GemmaAttention, GemmaMLP): as llama, head_dim default 256, tied embeddings by default.
- gemma2 (Gemma2DecoderLayer): four RMSNorms per layer (pre/post attention, pre/post feed-forward);
  even layers use `sliding_window` (Gemma2Attention: `sliding_window if not bool(layer_idx % 2)`).
- mixtral (MixtralSparseMoeBlock): attention as mistral; per layer a router Linear(hidden,
  num_local_experts, bias=False) and num_local_experts experts of w1/w2/w3 (hidden x intermediate),
  num_experts_per_tok of them run per token: FLOPs count the active experts, weight bytes all.

Tensor parallelism follows vLLM (vllm-project/vllm@18ec6629253632af0a384f2ffbb8c6b28af322e7):
`ModelConfig.verify_with_parallel_config` refuses a size that does not divide the attention
heads; `QKVParallelLinear.__init__` (model_executor/layers/linear.py) splits the KV heads when
there are more of them than ranks (their count must then divide) and otherwise keeps one KV head
per rank, replicated tp / kv_heads times (tp must then be a multiple of the KV heads), which is
`ModelConfig.get_num_kv_heads`: max(1, kv_heads // tp); Column/RowParallelLinear split the
intermediate size, VocabParallelEmbedding and the lm_head the vocabulary; norms are replicated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ACT_BYTES = 2  # FP16/BF16 activations and KV cache (vLLM's dtype "auto" for these checkpoints)

# Per model_type: transformers' config defaults that change a shape, and the keys that carry a
# shape this module reads. Every other key a config.json may hold is listed in _IGNORED.
_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {"tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False},
    "mistral": {"tie_word_embeddings": False},
    "qwen2": {"tie_word_embeddings": False, "use_sliding_window": False},
    "qwen3": {"tie_word_embeddings": False, "attention_bias": False, "head_dim": 128, "use_sliding_window": False},
    "gemma": {"tie_word_embeddings": True, "attention_bias": False, "head_dim": 256},
    "gemma2": {"tie_word_embeddings": True, "attention_bias": False, "head_dim": 256},
    "mixtral": {"tie_word_embeddings": False, "num_local_experts": 8, "num_experts_per_tok": 2},
}
MODEL_TYPES = tuple(_DEFAULTS)
_REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
_SHAPE_KEYS: dict[str, tuple[str, ...]] = {
    "llama": ("num_key_value_heads", "head_dim", "tie_word_embeddings", "attention_bias", "mlp_bias"),
    "mistral": ("num_key_value_heads", "head_dim", "tie_word_embeddings", "sliding_window"),
    "qwen2": (
        "num_key_value_heads",
        "tie_word_embeddings",
        "use_sliding_window",
        "sliding_window",
        "max_window_layers",
        "layer_types",
    ),
    "qwen3": (
        "num_key_value_heads",
        "head_dim",
        "tie_word_embeddings",
        "attention_bias",
        "use_sliding_window",
        "sliding_window",
        "max_window_layers",
        "layer_types",
    ),
    "gemma": ("num_key_value_heads", "head_dim", "tie_word_embeddings", "attention_bias"),
    "gemma2": ("num_key_value_heads", "head_dim", "tie_word_embeddings", "attention_bias", "sliding_window"),
    "mixtral": (
        "num_key_value_heads",
        "head_dim",
        "tie_word_embeddings",
        "sliding_window",
        "num_local_experts",
        "num_experts_per_tok",
    ),
}
# Keys of these configs that change no parameter shape (activations, RoPE, norms' epsilon, token
# ids, dtypes, training-only settings, soft-capping, loader metadata).
_IGNORED = frozenset(
    {
        "_name_or_path",
        "architectures",
        "attention_dropout",
        "attn_logit_softcapping",
        "bos_token_id",
        "cache_implementation",
        "dtype",
        "eos_token_id",
        "final_logit_softcapping",
        "hidden_act",
        "hidden_activation",
        "initializer_range",
        "max_position_embeddings",
        "model_type",
        "output_router_logits",
        "pad_token_id",
        "pretraining_tp",
        "quantization_config",
        "query_pre_attn_scalar",
        "rms_norm_eps",
        "rope_parameters",
        "rope_scaling",
        "rope_theta",
        "router_aux_loss_coef",
        "router_jitter_noise",
        "torch_dtype",
        "transformers_version",
        "use_cache",
        "use_mrope",
    }
)


class ArchitectureError(ValueError):
    """config.json fields that do not describe a supported architecture; the message names each key."""


class TensorParallelError(ValueError):
    """A tensor-parallel size vLLM refuses for this model."""


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer as its config.json describes it, seen from one GPU of a replica
    of `tensor_parallel` GPUs (1: the whole model). Every count below is per GPU; `parameters`
    is the whole model's. Built by `from_config`, which applies each model type's rules."""

    name: str
    model_type: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    tie_word_embeddings: bool
    source: str = ""
    attention_bias: bool = False  # biases on q/k/v (Qwen2 always; Llama, Qwen3, Gemma: attention_bias)
    head_dim_override: int | None = None  # config.json head_dim (None: hidden_size // heads)
    o_proj_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    num_experts: int = 0  # 0: a dense MLP
    experts_per_token: int = 0
    sliding_window: int | None = None
    sliding_window_layers: int = 0  # layers attending within sliding_window tokens only
    tensor_parallel: int = 1

    # --- heads and widths on one rank -----------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.head_dim_override or self.hidden_size // self.num_attention_heads

    @property
    def heads_per_rank(self) -> int:
        return self.num_attention_heads // self.tensor_parallel

    @property
    def kv_heads_per_rank(self) -> int:
        """vLLM ModelConfig.get_num_kv_heads: max(1, kv_heads // tp) (replicated below one per rank)."""
        return max(1, self.num_key_value_heads // self.tensor_parallel)

    @property
    def q_dim(self) -> int:
        return self.heads_per_rank * self.head_dim

    @property
    def qkv_dim(self) -> int:
        """Output width of the fused q/k/v projection on one rank (GQA: few KV heads)."""
        return (self.heads_per_rank + 2 * self.kv_heads_per_rank) * self.head_dim

    @property
    def intermediate_per_rank(self) -> int:
        return self.intermediate_size // self.tensor_parallel

    @property
    def active_experts(self) -> int:
        """MLPs a token runs through: the routed experts of a MoE, the one MLP of a dense model."""
        return self.experts_per_token if self.num_experts else 1

    # --- parameters -------------------------------------------------------------------------
    @property
    def _attention_linear_params(self) -> int:
        return self.hidden_size * self.qkv_dim + self.q_dim * self.hidden_size

    @property
    def _mlp_params(self) -> int:
        return 3 * self.hidden_size * self.intermediate_per_rank

    @property
    def _router_params(self) -> int:
        return self.hidden_size * self.num_experts  # replicated on every rank

    @property
    def layer_linear_params(self) -> int:
        """Weights of one layer's matrix multiplies: qkv, o_proj, every expert's (or the MLP's)
        gate/up/down projections, the router."""
        experts = self.num_experts or 1
        return self._attention_linear_params + experts * self._mlp_params + self._router_params

    @property
    def linear_params(self) -> int:
        return self.num_hidden_layers * self.layer_linear_params

    @property
    def active_linear_params(self) -> int:
        """Linear weights one token multiplies through (a MoE: its routed experts and the router)."""
        per_layer = self._attention_linear_params + self.active_experts * self._mlp_params + self._router_params
        return self.num_hidden_layers * per_layer

    @property
    def embedding_params(self) -> int:
        return -(-self.vocab_size // self.tensor_parallel) * self.hidden_size

    @property
    def small_params(self) -> int:
        """Norm weights and biases (stay FP16 under AWQ; small but counted)."""
        h = self.hidden_size
        per_layer = self.norms_per_layer * h + (2 * self.head_dim if self.qk_norm else 0)
        per_layer += self.qkv_dim if self.attention_bias else 0
        per_layer += h if self.o_proj_bias else 0
        if self.mlp_bias:
            per_layer += (self.num_experts or 1) * (2 * self.intermediate_per_rank + h)
        return self.num_hidden_layers * per_layer + h

    @property
    def parameters(self) -> int:
        """Every parameter of the whole model (as transformers counts them: a tied lm_head once)."""
        whole = replace(self, tensor_parallel=1)
        embeddings = whole.embedding_params * (1 if self.tie_word_embeddings else 2)
        return whole.linear_params + embeddings + whole.small_params

    @property
    def active_parameters(self) -> int:
        whole = replace(self, tensor_parallel=1)
        embeddings = whole.embedding_params * (1 if self.tie_word_embeddings else 2)
        return whole.active_linear_params + embeddings + whole.small_params

    # --- bytes and FLOPs per token on one rank ---------------------------------------------
    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of one token in every layer: 2 x layers x kv_heads x head_dim x 2 bytes."""
        return 2 * self.num_hidden_layers * self.kv_heads_per_rank * self.head_dim * ACT_BYTES

    @property
    def attention_flops_per_pair(self) -> int:
        """FLOPs of one query token attending to one context token: QK^T and PV in every layer."""
        return 4 * self.num_hidden_layers * self.heads_per_rank * self.head_dim

    @property
    def activation_bytes_per_token(self) -> int:
        """HBM traffic of one token's activations per forward pass: every intermediate tensor of a
        layer (qkv, attention out, o_proj out, gate/up and activated of each active expert, down,
        residual + norm) written once and read once."""
        h, i = self.hidden_size, self.active_experts * self.intermediate_per_rank
        per_layer = self.qkv_dim + self.q_dim + 4 * h + 3 * i
        return 2 * ACT_BYTES * self.num_hidden_layers * per_layer

    @property
    def peak_activation_bytes_per_token(self) -> int:
        """Largest set of live activations per token inside one layer (MLP: gate/up, activated,
        residual + normed hidden), what vLLM's profiling forward pass peaks at."""
        return ACT_BYTES * (3 * self.active_experts * self.intermediate_per_rank + 2 * self.hidden_size)

    @property
    def allreduce_bytes_per_token(self) -> int:
        """Hidden-state bytes one token contributes to each tensor-parallel all-reduce."""
        return self.hidden_size * ACT_BYTES

    @property
    def allreduces_per_step(self) -> int:
        """All-reduces of one forward pass under tensor parallelism: after the vocabulary-parallel
        embedding (VocabParallelEmbedding.forward), after o_proj and after down_proj (the
        RowParallelLinear of attention and MLP, reduce_results) in every layer; none on one GPU."""
        return 0 if self.tensor_parallel == 1 else 2 * self.num_hidden_layers + 1

    # --- tensor parallelism -----------------------------------------------------------------
    def tensor_parallel_problems(self, tp: int) -> list[str]:
        """Why vLLM would refuse --tensor-parallel-size `tp` for this model (empty: it accepts)."""
        heads, kv = self.num_attention_heads, self.num_key_value_heads
        problems = []
        if heads % tp:  # ModelConfig.verify_with_parallel_config
            problems.append(f"num_attention_heads ({heads}) must be divisible by tensor parallel size ({tp})")
        if tp >= kv and tp % kv:  # QKVParallelLinear: divide(tp_size, total_num_kv_heads)
            problems.append(f"tensor parallel size ({tp}) must be a multiple of num_key_value_heads ({kv})")
        if tp < kv and kv % tp:  # QKVParallelLinear: divide(total_num_kv_heads, tp_size)
            problems.append(f"num_key_value_heads ({kv}) must be divisible by tensor parallel size ({tp})")
        if self.intermediate_size % tp:  # MergedColumnParallelLinear: divide(output_size, tp_size)
            problems.append(
                f"intermediate_size ({self.intermediate_size}) must be divisible by tensor parallel size ({tp})"
            )
        return problems

    def split(self, tp: int) -> Architecture:
        """One rank of a `tp`-GPU tensor-parallel replica; a ValueError says why vLLM refuses it."""
        if tp < 1:
            raise TensorParallelError(f"tensor parallel size must be >= 1, got {tp}")
        problems = self.tensor_parallel_problems(tp)
        if problems:
            raise TensorParallelError(f"{self.name}: " + "; ".join(problems))
        return replace(self, tensor_parallel=tp)


def _window(model_type: str, fields: dict[str, Any], layers: int) -> tuple[int | None, int]:
    """(sliding window, layers using it) as each modeling file applies the config's fields."""
    window = fields.get("sliding_window")
    if not window:
        return None, 0
    if model_type in ("mistral", "mixtral"):
        return int(window), layers
    if model_type == "gemma2":
        return int(window), (layers + 1) // 2  # even layer indices
    if model_type in ("qwen2", "qwen3"):
        if not fields.get("use_sliding_window"):
            return None, 0
        if "layer_types" in fields:
            return int(window), sum(t == "sliding_attention" for t in fields["layer_types"])
        first = int(fields.get("max_window_layers", layers))
        return int(window), max(0, layers - first)
    return None, 0


def from_config(fields: dict[str, Any], name: str = "custom", source: str = "") -> Architecture:
    """The architecture a config.json's fields describe; an ArchitectureError names every key
    that is missing, unknown for its model_type, or of the wrong type."""
    model_type = fields.get("model_type")
    problems = [f"{k}: required" for k in _REQUIRED if k not in fields]
    if model_type not in _DEFAULTS:
        problems.insert(0, f"model_type: must be one of {', '.join(MODEL_TYPES)}, got {model_type!r}")
        raise ArchitectureError("; ".join(problems))
    values = {**_DEFAULTS[model_type], **fields}
    known = set(_REQUIRED) | set(_SHAPE_KEYS[model_type]) | _IGNORED
    problems += [f"{k}: unknown config.json field for model_type {model_type}" for k in sorted(set(fields) - known)]
    for key in (*_REQUIRED, "num_key_value_heads", "num_local_experts", "num_experts_per_tok"):
        value = values.get(key)
        if key in values and value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            problems.append(f"{key}: must be a positive integer, got {value!r}")
    head_dim = values.get("head_dim")
    if head_dim is not None and (isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 1):
        problems.append(f"head_dim: must be a positive integer, got {head_dim!r}")
    if problems:
        raise ArchitectureError("; ".join(problems))
    heads = values["num_attention_heads"]
    kv = values.get("num_key_value_heads") or heads  # LlamaConfig & co: None -> num_attention_heads
    if heads % kv:
        raise ArchitectureError(f"num_key_value_heads: {kv} does not divide num_attention_heads {heads}")
    layers = values["num_hidden_layers"]
    window, window_layers = _window(model_type, values, layers)
    moe = model_type == "mixtral"
    qwen2 = model_type == "qwen2"
    return Architecture(
        name=name,
        source=source,
        model_type=model_type,
        hidden_size=values["hidden_size"],
        intermediate_size=values["intermediate_size"],
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        vocab_size=values["vocab_size"],
        tie_word_embeddings=bool(values["tie_word_embeddings"]),
        head_dim_override=head_dim if head_dim and head_dim != values["hidden_size"] // heads else None,
        attention_bias=qwen2 or bool(values.get("attention_bias", False)),
        o_proj_bias=not qwen2 and bool(values.get("attention_bias", False)),
        mlp_bias=bool(values.get("mlp_bias", False)),
        qk_norm=model_type == "qwen3",
        norms_per_layer=4 if model_type == "gemma2" else 2,
        num_experts=values["num_local_experts"] if moe else 0,
        experts_per_token=values["num_experts_per_tok"] if moe else 0,
        sliding_window=window,
        sliding_window_layers=window_layers,
    )


def read_config(path: Path, name: str = "") -> Architecture:
    """The architecture of a checked-in config.json file."""
    try:
        fields = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ArchitectureError(f"{path}: {exc}") from None
    if not isinstance(fields, dict):
        raise ArchitectureError(f"{path}: a config.json object")
    try:
        return from_config(fields, name or path.stem, str(path))
    except ArchitectureError as exc:
        raise ArchitectureError(f"{path}: {exc}") from None
