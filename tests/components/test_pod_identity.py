"""Every role a pod assumes through EKS Pod Identity trusts exactly the cluster, namespace and
service account of its association (the session tags EKS Pod Identity sets: EKS user guide,
"Create IAM role with trust policy required by EKS Pod Identity"), in both stacks."""

from __future__ import annotations

import json
from typing import Any

from components.iam import pod_identity_trust_document
from tests.harness import StackRun

ROLE = "aws:iam/role:Role"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ADDON = "aws:eks/addon:Addon"
# What the mocks answer for the caller's account and region (tests/harness.py).
ACCOUNT = "123456789012"


def pod_identity_roles(stack: StackRun) -> dict[str, dict[str, Any]]:
    """Role ARN (as the mocks give it) -> its trust policy, for roles EKS Pod Identity assumes."""
    found = {}
    for role in stack.of_type(ROLE):
        trust = json.loads(role.inputs["assumeRolePolicy"])
        if any(s["Principal"] == {"Service": "pods.eks.amazonaws.com"} for s in trust["Statement"]):
            found[f"arn:aws:iam:us-west-2:{ACCOUNT}:{role.name}"] = trust
    return found


def associations(stack: StackRun) -> list[tuple[str, str, str]]:
    """(role ARN, namespace, service account) of every association, the add-ons' included."""
    direct = [
        (a.inputs["roleArn"], a.inputs["namespace"], a.inputs["serviceAccount"]) for a in stack.of_type(ASSOCIATION)
    ]
    addons = [
        (assoc["roleArn"], "kube-system", assoc["serviceAccount"])
        for addon in stack.of_type(ADDON)
        for assoc in addon.inputs.get("podIdentityAssociations", [])
    ]
    return direct + addons


def test_every_pod_identity_role_has_an_association(stack: StackRun) -> None:
    assert set(pod_identity_roles(stack)) == {role for role, _, _ in associations(stack)}


def test_each_role_trusts_only_its_associations_cluster_namespace_and_service_account(stack: StackRun) -> None:
    roles = pod_identity_roles(stack)
    cluster_arn = f"arn:aws:eks:us-west-2:{ACCOUNT}:cluster/llm-{stack.stack}"
    assert associations(stack)
    for role_arn, namespace, service_account in associations(stack):
        [statement] = roles[role_arn]["Statement"]
        assert statement["Condition"] == {
            "StringEquals": {
                "aws:SourceAccount": ACCOUNT,
                "aws:RequestTag/eks-cluster-arn": cluster_arn,
                "aws:RequestTag/kubernetes-namespace": namespace,
                "aws:RequestTag/kubernetes-service-account": service_account,
            }
        }


def test_no_association_switches_off_the_session_tags_the_trust_policies_read(stack: StackRun) -> None:
    assert not any(a.inputs.get("disableSessionTags") for a in stack.of_type(ASSOCIATION))


def test_the_trust_policy_allows_tagging_the_session_it_conditions_on() -> None:
    """Pod Identity passes the tags through sts:TagSession; without it AssumeRole fails."""
    trust = json.loads(pod_identity_trust_document("arn:aws:eks:us-west-2:1:cluster/c", "1", "ns", "sa"))
    [statement] = trust["Statement"]
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
