"""A stack model with gpusPerReplica > 1 runs as vLLM's tensor parallelism, and any models.yaml
checkpoint may be named as `<gpu>-<model>` (issue 22, item 6)."""

from __future__ import annotations

import pytest

from capacity.planning.stack import apply_config_set, load_stack_model
from tests.harness import ROOT

SCOPE = "autoscaling.qwen25-14b-awq"


def prod_14b():
    return load_stack_model("prod", "qwen25-14b-awq", root=ROOT)


def gpus_per_replica(n: int, profile: str = "a10g-qwen2.5-14b-awq") -> list[tuple[str, int | str]]:
    """The edits that give each replica n GPUs and keep maxReplicas x n within the pools' gpuLimit,
    on a physics profile by default (one derived for any GPU count; prod pins the 14B to g5)."""
    bounds = [
        (f"{SCOPE}.{key}", value) for key, value in (("minReplicas", 2), ("maxReplicas", 4), ("fallbackReplicas", 2))
    ]
    return [("models[0].gpusPerReplica", n), ("models[0].capacityProfile", profile), *bounds]


def test_gpus_per_replica_becomes_the_profiles_tensor_parallel_size_over_the_pinned_familys_link():
    sm = apply_config_set(prod_14b(), gpus_per_replica(2))
    assert sm.profile.tensor_parallel_size == 2
    assert sm.model.instance_families == ["g5"]
    assert sm.profile.cost.comm is not None and sm.profile.cost.comm.link == "pcie"  # g5: no NVLink


def test_gpus_per_replica_that_does_not_divide_the_heads_is_refused_naming_the_key():
    with pytest.raises(
        ValueError, match=r"models\[0\]\.gpusPerReplica \(3\): .*num_attention_heads \(40\) must be divisible"
    ):
        apply_config_set(prod_14b(), gpus_per_replica(3))


def test_a_measured_one_gpu_profile_is_refused_for_a_multi_gpu_replica():
    with pytest.raises(ValueError, match="runs on 1 GPU, not gpusPerReplica 2"):
        apply_config_set(prod_14b(), gpus_per_replica(2, "a10g-r1-14b-awq"))


def test_any_models_yaml_checkpoint_runs_as_a_gpu_model_profile():
    edits = [("models[0].huggingFaceId", "Qwen/Qwen3-8B"), ("models[0].capacityProfile", "a10g-qwen3-8b")]
    sm = apply_config_set(prod_14b(), edits)
    assert sm.profile.checkpoint == "Qwen/Qwen3-8B" and sm.profile.gpu == "a10g"
    assert sm.profile.max_model_len == sm.model.engine.max_model_len  # the stack's own flags
