"""A replica over several GPUs as vLLM's tensor parallelism: shards, refusals, collectives.

Upstream: vllm-project/vllm@18ec6629 vllm/config/model.py (ModelConfig.verify_with_parallel_config,
get_num_kv_heads), model_executor/layers/linear.py (QKVParallelLinear), quantization/utils/
marlin_utils.py (verify_marlin_supports_shape); NVIDIA/nccl@b6475625 src/graph/tuning.cc
(ncclTopoTuneModel), NVIDIA/nccl-tests doc/PERFORMANCE.md (all-reduce bus bandwidth)."""

import dataclasses

import pytest

from capacity.engine.architecture import TensorParallelError
from capacity.engine.hardware import architectures, checkpoint, family_interconnects, gpu, interconnect
from capacity.engine.profiles import CALIBRATED, calibrated, derive
from capacity.engine.roofline import Collectives, memory_plan, step_cost
from capacity.engine.trust import trust_of
from contract.gpu import GPU_OF_FAMILY
from contract.instances import instance_sizes

LLAMA8 = architectures()["llama-3-8b"]
AWQ14 = checkpoint("Qwen/Qwen2.5-14B-Instruct-AWQ")
FLAGS = {"max_model_len": 15_000, "max_num_seqs": 40, "max_num_batched_tokens": 2048}


def test_kv_heads_are_split_when_there_are_more_than_ranks():
    shard = LLAMA8.split(2)
    assert shard.kv_heads_per_rank == 4
    assert shard.kv_bytes_per_token * 2 == LLAMA8.kv_bytes_per_token


def test_kv_heads_are_replicated_when_there_are_fewer_than_ranks():
    small = architectures()["qwen2.5-1.5b"]  # 2 KV heads over 4 GPUs: one each, replicated twice
    assert small.split(4).kv_heads_per_rank == 1
    assert small.split(4).kv_bytes_per_token * 2 == small.kv_bytes_per_token


def test_weights_and_vocabulary_are_split_over_the_ranks():
    shard = LLAMA8.split(2)
    assert shard.linear_params * 2 == LLAMA8.linear_params
    assert shard.embedding_params * 2 == LLAMA8.embedding_params
    assert shard.parameters == LLAMA8.parameters  # the whole model's count does not change


def test_a_size_that_does_not_divide_the_attention_heads_is_refused_in_one_line():
    with pytest.raises(
        TensorParallelError, match=r"num_attention_heads \(40\) must be divisible by tensor parallel size \(3\)"
    ):
        architectures()["qwen2.5-14b"].split(3)


def test_a_size_above_the_kv_heads_must_be_a_multiple_of_them():
    small = architectures()["qwen2.5-1.5b"]  # 12 heads, 2 KV heads
    with pytest.raises(
        TensorParallelError, match=r"tensor parallel size \(3\) must be a multiple of num_key_value_heads \(2\)"
    ):
        small.split(3)


def test_awq_shards_must_fit_marlins_shapes():
    with pytest.raises(TensorParallelError, match=r"down_proj input per GPU \(1728\) is not a multiple of 128"):
        AWQ14.split(8)
    assert AWQ14.split(4).architecture.intermediate_per_rank == 3456  # 27 x 128


def test_a_large_all_reduce_moves_2_n_minus_1_over_n_bytes_per_link():
    ring = Collectives(4, "pcie", 31.5e9, 1, 0, 0)
    nbytes = 64 * 2**20
    simple_latency = (8.4 + 6 * 5.7) * 1e-6  # baseLat + 2(n-1) x hwLat[PCI][Ring][Simple]
    assert ring.allreduce_time(nbytes) == pytest.approx(simple_latency + nbytes * 2 * 3 / 4 / 31.5e9)


def test_a_small_all_reduce_pays_nccls_low_latency_protocol():
    ring = Collectives(2, "nvlink", 300e9, 1, 0, 0)
    ll = (6.6 + 2 * 0.6) * 1e-6 + 8192 * 2 / 2 / (300e9 / 4)  # LL: a quarter of the bus bandwidth
    assert ring.allreduce_time(8192) == pytest.approx(ll)


def test_nccl_caps_the_low_latency_protocols_bandwidth():
    ring = Collectives(2, "nvlink", 450e9, 1, 0, 0)  # a quarter of NVLink 4 would be 112.5 GB/s
    ll = (6.6 + 2 * 0.6) * 1e-6 + 8192 / 87.7e9
    assert ring.allreduce_time(8192) == pytest.approx(ll)


def test_each_step_pays_two_all_reduces_per_layer_and_the_embeddings():
    model = checkpoint("meta-llama/Meta-Llama-3-8B-Instruct")
    cost = step_cost(model.split(2), gpu("a100-80gb"), CALIBRATED, interconnect=interconnect("p4de"))
    assert cost.comm is not None and cost.comm.allreduces == 2 * 32 + 1
    without = dataclasses.replace(cost, comm=None)
    args = (8, 8, 8, 8000, 8000)
    assert cost.step_time(*args) - without.step_time(*args) == pytest.approx(cost.comm.time(8, 8))


def test_pcie_costs_a_replica_more_than_nvlink():
    shard, device = AWQ14.split(2), gpu("a100-80gb")
    pcie = step_cost(shard, device, CALIBRATED, interconnect=interconnect("g5"))
    nvlink = step_cost(shard, device, CALIBRATED, interconnect=interconnect("p4de"))
    assert pcie.decode_step(32, 32_000) > nvlink.decode_step(32, 32_000)


def test_a_multi_gpu_step_needs_the_interconnect():
    with pytest.raises(ValueError, match="needs the GPUs' interconnect"):
        step_cost(AWQ14.split(2), gpu("a10g"), CALIBRATED)


def test_one_gpu_has_no_collectives():
    assert calibrated().cost.comm is None and calibrated().tensor_parallel_size == 1


def test_kv_capacity_is_one_gpus_share_after_its_share_of_the_weights():
    two = derive("t", AWQ14, gpu("a10g"), **FLAGS, tensor_parallel_size=2, interconnect=interconnect("g5"))
    assert two.kv_cache_tokens == memory_plan(AWQ14.split(2), gpu("a10g"), 0.9, 2048, 40).kv_tokens()
    assert two.kv_cache_tokens > 2 * calibrated().kv_cache_tokens  # half the weights leave more room


def test_a_model_too_large_for_one_gpu_fits_split_over_an_instance():
    seventy = checkpoint("meta-llama/Meta-Llama-3-70B-Instruct")
    flags = {"max_model_len": 8192, "max_num_seqs": 64, "max_num_batched_tokens": 2048}
    with pytest.raises(ValueError, match="do not fit"):
        derive("one", seventy, gpu("l40s"), **flags)
    four = derive("four", seventy, gpu("l40s"), **flags, tensor_parallel_size=4, interconnect=interconnect("g6e"))
    assert four.kv_cache_tokens >= 8192


def test_a_tensor_parallel_profile_is_extrapolated():
    two = derive("t", AWQ14, gpu("a10g"), **FLAGS, tensor_parallel_size=2, interconnect=interconnect("g5"))
    trust = trust_of(two)
    assert trust.level == "extrapolated" and "tensor parallel over 2 GPUs" in trust.basis


def test_g_families_link_their_gpus_over_pcie_and_p_families_over_nvlink():
    kinds = {family: link.kind for family, link in family_interconnects().items()}
    assert {kinds[f] for f in ("g5", "g6", "g6e")} == {"pcie"}
    assert {kinds[f] for f in ("p4d", "p4de", "p5", "p5e", "p5en")} == {"nvlink"}


def test_every_multi_gpu_family_the_platform_launches_has_an_interconnect():
    multi = {f for f in GPU_OF_FAMILY if max(s.gpus for s in instance_sizes(f)) > 1}
    assert multi <= set(family_interconnects())
    assert all(instance_sizes(f) for f in family_interconnects())  # no entry for a family the contract lacks
