"""The rules that would have caught issue 23 before a real `pulumi up`: a private-only endpoint with
no way in, a load balancer class without its controller, GPU pools on an AMI without a device plugin.
The real stacks (and prod on self-managed Karpenter, tests/components/test_karpenter_path.py) pass;
each rule has violating cases here, mutated from what the program registers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import Captured, StackRun, run_program
from tests.policies.policy_harness import with_inputs
from tests.policies.test_policies import assert_reported, check, eks_cluster, violates
from tests.test_graph import karpenter_config

DEPLOY_PATH = "private-endpoint-has-a-deploy-path"
LBC = "load-balancer-class-has-its-controller"
DEVICE_PLUGIN = "gpu-node-pools-advertise-gpus"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.fixture(scope="module")
def karpenter_prod() -> StackRun:
    return run_program("prod", karpenter_config("prod"))


def without(resources: list[Captured], drop: Any) -> list[Captured]:
    return [r for r in resources if not drop(r)]


def chart_is(name: str) -> Any:
    return lambda r: r.type == RELEASE and r.inputs["chart"].rsplit("/", 1)[-1] == name


# --- a private endpoint needs a way in -------------------------------------------------------------


@violates(DEPLOY_PATH)
def test_a_private_endpoint_without_an_ingress_rule_is_reported(prod: StackRun) -> None:
    found = check(DEPLOY_PATH, without(prod.resources, lambda r: r.type == INGRESS))
    assert_reported(found, DEPLOY_PATH, "llm-prod-cluster-eks", "private", "443")


def test_a_rule_for_another_port_is_no_way_in(prod: StackRun) -> None:
    resources = [
        with_inputs(r, lambda i: i.update(fromPort=22, toPort=22)) if r.type == INGRESS else r for r in prod.resources
    ]
    assert check(DEPLOY_PATH, resources) != []


def test_a_public_allowlisted_endpoint_needs_no_ingress_rule(prod: StackRun) -> None:
    cluster = eks_cluster(prod)
    public = with_inputs(cluster, lambda i: i.update(endpointPublicAccess=True, publicAccessCidrs=["198.51.100.7/32"]))
    resources = [public if r is cluster else r for r in prod.resources if r.type != INGRESS]
    assert check(DEPLOY_PATH, resources) == []


# --- a load balancer class needs its controller ----------------------------------------------------


@violates(LBC)
def test_an_lbc_service_without_the_controller_is_reported(karpenter_prod: StackRun) -> None:
    found = check(LBC, without(karpenter_prod.resources, chart_is("aws-load-balancer-controller")))
    assert_reported(found, LBC, "Service", "service.k8s.aws/nlb", "no AWS Load Balancer Controller")


@violates(LBC)
def test_an_auto_mode_class_on_a_cluster_without_auto_mode_is_reported(karpenter_prod: StackRun) -> None:
    def auto_mode_class(r: Captured) -> Captured:
        if r.type == "kubernetes:core/v1:Service" and r.inputs["spec"].get("loadBalancerClass"):
            return with_inputs(r, lambda i: i["spec"].update(loadBalancerClass="eks.amazonaws.com/nlb"))
        return r

    found = check(LBC, [auto_mode_class(r) for r in karpenter_prod.resources])
    assert_reported(found, LBC, "eks.amazonaws.com/nlb", "Auto Mode")


# --- GPU nodes on an AMI without the device plugin -------------------------------------------------


@violates(DEVICE_PLUGIN)
def test_al2023_gpu_pools_without_the_device_plugin_are_reported(karpenter_prod: StackRun) -> None:
    found = check(DEVICE_PLUGIN, without(karpenter_prod.resources, chart_is("nvidia-device-plugin")))
    assert_reported(found, DEVICE_PLUGIN, "NodePool gpu-spot", "al2023@", "nvidia.com/gpu")
    assert not [v for v in found if "general-purpose" in v.message]


def test_bottlerocket_gpu_pools_need_no_device_plugin_release(karpenter_prod: StackRun) -> None:
    def bottlerocket(r: Captured) -> Captured:
        if r.type == "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass":
            return with_inputs(r, lambda i: i["spec"].update(amiSelectorTerms=[{"alias": "bottlerocket@v1.50.0"}]))
        return r

    resources = [bottlerocket(r) for r in without(karpenter_prod.resources, chart_is("nvidia-device-plugin"))]
    assert check(DEVICE_PLUGIN, resources) == []
