"""The deploy path in the program: a private endpoint opens 443 to the runner's subnets before any
Kubernetes object, a public one answers only its allowlist, and a private stack that does not exist
yet is refused before anything is created (its VPC would be created by the same run)."""

from __future__ import annotations

import json

import pytest

from contract.settings.stack_file import load_stack
from tests.harness import ROOT, ProgramFailed, StackRun, run_program, stack_config

INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def public_allowlist(stack: str) -> dict[str, str]:
    config = stack_config(stack)
    cluster = json.loads(config["inference-platform:cluster"])
    cluster |= {"endpointAccess": "public-allowlist", "publicAccessCidrs": ["198.51.100.7/32"]}
    config["inference-platform:cluster"] = json.dumps(cluster)
    return config


def test_the_committed_stacks_keep_the_endpoint_private(stack: StackRun) -> None:
    (cluster,) = stack.of_type("eks:index:Cluster")
    assert cluster.inputs["endpointPrivateAccess"] is True
    assert cluster.inputs["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in cluster.inputs


def test_the_runner_subnets_reach_the_api_on_443_through_the_cluster_security_group(stack: StackRun) -> None:
    rules = stack.of_type(INGRESS)
    deployers = load_stack(stack.stack, ROOT).cluster.deployer_cidrs
    assert sorted(r.inputs["cidrIpv4"] for r in rules) == sorted(deployers)
    for rule in rules:
        assert (rule.inputs["ipProtocol"], rule.inputs["fromPort"], rule.inputs["toPort"]) == ("tcp", 443, 443)
        # The mocked cluster's EKS-managed security group, the one on the private endpoint's interfaces.
        assert rule.inputs["securityGroupId"] == "sg-cluster"


def test_the_stack_exports_the_private_subnets_a_runner_goes_into(stack: StackRun) -> None:
    zones = load_stack(stack.stack, ROOT).network.availability_zones
    assert len(stack.outputs["privateSubnetIds"]) == len(zones)


def test_every_kubernetes_object_waits_for_the_deploy_path(stack: StackRun) -> None:
    (provider,) = stack.of_type("pulumi:providers:kubernetes")
    assert {r.urn for r in stack.of_type(INGRESS)} <= set(provider.dependencies)


def test_a_public_allowlist_opens_the_public_endpoint_to_those_ranges_only() -> None:
    (cluster,) = run_program("dev", public_allowlist("dev")).of_type("eks:index:Cluster")
    assert cluster.inputs["endpointPublicAccess"] is True
    assert cluster.inputs["publicAccessCidrs"] == ["198.51.100.7/32"]


def test_a_private_stack_in_an_empty_account_is_refused_before_any_resource() -> None:
    with pytest.raises(ProgramFailed) as failed:
        run_program("prod", existing_clusters=[])
    message = str(failed.value)
    assert message.startswith(
        "inference-platform:cluster.endpointAccess ('private') cannot create EKS cluster 'llm-prod'"
    )
    assert "public-allowlist" in message and "publicAccessCidrs" in message
    assert failed.value.registered == []


def test_a_public_allowlist_stack_may_be_created_in_an_empty_account() -> None:
    run = run_program("dev", public_allowlist("dev"), existing_clusters=[])
    assert run.of_type("eks:index:Cluster")
