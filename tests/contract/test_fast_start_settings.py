"""The start features and warm headroom as settings: what each provisioner can do (EKS Auto Mode
turns SOCI parallel pull on itself and has no userData to change it: aws-samples/karpenter-blueprints
blueprints/soci-snapshotter/README.md, "EKS Auto Mode"), the AMIs SOCI parallel mode needs, and the
headroom's model and GPU budget, each refused in one line naming the key."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contract.settings import SettingsError, parse
from contract.settings.errors import problems_of
from contract.settings.gpu_capacity import GpuCapacitySettings
from contract.settings.models import EngineSettings
from contract.settings.stack_file import namespace_config, read_stack
from tests.harness import ROOT


def dev_raw() -> dict:
    return namespace_config(read_stack("dev", ROOT).config)


def gpu(**node_class: object) -> dict:
    return {"provisioner": "karpenter", "nodeClass": node_class}


def test_auto_mode_pulls_with_soci_unless_told_otherwise() -> None:
    assert GpuCapacitySettings.model_validate({"provisioner": "auto-mode"}).soci_parallel_pull is True


def test_self_managed_karpenter_pulls_without_soci_unless_turned_on() -> None:
    assert GpuCapacitySettings.model_validate(gpu()).soci_parallel_pull is False
    assert GpuCapacitySettings.model_validate(gpu(sociParallelPull=True)).soci_parallel_pull is True


def test_turning_soci_off_under_auto_mode_is_refused_in_one_line() -> None:
    with pytest.raises(ValidationError) as caught:
        GpuCapacitySettings.model_validate({"provisioner": "auto-mode", "nodeClass": {"sociParallelPull": False}})
    (problem,) = problems_of(caught.value, ("gpuCapacity",))
    assert problem.startswith("inference-platform:gpuCapacity.nodeClass.sociParallelPull (False) cannot be turned off")
    assert "no userData" in problem


@pytest.mark.parametrize("alias", ["al2023@v20250801", "bottlerocket@v1.43.2"])
def test_soci_on_an_ami_without_parallel_mode_is_refused(alias: str) -> None:
    with pytest.raises(ValidationError) as caught:
        GpuCapacitySettings.model_validate(gpu(sociParallelPull=True, amiAlias=alias))
    (problem,) = problems_of(caught.value, ("gpuCapacity",))
    assert problem.startswith("inference-platform:gpuCapacity.nodeClass.sociParallelPull (True) needs an AMI")


@pytest.mark.parametrize("alias", ["al2023@v20250821", "bottlerocket@v1.44.0", "bottlerocket@v1.50.0"])
def test_soci_on_the_first_amis_with_parallel_mode_is_accepted(alias: str) -> None:
    GpuCapacitySettings.model_validate(gpu(sociParallelPull=True, amiAlias=alias))


def test_bottlerocket_nodes_need_no_device_plugin() -> None:
    assert not GpuCapacitySettings.model_validate(gpu(amiAlias="bottlerocket@v1.50.0")).node_class.needs_device_plugin


@pytest.mark.parametrize("flag", ["--load-format=safetensors", "--model-loader-extra-config={}"])
def test_the_weight_loader_flags_belong_to_serving_fast_start(flag: str) -> None:
    with pytest.raises(ValidationError, match=r"serving\.fastStart"):
        EngineSettings.model_validate({"extraArgs": [flag]})


def test_a_headroom_naming_no_model_is_refused() -> None:
    raw = dev_raw()
    raw["gpuCapacity"] = {**raw["gpuCapacity"], "headroom": {"placeholders": 1, "model": "qwen-typo"}}
    with pytest.raises(SettingsError, match=r"gpuCapacity\.headroom\.model \('qwen-typo'\) names no model"):
        parse(raw)


def test_headroom_counts_against_the_pools_gpu_limits() -> None:
    raw = dev_raw()  # maxReplicas 3 fills dev's 3 GPUs
    raw["gpuCapacity"] = {**raw["gpuCapacity"], "headroom": {"placeholders": 1}}
    with pytest.raises(SettingsError, match=r"\(maxReplicas \+ gpuCapacity\.headroom\.placeholders\) x gpusPerReplica"):
        parse(raw)


def test_a_compile_cache_needs_a_storage_class_name() -> None:
    raw = dev_raw()
    raw["serving"] = {"fastStart": {"compileCache": {"storageClass": "EFS SC"}}}
    with pytest.raises(SettingsError, match=r"serving\.fastStart\.compileCache\.storageClass"):
        parse(raw)
