"""How the deployer reaches the Kubernetes API is declared in settings and refused, by key, when
it cannot work: a private endpoint answers only the VPC (EKS user guide, "Cluster API server
endpoint"), a public one only its allowlist."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from contract.settings import SettingsError
from contract.settings.stack_file import StackFile, read_stack
from tests.harness import ROOT

NS = "inference-platform"


def config_with(stack: str, **cluster: Any) -> dict[str, Any]:
    config = copy.deepcopy(read_stack(stack, ROOT).config)
    config[f"{NS}:cluster"] |= cluster
    return config


def only_problem(stack: str, config: dict[str, Any]) -> str:
    with pytest.raises(SettingsError) as caught:
        StackFile(ROOT / f"Pulumi.{stack}.yaml", config).settings()
    (problem,) = caught.value.problems
    return problem


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_committed_stacks_are_private_and_name_the_runner_subnets(stack: str) -> None:
    settings = read_stack(stack, ROOT).settings()
    assert settings.cluster.endpoint_access == "private"
    assert settings.cluster.public_access_cidrs == []
    assert settings.cluster.deployer_cidrs


def test_a_public_allowlist_without_cidrs_is_refused_with_the_command_that_fills_it() -> None:
    problem = only_problem("dev", config_with("dev", endpointAccess="public-allowlist", deployerCidrs=[]))
    assert problem.startswith(f"{NS}:cluster.publicAccessCidrs ([])")
    assert "pulumi config set --path 'cluster.publicAccessCidrs[0]'" in problem


def test_a_public_allowlist_with_the_deployers_egress_is_accepted() -> None:
    config = config_with("dev", endpointAccess="public-allowlist", publicAccessCidrs=["198.51.100.7/32"])
    assert StackFile(ROOT / "Pulumi.dev.yaml", config).settings().cluster.public_access_cidrs == ["198.51.100.7/32"]


def test_public_cidrs_on_a_private_endpoint_are_refused() -> None:
    problem = only_problem("prod", config_with("prod", publicAccessCidrs=["198.51.100.7/32"]))
    assert problem.startswith(f"{NS}:cluster.publicAccessCidrs (['198.51.100.7/32']) must be empty")
    assert "public-allowlist" in problem


def test_a_private_endpoint_without_a_deploy_path_is_refused() -> None:
    problem = only_problem("prod", config_with("prod", deployerCidrs=[]))
    assert problem.startswith(f"{NS}:cluster.deployerCidrs ([]) must name the ranges inside the VPC")
    assert "public-allowlist" in problem


def test_a_deployer_range_outside_the_vpc_is_refused() -> None:
    problem = only_problem("prod", config_with("prod", deployerCidrs=["10.30.0.0/19", "192.168.0.0/24"]))
    assert problem.startswith(f"{NS}:cluster.deployerCidrs[1] ('192.168.0.0/24') must lie within network.cidr")


def test_a_deployer_range_that_is_not_a_cidr_is_refused() -> None:
    problem = only_problem("prod", config_with("prod", deployerCidrs=["10.30.0.1/19"]))
    assert problem.startswith(f"{NS}:cluster.deployerCidrs") and "not an IPv4 CIDR" in problem


def test_an_unknown_endpoint_mode_is_refused() -> None:
    problem = only_problem("prod", config_with("prod", endpointAccess="public"))
    assert problem.startswith(f"{NS}:cluster.endpointAccess ('public')")


def test_a_stack_without_a_cluster_section_is_told_to_declare_it() -> None:
    config = copy.deepcopy(read_stack("prod", ROOT).config)
    del config[f"{NS}:cluster"]
    assert only_problem("prod", config) == f"{NS}:cluster is required"
