"""The physical formulas behind the engine model: bytes, FLOPs, KV capacity, roofline regimes."""

import dataclasses

import pytest

from capacity.engine import PROFILES, get_profile
from capacity.engine.explain import explain
from capacity.engine.hardware import Checkpoint, architectures, checkpoint, gpu, gpus, quantizations
from capacity.engine.profiles import STACK_GPUS, STACK_MODELS, derive
from capacity.engine.roofline import Calibration, SchedulerCost, StepCost, memory_plan, scheduler_of, step_cost

QWEN14 = architectures()["qwen2.5-14b"]
AWQ14 = checkpoint("Qwen/Qwen2.5-14B-Instruct-AWQ")
A10G = gpu("a10g")


def test_architecture_fields_match_the_qwen2_5_14b_config_json():
    a = QWEN14
    fields = (a.num_hidden_layers, a.hidden_size, a.num_attention_heads, a.num_key_value_heads, a.head_dim)
    assert fields == (48, 5120, 40, 8, 128)
    assert (a.intermediate_size, a.vocab_size, a.tie_word_embeddings) == (13824, 152064, False)
    assert checkpoint("DeepSeek-R1-Distill-Qwen-14B-AWQ").architecture is a  # same architecture


def test_kv_bytes_per_token_of_qwen2_5_14b_gqa():
    assert QWEN14.kv_bytes_per_token == 2 * 48 * 8 * 128 * 2 == 196_608


def test_parameter_count_matches_the_model_card():
    # model card: 14.7B parameters, 13.1B non-embedding (embeddings + lm_head = 2 x 152064 x 5120)
    total = QWEN14.linear_params + 2 * QWEN14.embedding_params + QWEN14.small_params
    assert total == pytest.approx(14.7e9, rel=0.01)
    assert QWEN14.linear_params == pytest.approx(13.1e9, rel=0.01)


def test_awq_4bit_weights_bytes():
    per_param = 4 / 8 + 2.5 / 128  # 4-bit weight + FP16 scale and 4-bit zero per group of 128
    assert quantizations()["awq-int4"].linear_bytes_per_param == per_param
    expected = QWEN14.linear_params * per_param + 2 * (2 * QWEN14.embedding_params + QWEN14.small_params)
    assert AWQ14.weight_bytes == pytest.approx(expected)
    assert AWQ14.weight_bytes / 2**30 == pytest.approx(9.3, abs=0.1)  # the checkpoint's ~10 GB on disk
    # a step streams the linear layers and the lm_head, not the input embedding table
    assert AWQ14.weight_bytes - AWQ14.weight_bytes_read_per_step == 2 * QWEN14.embedding_params


def test_fp16_weights_of_a_tied_small_model():
    small = checkpoint("Qwen/Qwen2.5-1.5B-Instruct")
    a = small.architecture
    assert small.weight_bytes == 2 * (a.linear_params + a.embedding_params + a.small_params)  # tied: one table
    assert small.weight_bytes == pytest.approx(3.09e9, rel=0.01)


def test_kv_capacity_is_utilization_times_memory_minus_weights_activations_and_reserve():
    plan = memory_plan(AWQ14, A10G, 0.90, 2048, 40)
    assert plan.budget_bytes == 0.90 * 23028 * 2**20
    assert plan.kv_bytes == plan.budget_bytes - AWQ14.weight_bytes - plan.activation_bytes - plan.runtime_bytes
    tokens = plan.kv_tokens()
    assert tokens % 16 == 0 and tokens * 196_608 <= plan.kv_bytes < (tokens + 16) * 196_608
    # the calibration run: 78% KV usage at 40 requests x ~1,090 tokens of context -> ~56k tokens
    assert tokens == pytest.approx(40 * 1090 / 0.78, rel=0.02)
    assert get_profile("a10g-r1-14b-awq").kv_cache_tokens == tokens


def test_kv_capacity_grows_with_memory_and_shrinks_with_utilization():
    small = memory_plan(AWQ14, A10G, 0.80, 2048, 40).kv_tokens()
    assert (
        small
        < memory_plan(AWQ14, A10G, 0.90, 2048, 40).kv_tokens()
        < memory_plan(AWQ14, gpu("l40s"), 0.90, 2048, 40).kv_tokens()
    )


def test_a_replica_whose_weights_do_not_fit_is_refused_naming_why():
    bf16_14b = Checkpoint("Qwen/Qwen2.5-14B-Instruct", "qwen2.5-14b", QWEN14, quantizations()["bf16"])
    with pytest.raises(ValueError, match=r"weights \(27\.\d GiB\) do not fit 90% of NVIDIA A10G"):
        derive("a10g-qwen2.5-14b", bf16_14b, A10G, max_model_len=15_000, max_num_seqs=40, max_num_batched_tokens=2048)
    with pytest.raises(ValueError, match="fewer than max_model_len"):
        derive(
            "rtx-3070-7b",
            checkpoint("Qwen/Qwen2.5-7B-Instruct-AWQ"),
            gpu("rtx-3070"),
            max_model_len=32_768,
            max_num_seqs=64,
            max_num_batched_tokens=4096,
        )


def test_every_stack_model_has_a_profile_on_every_gpu():
    for repo, flags in STACK_MODELS:
        for device in STACK_GPUS:
            profile = get_profile(f"{device}-{checkpoint(repo).short}")
            assert profile.max_num_seqs == flags["max_num_seqs"]
            assert profile.max_model_len == flags["max_model_len"]
            assert profile.kv_cache_tokens >= profile.max_model_len
    assert {"a10g-r1-14b-awq", "8gb-qwen2.5-1.5b", "8gb-qwen2.5-3b-eager", "h100-qwen2.5-7b-awq"} <= set(PROFILES)


def test_a_faster_gpu_is_faster_for_the_same_replica():
    def rps(name: str) -> float:
        return explain(get_profile(name), 20, 1024, 256).state.rps

    assert (
        rps("l4-qwen2.5-14b-awq")
        < rps("a10g-qwen2.5-14b-awq")
        < rps("a100-80gb-qwen2.5-14b-awq")
        < rps("h100-qwen2.5-14b-awq")
    )


def test_every_data_entry_cites_its_source():
    assert all(a.source.startswith("https://huggingface.co/") for a in architectures().values())
    assert all(g.source for g in gpus().values())


CAL = Calibration(
    bandwidth={"gddr": 0.8, "hbm": 0.7},
    compute=0.5,
    gemm_fill=0.1,
    schedulers={"v0": SchedulerCost(0.003, 2e-5, 0.005), "v1": SchedulerCost(0.002, 1e-5, 0.01)},
)


def test_step_cost_terms_use_the_memory_class_bandwidth_and_the_sustained_gemm_rate():
    cost = step_cost(AWQ14, A10G, CAL)
    bandwidth, flops = 600e9 * 0.8, 67.24e12 * 0.5  # A10G: GDDR; sustained 67.24 TFLOPS, not 70
    assert cost.weights_s == pytest.approx(AWQ14.weight_bytes_read_per_step / bandwidth)
    assert cost.kv_token_s == pytest.approx(196_608 / bandwidth)
    assert cost.token_s == pytest.approx(2 * QWEN14.linear_params / flops)
    assert cost.attn_pair_s == pytest.approx(4 * 48 * 40 * 128 / (flops * 0.7))
    assert cost.fill_tokens == pytest.approx(0.1 * flops / bandwidth)  # a fraction of the ridge point
    assert (cost.step_s, cost.seq_s) == (0.002, 1e-5)  # V1's CPU costs by default
    assert step_cost(AWQ14, gpu("h100"), CAL).weights_s == pytest.approx(
        AWQ14.weight_bytes_read_per_step / (3350e9 * 0.7)
    )


def test_step_cost_takes_the_cpu_costs_of_the_scheduler_generation():
    v0 = step_cost(AWQ14, A10G, CAL, "v0")
    assert (v0.step_s, v0.seq_s) == (0.003, 2e-5)


def test_vllm_versions_before_0_7_run_the_v0_scheduler():
    assert [scheduler_of(v) for v in ("0.4.3", "0.5.4", "0.6.6", "0.7.0", "0.16.0", "0.25.1", "v0.21.0")] == [
        "v0",
        "v0",
        "v0",
        "v1",
        "v1",
        "v1",
        "v1",
    ]
    with pytest.raises(ValueError, match="vllm_version"):
        scheduler_of("latest")


def test_a_profile_names_its_vllm_version_and_scheduler():
    profile = get_profile("a10g-r1-14b-awq")
    assert (profile.vllm_version, profile.scheduler) == ("0.25.1", "v1")
    old = derive(
        "old", AWQ14, A10G, max_model_len=4096, max_num_seqs=8, max_num_batched_tokens=4096, vllm_version="0.5.4"
    )
    assert (old.scheduler, old.watermark, old.prefix_caching) == ("v0", 0.01, False)


def test_gemm_fill_slows_small_batches_below_the_full_gemm_rate():
    cost = StepCost(token_s=1e-4, fill_tokens=100)
    assert cost.linear_compute_time(100, 0) == pytest.approx(2 * 100 * 1e-4)  # half rate at fill_tokens rows
    assert cost.linear_compute_time(10_000, 0) == pytest.approx(10_100 * 1e-4)  # ~full rate when large


def test_sustained_compute_is_measured_for_the_gpus_the_calibration_covers():
    sustained = {name: g.sustained_flops("fp16") / 1e12 for name, g in gpus().items()}
    assert sustained["l4"] == pytest.approx(55.2, abs=0.1)  # under half its 121 TFLOPS datasheet figure
    assert sustained["a10g"] == pytest.approx(67.2, abs=0.1)
    assert all(gpus()[g].sustained_measured for g in ("l4", "a10g", "a100-80gb", "h100", "h200"))
    assert not gpus()["l40s"].sustained_measured  # derived: extrapolated
    assert sustained["l40s"] == pytest.approx(362.05 * gpus()["l40s"].derived_sustained_ratio)


def test_every_gpu_has_a_board_power_and_a_memory_class_with_sources():
    for g in gpus().values():
        assert g.board_power_w and g.board_power_source, g.name
        assert g.memory_class in ("gddr", "hbm") and g.sustained_source, g.name
    assert {n: gpus()[n].board_power_w for n in ("l4", "a10g", "l40s", "h100")} == {
        "l4": 72,
        "a10g": 300,
        "l40s": 350,
        "h100": 700,
    }


def test_roofline_regimes_decode_is_memory_bound_and_prefill_compute_bound():
    cost = get_profile("a10g-r1-14b-awq").cost
    # one decoder with 1k tokens of context: the weights dominate, the FLOPs are tiny
    assert cost.memory_bound(tokens=1, sampled=1, kv_tokens=1024, pairs=1024)
    assert cost.decode_step(1, 1024) == pytest.approx(cost.step_s + cost.seq_s + cost.memory_time(1, 1024))
    # a 2048-token prefill chunk: 2048 x 26 GFLOP takes far longer than reading the weights once
    assert not cost.memory_bound(tokens=2048, sampled=1, kv_tokens=2048, pairs=2048 * 2049 // 2)
    # decode at 40 x 1k context: KV read (40k tokens x 196 KB) is about as large as the weights
    kv = 40 * 1024
    assert cost.kv_token_s * kv == pytest.approx(cost.weights_s, rel=0.1)


def test_step_time_adds_the_matmul_and_attention_rooflines_to_the_cpu_costs():
    cost = StepCost(step_s=0.001, seq_s=0.0001, weights_s=0.01, kv_token_s=1e-6, token_s=1e-3, attn_pair_s=1e-8)
    # matmuls memory-bound (10 ms of weights), attention memory-bound (1,000 tokens of K/V)
    assert cost.step_time(seqs=2, tokens=2, sampled=2, kv_tokens=1000, pairs=1000) == pytest.approx(
        0.001 + 0.0002 + 0.01 + 0.001
    )
    # matmuls compute-bound (100 tokens), attention compute-bound (a long prefill's pairs)
    assert cost.step_time(seqs=2, tokens=100, sampled=2, kv_tokens=1000, pairs=1_000_000) == pytest.approx(
        0.001 + 0.0002 + 0.1 + 0.01
    )


def test_decode_span_sums_steps_whose_attention_grows_with_the_context():
    cost = StepCost(weights_s=0.005, kv_token_s=2e-6, token_s=3e-3)
    b, ctx = 10, 5000
    steps = [cost.decode_step(b, ctx + b * j) for j in range(2000)]
    assert steps[0] == pytest.approx(0.03 + 0.01) and steps[-1] > steps[0]  # rising with the context
    assert cost.decode_span(b, ctx, 2000) == pytest.approx(sum(steps), rel=1e-12)
    assert cost.decode_steps_within(b, ctx, sum(steps[:1500])) == 1500


def test_calibration_fractions_are_bounded():
    with pytest.raises(ValueError):
        Calibration.from_vector([1.0, 0.8, 0.9, 0.1, 0.003, 2e-5, 0.005, 0.001, 2e-5, -0.01])
    with pytest.raises(ValueError):
        dataclasses.replace(get_profile("a10g-r1-14b-awq").cost, kv_token_s=-1.0)


def test_explain_names_the_bound_of_each_regime():
    a10g = get_profile("a10g-r1-14b-awq")
    assert explain(a10g, 1, 1024, 128).bound == "memory"
    assert explain(a10g, 40, 1024, 128).bound == "compute"
    assert explain(a10g, 20, 4096, 128).bound == "kv-capacity"
    assert explain(a10g, 60, 1024, 128).bound == "scheduler"


def test_unavailable_profile_names_why():
    from capacity.engine import profiles

    profiles.UNAVAILABLE["x-test"] = "weights do not fit"
    try:
        with pytest.raises(ValueError, match="not offered: weights do not fit"):
            get_profile("x-test")
    finally:
        del profiles.UNAVAILABLE["x-test"]


def test_l40s_tensor_figures_are_the_datasheets_dense_ones():
    # NVIDIA L40S datasheet: BF16/FP16 Tensor 362.05 | 733* TFLOPS, FP8 733 | 1,466*, INT8 733 | 1,466*
    # (* with sparsity); 181 is the plain L40's dense FP16.
    l40s = gpu("l40s")
    assert (l40s.fp16_tflops, l40s.fp8_tflops, l40s.int8_tops) == (362.05, 733, 733)
