"""Settings catch what operators get wrong, each with its key path (issue 14, item 8), and
report every problem of one run together."""

from __future__ import annotations

import copy
from datetime import date
from typing import Any

import pytest

from contract.settings import SettingsError
from contract.settings.stack_file import StackFile, read_stack
from tests.harness import ROOT

NS = "inference-platform"


def prod_config() -> dict[str, Any]:
    return copy.deepcopy(read_stack("prod", ROOT).config)


def problems(config: dict[str, Any]) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        StackFile(ROOT / "Pulumi.prod.yaml", config).settings()
    return caught.value.problems


def one_problem(config: dict[str, Any]) -> str:
    (problem,) = problems(config)
    return problem


def test_public_cidrs_that_together_cover_the_internet_are_refused() -> None:
    config = prod_config()
    config[f"{NS}:cluster"]["publicAccessCidrs"] = ["0.0.0.0/1", "128.0.0.0/1"]
    problem = one_problem(config)
    assert problem.startswith(f"{NS}:cluster.publicAccessCidrs") and "whole internet" in problem


def test_public_cidrs_of_real_egress_ranges_are_accepted() -> None:
    config = prod_config()
    config[f"{NS}:cluster"]["endpointAccess"] = "public-allowlist"
    config[f"{NS}:cluster"]["publicAccessCidrs"] = ["203.0.113.0/24", "198.51.100.0/24"]
    StackFile(ROOT / "Pulumi.prod.yaml", config).settings()


def test_zones_of_another_region_are_refused() -> None:
    config = prod_config()
    config["aws:region"] = "eu-west-1"
    problem = one_problem(config)
    assert problem.startswith(f"{NS}:network.availabilityZones") and "'eu-west-1'" in problem


@pytest.mark.parametrize(("resource", "request_value", "limit"), [("cpu", "5", "4"), ("memory", "16Gi", "15Gi")])
def test_a_request_above_its_limit_is_refused(resource: str, request_value: str, limit: str) -> None:
    config = prod_config()
    config[f"{NS}:models"][0]["resources"] = {
        "requests": {"cpu": "3", "memory": "14Gi", resource: request_value},
        "limits": {"cpu": "4", "memory": "15Gi", resource: limit},
    }
    problem = one_problem(config)
    assert problem.startswith(f"{NS}:models[0].resources.requests.{resource}") and f"limits.{resource}" in problem


def test_a_kubernetes_version_eks_does_not_offer_is_refused() -> None:
    config = prod_config()
    config[f"{NS}:cluster"]["kubernetesVersion"] = "1.99"
    problem = one_problem(config)
    assert problem.startswith(f"{NS}:cluster.kubernetesVersion ('1.99')") and "EKS offers" in problem


@pytest.mark.parametrize(
    ("flag", "owner"),
    [
        ("--max-model-len=4096", "engine.maxModelLen"),
        ("--max-num-seqs=8", "engine.maxNumSeqs"),
        ("--gpu-memory-utilization=0.95", "engine.gpuMemoryUtilization"),
        ("--max-num-batched-tokens=8192", "engine.maxNumBatchedTokens"),
        ("--api-key=x", "gateway"),
        ("--no-enable-force-include-usage", "token budgets"),
    ],
)
def test_an_extra_arg_that_a_setting_owns_is_refused_naming_the_setting(flag: str, owner: str) -> None:
    config = prod_config()
    config[f"{NS}:models"][0]["engine"]["extraArgs"] = [flag]
    problem = one_problem(config)
    assert problem.startswith(f"{NS}:models[0].engine.extraArgs") and owner in problem


def test_two_models_in_one_prefix_are_refused() -> None:
    config = prod_config()
    for model in config[f"{NS}:models"]:
        model["s3Prefix"] = "models/shared"
    problem = one_problem(config)
    assert problem.startswith(f"{NS}:models[1].s3Prefix ('models/shared')") and "models[0]" in problem


def test_force_destroy_is_refused_in_prod() -> None:
    config = prod_config()
    config[f"{NS}:modelStore"] = {"forceDestroy": True}
    assert one_problem(config).startswith(f"{NS}:modelStore.forceDestroy (True)")


def test_force_destroy_is_allowed_in_dev() -> None:
    assert read_stack("dev", ROOT).settings().model_store.force_destroy


def test_a_misspelled_namespace_is_named_with_the_right_key() -> None:
    config = prod_config()
    config["inference-platfrom:serving"] = {"drainSeconds": 20}
    problem = one_problem(config)
    assert "inference-platfrom:serving is ignored" in problem and f"did you mean {NS}:serving" in problem


def test_a_duplicated_model_is_named_as_the_duplicate_not_as_a_gpu_budget() -> None:
    config = prod_config()
    config[f"{NS}:models"].append(copy.deepcopy(config[f"{NS}:models"][0]))
    problem = one_problem(config)
    assert problem.startswith(f"{NS}:models[2].name ('qwen25-14b-awq') repeats models[0]")


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_infinite_and_nan_numbers_are_refused_with_their_key(value: float) -> None:
    config = prod_config()
    config[f"{NS}:capacityPlanning"]["gpuHourlyPriceUsd"]["spot"] = value
    assert one_problem(config).startswith(f"{NS}:capacityPlanning.gpuHourlyPriceUsd.spot")


def test_every_problem_of_a_run_is_reported_together() -> None:
    config = prod_config()
    config[f"{NS}:cluster"]["kubernetesVersion"] = "1.99"
    config[f"{NS}:models"][0]["engine"]["extraArgs"] = ["--max-num-seqs=8"]
    config["inference-platfrom:serving"] = {}
    found = problems(config)
    assert len(found) == 3
    assert any("cluster.kubernetesVersion" in p for p in found)
    assert any("models[0].engine.extraArgs" in p for p in found)
    assert any("inference-platfrom:serving" in p for p in found)


class TestKubernetesSupport:
    """EKS standard support: 14 months per minor, then paid extended support (release calendar
    in contract/settings/cluster.py)."""

    def settings(self, version: str, **cluster: Any):
        from contract.settings.cluster import ClusterSettings

        # A private endpoint reached from a runner in the VPC: the deploy path every cluster declares.
        return ClusterSettings(kubernetes_version=version, deployer_cidrs=["10.30.0.0/19"], **cluster)

    def test_the_default_is_in_standard_support_today(self) -> None:
        from contract.settings.cluster import ClusterSettings

        assert (
            self.settings(ClusterSettings.model_fields["kubernetes_version"].default).support_problems(
                date(2026, 12, 1)
            )
            == []
        )

    def test_a_version_past_standard_support_is_refused(self) -> None:
        (problem,) = self.settings("1.34").support_problems(date(2026, 12, 3))
        assert problem.startswith("cluster.kubernetesVersion ('1.34') left EKS standard support on 2026-12-02")
        assert "1.35" in problem and "allowExtendedSupport" in problem

    def test_extended_support_is_allowed_on_purpose(self) -> None:
        assert self.settings("1.34", allow_extended_support=True).support_problems(date(2026, 12, 3)) == []

    def test_past_extended_support_nothing_allows_it(self) -> None:
        (problem,) = self.settings("1.31", allow_extended_support=True).support_problems(date(2026, 11, 27))
        assert "left EKS extended support on 2026-11-26" in problem

    def test_within_60_days_of_the_end_a_warning_names_the_date(self) -> None:
        (warning,) = self.settings("1.34").support_warnings(date(2026, 10, 10))
        assert "leaves EKS standard support on 2026-12-02" in warning

    def test_no_warning_earlier(self) -> None:
        assert self.settings("1.35").support_warnings(date(2026, 12, 1)) == []
