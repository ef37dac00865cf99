"""Cluster: the cluster role Auto Mode acts as (with the custom-tags policy the GPU NodeClass's
tags need) and the switch that makes NetworkPolicies enforced; asserted on what each stack
registers and on the pure builders."""

from __future__ import annotations

import json

import pytest

from components import iam
from components.isolation import NETWORK_POLICY_CONTROLLER_KEY, NODE_CLASS_NETWORK_POLICY
from tests.harness import StackRun

ROLE = "aws:iam/role:Role"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def service_role(stack: StackRun):
    (cluster,) = stack.of_type("eks:index:Cluster")
    (role,) = [r for r in stack.of_type(ROLE) if r.urn == cluster.inputs["serviceRole"]]
    return role


def test_the_cluster_runs_as_a_role_the_program_owns_and_eks_may_tag_sessions_of(stack: StackRun) -> None:
    trust = json.loads(service_role(stack).inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "eks.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]


def test_the_cluster_role_has_the_managed_auto_mode_policies(stack: StackRun) -> None:
    role = service_role(stack)
    attached = {r.inputs["policyArn"].rsplit("/", 1)[1] for r in stack.children_of(role) if r.type == ATTACHMENT}
    assert attached == set(iam.CLUSTER_POLICIES + iam.AUTO_MODE_POLICIES)


def test_node_class_tags_are_paired_with_the_custom_tags_policy_on_the_cluster_role(stack: StackRun) -> None:
    (node_class,) = stack.of_kind("eks.amazonaws.com/v1", "NodeClass")
    assert node_class.inputs["spec"]["tags"]
    (policy,) = [r for r in stack.children_of(service_role(stack)) if r.type == ROLE_POLICY]
    assert policy.inputs["policy"] == iam.auto_mode_custom_tags_policy()
    (cluster,) = stack.of_type("eks:index:Cluster")
    assert policy.urn in cluster.dependencies


def test_every_custom_tags_statement_is_scoped_to_this_cluster() -> None:
    for statement in json.loads(iam.auto_mode_custom_tags_policy())["Statement"]:
        condition = json.dumps(statement["Condition"])
        assert "eks:eks-cluster-name" in condition and "${aws:PrincipalTag/eks:eks-cluster-name}" in condition


@pytest.mark.parametrize(
    "action",
    [
        "ec2:CreateFleet",
        "ec2:RunInstances",
        "ec2:CreateLaunchTemplate",
        "ec2:CreateVolume",
        "ec2:CreateNetworkInterface",
        "ec2:CreateTags",
    ],
)
def test_custom_tags_policy_covers_what_auto_mode_launches_and_retags(action: str) -> None:
    statements = json.loads(iam.auto_mode_custom_tags_policy())["Statement"]
    assert any(action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]) for s in statements)


def test_network_policy_enforcement_is_switched_on_for_auto_mode(stack: StackRun) -> None:
    (switch,) = [r for r in stack.of_kind("v1", "ConfigMap") if r.inputs["metadata"]["name"] == "amazon-vpc-cni"]
    assert switch.inputs["metadata"]["namespace"] == "kube-system"
    assert switch.inputs["data"] == {NETWORK_POLICY_CONTROLLER_KEY: "true"}
    (node_class,) = stack.of_kind("eks.amazonaws.com/v1", "NodeClass")
    assert {k: node_class.inputs["spec"][k] for k in NODE_CLASS_NETWORK_POLICY} == NODE_CLASS_NETWORK_POLICY


@pytest.fixture(scope="module")
def standard() -> StackRun:
    """The dev stack without Auto Mode (self-managed Karpenter), as tests/test_graph.py builds it."""
    from tests.harness import run_program
    from tests.test_graph import karpenter_config

    return run_program("dev", karpenter_config())


def test_without_auto_mode_the_vpc_cni_add_on_enforces_network_policies(standard: StackRun) -> None:
    (cluster,) = standard.of_type("eks:index:Cluster")
    assert cluster.inputs["vpcCniOptions"]["enableNetworkPolicy"] is True
    assert not [r for r in standard.of_kind("v1", "ConfigMap") if r.inputs["metadata"]["name"] == "amazon-vpc-cni"]


def test_without_auto_mode_the_cluster_role_has_only_the_cluster_policy(standard: StackRun) -> None:
    role = service_role(standard)
    children = standard.children_of(role)
    assert {r.inputs["policyArn"].rsplit("/", 1)[1] for r in children if r.type == ATTACHMENT} == set(
        iam.CLUSTER_POLICIES
    )
    assert not [r for r in children if r.type == ROLE_POLICY]


def secrets_key_statements(stack: StackRun) -> dict[str, dict]:
    (key,) = [k for k in stack.of_type("aws:kms/key:Key") if k.name.endswith("-cluster-secrets")]
    return {s["Sid"]: s for s in json.loads(key.inputs["policy"])["Statement"]}


def test_the_secrets_key_is_administered_by_the_accounts_iam_which_cannot_decrypt_with_it(stack: StackRun) -> None:
    """Not KMS's default key policy (the account root gets kms:*, so any identity policy granting
    kms:Decrypt on "*" reads every Secret): the account administers the key, including the
    CreateGrant and DescribeKey the principal calling CreateCluster needs (kms:Create*,
    kms:Describe*; EKS User Guide, "Encrypt Kubernetes secrets with KMS on existing clusters")."""
    admin = secrets_key_statements(stack)["AdministerThroughAccountIam"]
    assert admin["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"}
    assert admin["Action"] == iam.KEY_ADMINISTRATION_ACTIONS
    assert not [a for a in admin["Action"] if a.startswith(("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"))]


def test_the_secrets_key_is_used_by_the_cluster_role(stack: StackRun) -> None:
    """terraform-aws-eks v21.19.0 main.tf: the cluster role is the key's user (module "kms" key_users)."""
    statements = secrets_key_statements(stack)
    assert set(statements) == {"AdministerThroughAccountIam", "ClusterRoleUsesKey"}
    use = statements["ClusterRoleUsesKey"]
    assert use["Principal"] == {"AWS": f"arn:aws:iam:us-west-2:123456789012:{service_role(stack).name}"}
    assert use["Action"] == ["kms:Encrypt", "kms:Decrypt", "kms:DescribeKey", "kms:CreateGrant"]
