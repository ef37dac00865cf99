"""Prod with self-managed Karpenter (`gpuCapacity.provisioner: karpenter`) is complete on a real
cluster: GPU nodes advertise nvidia.com/gpu, the gateway's NLB has a controller, platform pods have
untainted nodes, and the controller's IAM is Karpenter v1.14.1's reference policy with its
conditions; and it still passes the schemas and the policy pack."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi_policy import EnforcementLevel

from components import load_balancer_controller as lbc
from components.gpu_capacity import DEVICE_PLUGIN_CHART, DEVICE_PLUGIN_VERSION, GENERAL_POOL_NAME
from contract.gpu import GPU_TAINT, POOL_LABEL
from tests.harness import StackRun, run_program
from tests.k8s_schemas import validate
from tests.policies.policy_harness import load_config, run_pack
from tests.test_graph import karpenter_config

RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"

# The Sids of aws/karpenter-provider-aws@v1.14.1:website/content/en/docs/getting-started/
# getting-started-with-karpenter/cloudformation.yaml, every controller policy in it.
REFERENCE_SIDS = {
    "AllowScopedEC2InstanceAccessActions",
    "AllowScopedEC2LaunchTemplateAccessActions",
    "AllowScopedEC2InstanceActionsWithTags",
    "AllowScopedResourceCreationTagging",
    "AllowScopedResourceTagging",
    "AllowScopedDeletion",
    "AllowPassingInstanceRole",
    "AllowScopedInstanceProfileCreationActions",
    "AllowScopedInstanceProfileTagActions",
    "AllowScopedInstanceProfileActions",
    "AllowAPIServerEndpointDiscovery",
    "AllowInterruptionQueueActions",
    "AllowZonalShiftStatusReadOnly",
    "AllowRegionalReadActions",
    "AllowSSMReadActions",
    "AllowPricingReadActions",
    "AllowUnscopedInstanceProfileListAction",
    "AllowInstanceProfileReadActions",
}


@pytest.fixture(scope="module")
def karpenter_prod() -> StackRun:
    return run_program("prod", karpenter_config("prod"))


def release(run: StackRun, chart: str) -> Any:
    (found,) = [r for r in run.of_type(RELEASE) if r.inputs["chart"].rsplit("/", 1)[-1] == chart]
    return found


def controller_statements(run: StackRun) -> dict[str, dict[str, Any]]:
    (policy,) = [r for r in run.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("-karpenter-controller")]
    return {s["Sid"]: s for s in json.loads(policy.inputs["policy"])["Statement"]}


def actions(statement: dict[str, Any]) -> list[str]:
    return [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]


# --- GPU nodes advertise their GPUs -------------------------------------------------------------


def test_the_al2023_gpu_nodes_get_the_nvidia_device_plugin(karpenter_prod: StackRun) -> None:
    plugin = release(karpenter_prod, DEVICE_PLUGIN_CHART)
    assert plugin.inputs["version"] == DEVICE_PLUGIN_VERSION
    assert plugin.inputs["repositoryOpts"]["repo"] == "https://nvidia.github.io/k8s-device-plugin"


def test_the_device_plugin_tolerates_the_gpu_taint_and_selects_every_gpu_pool(karpenter_prod: StackRun) -> None:
    values = release(karpenter_prod, DEVICE_PLUGIN_CHART).inputs["values"]
    assert {"key": GPU_TAINT["key"], "operator": "Exists", "effect": GPU_TAINT["effect"]} in values["tolerations"]
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == {"matchExpressions": [{"key": POOL_LABEL, "operator": "Exists"}]}
    gpu_pools = [p for p in karpenter_prod.of_type(NODE_POOL) if p.inputs["metadata"]["name"] != GENERAL_POOL_NAME]
    assert gpu_pools and all(POOL_LABEL in p.inputs["spec"]["template"]["metadata"]["labels"] for p in gpu_pools)


def test_bottlerocket_nodes_need_no_device_plugin_release() -> None:
    config = karpenter_config("prod")
    gpu = json.loads(config["inference-platform:gpuCapacity"])
    gpu["nodeClass"]["amiAlias"] = "bottlerocket@v1.50.0"
    config["inference-platform:gpuCapacity"] = json.dumps(gpu)
    run = run_program("prod", config)
    assert not [r for r in run.of_type(RELEASE) if r.inputs["chart"] == DEVICE_PLUGIN_CHART]


def test_auto_mode_stacks_install_neither_device_plugin_nor_load_balancer_controller(stack: StackRun) -> None:
    charts = {r.inputs["chart"] for r in stack.of_type(RELEASE)}
    assert not charts & {DEVICE_PLUGIN_CHART, lbc.CHART}


# --- the gateway's NLB has a controller ---------------------------------------------------------


def test_the_load_balancer_controller_is_installed_from_its_pinned_chart(karpenter_prod: StackRun) -> None:
    controller = release(karpenter_prod, lbc.CHART)
    assert (controller.inputs["version"], controller.inputs["repositoryOpts"]["repo"]) == ("3.5.0", lbc.REPOSITORY)
    values = controller.inputs["values"]
    assert values["clusterName"] == "llm-prod" and values["vpcId"] and values["region"] == "us-west-2"
    assert values["serviceAccount"]["name"] == lbc.SERVICE_ACCOUNT


def test_the_load_balancer_controller_assumes_a_pod_identity_role_with_the_upstream_policy(
    karpenter_prod: StackRun,
) -> None:
    (association,) = [
        a
        for a in karpenter_prod.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if a.inputs["serviceAccount"] == lbc.SERVICE_ACCOUNT
    ]
    assert association.inputs["namespace"] == "kube-system"
    (policy,) = [p for p in karpenter_prod.of_type("aws:iam/policy:Policy") if p.name.endswith("-lbc")]
    assert json.loads(policy.inputs["policy"]) == json.loads(lbc.IAM_POLICY_FILE.read_text())
    (attached,) = [
        a
        for a in karpenter_prod.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.name.endswith("-lbc")
    ]
    # The mocked ARN of a resource ends with its logical name.
    assert attached.inputs["policyArn"].endswith(f":{policy.name}")


def test_the_upstream_policy_scopes_load_balancer_creation_to_tagged_requests() -> None:
    """Upstream's own guard, kept by copying it verbatim: CreateLoadBalancer needs the request tag
    `elbv2.k8s.aws/cluster` (docs/install/iam_policy.json, v3.5.0)."""
    statements = json.loads(lbc.iam_policy())["Statement"]
    (create,) = [s for s in statements if "elasticloadbalancing:CreateLoadBalancer" in actions(s)]
    assert create["Condition"] == {"Null": {"aws:RequestTag/elbv2.k8s.aws/cluster": "false"}}


def test_the_gateway_service_waits_for_the_controller_that_gives_it_an_address(karpenter_prod: StackRun) -> None:
    (service,) = [s for s in karpenter_prod.of_type("kubernetes:core/v1:Service") if s.name.endswith("-gateway-nlb")]
    assert service.inputs["spec"]["loadBalancerClass"] == "service.k8s.aws/nlb"
    assert release(karpenter_prod, lbc.CHART).urn in service.dependencies


# --- platform pods have untainted nodes ----------------------------------------------------------


def test_platform_pods_get_an_untainted_on_demand_node_pool(karpenter_prod: StackRun) -> None:
    (pool,) = [p for p in karpenter_prod.of_type(NODE_POOL) if p.inputs["metadata"]["name"] == GENERAL_POOL_NAME]
    template = pool.inputs["spec"]["template"]["spec"]
    assert "taints" not in template
    assert template["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "general"}
    requirements = {r["key"]: r["values"] for r in template["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == ["on-demand"]
    assert requirements["karpenter.k8s.aws/instance-category"] == ["c", "m", "r"]
    assert pool.inputs["spec"]["limits"] == {"cpu": "64"}


def test_the_general_node_class_exists_before_its_pool(karpenter_prod: StackRun) -> None:
    (node_class,) = [
        n
        for n in karpenter_prod.of_type("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
        if n.inputs["metadata"]["name"] == "general"
    ]
    (pool,) = [p for p in karpenter_prod.of_type(NODE_POOL) if p.inputs["metadata"]["name"] == GENERAL_POOL_NAME]
    assert node_class.urn in pool.dependencies
    assert node_class.inputs["spec"]["metadataOptions"]["httpTokens"] == "required"


# --- the controller's IAM is the reference policy ------------------------------------------------


def test_the_controller_policy_has_every_statement_of_the_reference(karpenter_prod: StackRun) -> None:
    assert set(controller_statements(karpenter_prod)) == REFERENCE_SIDS


def test_the_controller_may_read_instance_status_and_the_other_reference_reads(karpenter_prod: StackRun) -> None:
    reads = controller_statements(karpenter_prod)["AllowRegionalReadActions"]
    assert {
        "ec2:DescribeInstanceStatus",
        "ec2:DescribeCapacityReservations",
        "ec2:DescribePlacementGroups",
    } <= set(actions(reads))
    assert reads["Condition"] == {"StringEquals": {"aws:RequestedRegion": "us-west-2"}}


def test_every_tagging_statement_is_conditioned_on_this_clusters_tags(karpenter_prod: StackRun) -> None:
    for sid, statement in controller_statements(karpenter_prod).items():
        if "ec2:CreateTags" in actions(statement):
            condition = json.dumps(statement["Condition"])
            assert "kubernetes.io/cluster/llm-prod" in condition and "karpenter.sh/nodepool" in condition, sid


def test_the_controller_terminates_only_instances_its_node_pools_own(karpenter_prod: StackRun) -> None:
    statements = controller_statements(karpenter_prod)
    terminating = [s for s in statements.values() if "ec2:TerminateInstances" in actions(s)]
    assert terminating == [statements["AllowScopedDeletion"]]
    assert statements["AllowScopedDeletion"]["Condition"] == {
        "StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/llm-prod": "owned"},
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }


def test_the_node_role_is_passed_to_ec2_only(karpenter_prod: StackRun) -> None:
    passing = controller_statements(karpenter_prod)["AllowPassingInstanceRole"]
    (node_role,) = [r for r in karpenter_prod.of_type("aws:iam/role:Role") if r.name.endswith("-karpenter-node")]
    assert passing["Resource"].endswith(f":{node_role.name}")
    assert passing["Condition"]["StringEquals"]["iam:PassedToService"] == ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]


def test_instance_profiles_are_scoped_to_this_account_and_region(karpenter_prod: StackRun) -> None:
    statements = controller_statements(karpenter_prod)
    create = statements["AllowScopedInstanceProfileCreationActions"]
    assert create["Resource"] == "arn:aws:iam::123456789012:instance-profile/*"
    assert create["Condition"]["StringEquals"]["aws:RequestTag/topology.kubernetes.io/region"] == "us-west-2"


def test_the_nodes_pull_images_with_the_reference_pull_only_policy(karpenter_prod: StackRun) -> None:
    attached = {
        r.inputs["policyArn"].rsplit("/", 1)[1]
        for r in karpenter_prod.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if "-karpenter-node-" in r.name
    }
    assert attached == {
        "AmazonEKS_CNI_Policy",
        "AmazonEKSWorkerNodePolicy",
        "AmazonEC2ContainerRegistryPullOnly",
        "AmazonSSMManagedInstanceCore",
    }


# --- and it still passes the schemas and the pack -----------------------------------------------


def test_every_kubernetes_object_matches_its_schema(karpenter_prod: StackRun) -> None:
    assert [p for obj in karpenter_prod.kubernetes_objects() for p in validate(obj.inputs)] == []


def test_the_policy_pack_finds_no_mandatory_violation(karpenter_prod: StackRun) -> None:
    found = run_pack(karpenter_prod.resources, load_config("prod"))
    assert [v for v in found if v.level == EnforcementLevel.MANDATORY] == []
