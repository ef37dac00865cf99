"""Architectures from config.json fields: shapes as transformers' modeling code defines them."""

import json

import pytest

from capacity.engine.architecture import ArchitectureError, from_config, read_config
from capacity.engine.hardware import architectures, checkpoint

LLAMA3_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
}


@pytest.mark.parametrize(
    ("name", "published"),
    [
        # the model cards' totals, as printed (Qwen: "Number of Parameters"; Meta, Mistral AI,
        # Google: the release notes / technical reports)
        ("qwen2.5-14b", "14.7"),
        ("qwen2.5-7b", "7.61"),
        ("qwen2.5-3b", "3.09"),
        ("qwen2.5-1.5b", "1.54"),
        ("llama-3-8b", "8.03"),
        ("llama-3-70b", "70.6"),
        ("mistral-7b", "7.24"),
        ("qwen3-8b", "8.19"),
        ("gemma-7b", "8.54"),
        ("gemma-2-9b", "9.24"),
        ("mixtral-8x7b", "46.7"),
    ],
)
def test_derived_parameter_count_matches_the_published_total(name, published):
    digit = 10.0 ** -len(published.split(".")[1])  # within one unit of the last printed digit
    assert abs(architectures()[name].parameters / 1e9 - float(published)) < digit


def test_mixtral_runs_two_of_its_eight_experts_per_token():
    mixtral = architectures()["mixtral-8x7b"]
    assert abs(mixtral.active_parameters / 1e9 - 12.9) < 0.1  # Mistral AI: 12.9B active
    model = checkpoint("mistralai/Mixtral-8x7B-Instruct-v0.1")
    assert model.linear_flops_per_token == 2 * mixtral.active_linear_params
    assert model.weight_bytes == pytest.approx(2 * mixtral.parameters)  # every expert is resident


# What the Architecture of each models.yaml entry gave before it was read as config.json fields
# (commit 31c73d1): linear, embedding, small parameters, KV bytes/token, attention FLOPs/pair,
# activation bytes/token, peak activation bytes/token.
BEFORE = {
    "qwen2.5-14b": (13212057600, 778567680, 840704, 196608, 983040, 14254080, 103424),
    "qwen2.5-7b": (6525288448, 544997376, 333312, 57344, 401408, 8888320, 128000),
    "qwen2.5-3b": (2774532096, 311164928, 241664, 36864, 294912, 6598656, 74240),
    "qwen2.5-1.5b": (1310195712, 233373696, 144896, 28672, 172032, 4100096, 59904),
    "llama-3-8b": (6979321856, 525336576, 266240, 131072, 524288, 8912896, 102400),
    "mistral-7b": (6979321856, 131072000, 266240, 131072, 524288, 8912896, 102400),
}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_existing_entries_give_identical_numbers_through_the_config_path(name):
    a = architectures()[name]
    now = (
        a.linear_params,
        a.embedding_params,
        a.small_params,
        a.kv_bytes_per_token,
        a.attention_flops_per_pair,
        a.activation_bytes_per_token,
        a.peak_activation_bytes_per_token,
    )
    assert now == BEFORE[name]


def test_qwen3_head_dim_and_qk_norm_come_from_its_config():
    qwen3 = architectures()["qwen3-8b"]
    assert (qwen3.head_dim, qwen3.qk_norm, qwen3.attention_bias) == (128, True, False)
    # q_norm and k_norm: one head_dim RMSNorm weight each per layer, beside the two layer norms
    assert qwen3.small_params == 36 * (2 * 4096 + 2 * 128) + 4096


def test_an_explicit_head_dim_sets_the_kv_bytes_per_token():
    gemma = architectures()["gemma-7b"]  # 16 heads of 256 on a 3072-wide model
    assert gemma.head_dim == 256 != gemma.hidden_size // gemma.num_attention_heads
    assert gemma.kv_bytes_per_token == 2 * 28 * 16 * 256 * 2


def test_qwen2_biases_q_k_v_but_llama_biases_nothing_by_default():
    qwen = from_config({**LLAMA3_8B, "model_type": "qwen2"})
    llama = from_config(LLAMA3_8B)
    assert qwen.small_params - llama.small_params == 32 * (32 + 2 * 8) * 128


def test_llama_attention_bias_puts_a_bias_on_every_projection():
    biased = from_config({**LLAMA3_8B, "attention_bias": True})
    assert biased.small_params - from_config(LLAMA3_8B).small_params == 32 * ((32 + 2 * 8) * 128 + 4096)


def test_missing_kv_heads_mean_one_per_attention_head():
    fields = {k: v for k, v in LLAMA3_8B.items() if k != "num_key_value_heads"}
    assert from_config(fields).num_key_value_heads == 32


def test_sliding_window_is_read_as_each_model_type_applies_it():
    assert (architectures()["mistral-7b"].sliding_window, architectures()["mistral-7b"].sliding_window_layers) == (
        4096,
        32,
    )
    assert architectures()["gemma-2-9b"].sliding_window_layers == 21  # even layers
    qwen_off = from_config({**LLAMA3_8B, "model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": False})
    assert qwen_off.sliding_window is None


def test_a_checked_in_config_json_is_read_whole(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA3_8B, "architectures": ["LlamaForCausalLM"], "rope_theta": 500000.0}))
    assert read_config(path).parameters == architectures()["llama-3-8b"].parameters


def test_unknown_config_field_is_refused_naming_it():
    with pytest.raises(ArchitectureError, match=r"^num_experts: unknown config\.json field for model_type llama$"):
        from_config({**LLAMA3_8B, "num_experts": 64})


def test_every_bad_config_field_is_reported_at_once():
    with pytest.raises(ArchitectureError) as error:
        from_config({"model_type": "mistral", "hidden_size": "big", "colour": 1})
    message = str(error.value)
    assert (
        "intermediate_size: required" in message and "colour: unknown" in message and "hidden_size: must be" in message
    )


def test_unsupported_model_type_is_refused():
    with pytest.raises(ArchitectureError, match="model_type: must be one of llama, mistral"):
        from_config({**LLAMA3_8B, "model_type": "deepseek_v3"})
