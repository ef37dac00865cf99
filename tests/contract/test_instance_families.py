"""A model pinned to instance families (`models[].instanceFamilies`): its pools must launch them,
and its capacity profile must be of the GPU they carry (profiles are named `<gpu>-<model>`)."""

from __future__ import annotations

from typing import Any

from contract.gpu import GPU_FAMILIES, GPU_OF_FAMILY
from contract.settings import parse
from tests.contract.test_settings import NS, default_scope_raw, rejection, stack_raw, with_value


def dev_pinned(families: Any, profile: str | None = "8gb-qwen2.5-1.5b", **pool_families: list[str]) -> dict[str, Any]:
    """Dev (its default autoscaling scope only) with its model pinned to `families` (profile
    `profile`), pools' families overridden by name."""
    raw = with_value(default_scope_raw("dev"), ["models", 0, "instanceFamilies"], families)
    raw = with_value(raw, ["models", 0, "capacityProfile"], profile)
    for i, pool in enumerate(raw["gpuCapacity"]["pools"]):
        if pool["name"] in pool_families:
            raw = with_value(raw, ["gpuCapacity", "pools", i, "instanceFamilies"], pool_families[pool["name"]])
    return raw


def test_every_family_with_a_gpu_is_a_known_gpu_family() -> None:
    assert set(GPU_OF_FAMILY) <= set(GPU_FAMILIES)


def test_a_pin_without_a_profile_needs_only_a_pool_that_launches_it() -> None:
    assert parse(dev_pinned(["g6"], None)).models[0].instance_families == ["g6"]


def test_a_pin_with_a_profile_of_its_gpu_is_accepted() -> None:
    assert parse(dev_pinned(["g6"], "l4-qwen2.5-1.5b")).models[0].capacity_profile == "l4-qwen2.5-1.5b"


def test_families_of_one_gpu_may_share_a_profile() -> None:
    raw = dev_pinned(["p5e", "p5en"], "h200-qwen2.5-1.5b", **{"gpu-spot": ["p5e", "p5en"], "gpu-on-demand": ["p5e"]})
    raw = with_value(raw, ["gpuCapacity", "pools", 0, "gpuLimit"], 8)
    raw = with_value(raw, ["gpuCapacity", "pools", 1, "gpuLimit"], 8)
    assert parse(raw).models[0].instance_families == ["p5e", "p5en"]


def test_an_empty_pin_is_refused() -> None:
    assert f"{NS}models[0].instanceFamilies ([]) must list at least one" in rejection(dev_pinned([], None))


def test_an_unknown_family_is_refused() -> None:
    assert f"{NS}models[0].instanceFamilies (['g7x']) has non-GPU or unknown families" in rejection(
        dev_pinned(["g7x"], None)
    )


def test_a_family_none_of_the_models_pools_launches_is_refused_naming_their_families() -> None:
    message = rejection(dev_pinned(["g6e"], None))
    assert (
        f"{NS}models[0].instanceFamilies (['g6e']) are allowed by none of the model's pools "
        "(gpu-spot: ['g5', 'g6']; gpu-on-demand: ['g5', 'g6'])"
    ) in message


def test_a_profile_of_another_gpu_is_refused() -> None:
    message = rejection(dev_pinned(["g6"], "a10g-qwen2.5-1.5b"))
    assert (
        f"{NS}models[0].capacityProfile ('a10g-qwen2.5-1.5b') must model the GPU of instanceFamilies (['g6']: l4)"
        in message
    )


def test_a_stand_in_profile_of_no_aws_gpu_is_refused_once_pinned() -> None:
    assert f"{NS}models[0].capacityProfile ('8gb-qwen2.5-1.5b') must model" in rejection(dev_pinned(["g5"]))


def test_families_of_different_gpus_with_one_profile_are_refused() -> None:
    message = rejection(dev_pinned(["g5", "g6"], "a10g-qwen2.5-1.5b"))
    assert f"{NS}models[0].instanceFamilies (['g5', 'g6']) carry different GPUs (['a10g', 'l4'])" in message


def test_a_family_whose_gpu_no_profile_models_is_refused_with_a_profile() -> None:
    message = rejection(dev_pinned(["g4dn"], "a10g-qwen2.5-1.5b", **{"gpu-spot": ["g4dn", "g5"]}))
    assert f"{NS}models[0].instanceFamilies (['g4dn']) carry a GPU no capacity profile models" in message


def test_every_pinned_model_is_reported_at_once() -> None:
    raw = with_value(stack_raw("prod"), ["models", 0, "instanceFamilies"], ["g6"])
    raw = with_value(raw, ["models", 0, "capacityProfile"], "a10g-r1-14b-awq")
    raw = with_value(raw, ["models", 1, "instanceFamilies"], ["g6e"])
    message = rejection(raw)
    assert f"{NS}models[0].capacityProfile ('a10g-r1-14b-awq') must model the GPU" in message
    assert f"{NS}models[1].instanceFamilies (['g6e']) are allowed by none" in message


def test_the_gpu_budget_counts_only_the_pools_that_launch_a_pinned_family() -> None:
    # gpu-spot (2 GPUs) launches g6, gpu-on-demand (1 GPU) only g5: 3 replicas of 1 GPU no longer fit.
    message = rejection(dev_pinned(["g6"], None, **{"gpu-on-demand": ["g5"]}))
    assert "must fit the gpuLimit of pools ['gpu-spot'] (2 GPUs)" in message


def test_a_replica_must_fit_an_instance_of_its_pinned_family() -> None:
    raw = dev_pinned(["g6f"], None, **{"gpu-spot": ["g5", "g6f"], "gpu-on-demand": ["g5", "g6f"]})
    raw = with_value(raw, ["gpuCapacity", "pools", 1, "gpuLimit"], 2)
    raw = with_value(raw, ["autoscaling", "default", "maxReplicas"], 1)
    raw = with_value(raw, ["models", 0, "gpusPerReplica"], 2)
    assert (
        f"{NS}models[0].gpusPerReplica (2) is more GPUs than any instance of pool 'gpu-spot' carries (families ['g6f']"
        in rejection(raw)
    )
    unpinned = with_value(raw, ["models", 0, "instanceFamilies"], None)
    assert parse(unpinned).models[0].gpus_per_replica == 2  # g5 carries up to 8
