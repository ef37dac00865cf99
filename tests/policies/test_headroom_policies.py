"""The pack on a stack with warm headroom (tests/fast_start_stacks.py: dev on Karpenter, one
placeholder, gpu-spot gpuLimit 3): the placeholders' GPUs count against the pools' GPU limits
beside every autoscaler's maxReplicas, a placeholder is a GPU pod like any other, and a
placeholder Deployment is not a request-path workload that needs two replicas."""

from __future__ import annotations

import pytest

from components.headroom import PLACEHOLDER
from tests.fast_start_stacks import fast_start_config
from tests.harness import Captured, StackRun, run_program
from tests.policies.policy_harness import load_config, with_inputs
from tests.policies.test_policies import assert_reported, check, check_stack

BUDGET = "gpu-budget-fits-node-pools"
GPU_PODS = "gpu-workloads-tolerate-taint-and-request-whole-gpus"
REQUEST_PATH = "no-single-replica-on-request-path"


@pytest.fixture(scope="module")
def headroom() -> StackRun:
    return run_program("dev", fast_start_config("karpenter"))


def placeholders(run: StackRun) -> Captured:
    (found,) = [
        r
        for r in run.kubernetes_objects()
        if r.inputs["kind"] == "Deployment" and r.inputs["metadata"]["name"] == PLACEHOLDER
    ]
    return found


def with_replicas(deployment: Captured, replicas: int) -> Captured:
    return with_inputs(deployment, lambda i: i["spec"].update(replicas=replicas))


def test_maxreplicas_plus_the_placeholders_within_the_pools_pass(headroom: StackRun):
    assert check(BUDGET, headroom.resources, load_config("dev")) == []


def test_placeholders_beyond_what_maxreplicas_leaves_of_the_pools_are_reported(headroom: StackRun):
    # maxReplicas 3 + 2 placeholders = 5 GPUs, the pools launch 4.
    old = placeholders(headroom)
    found = check_stack(BUDGET, headroom, old, with_replicas(old, 2))
    assert_reported(found, BUDGET, "all autoscalers together", "with 2 GPUs held by fixed GPU Deployments", "4 GPUs")


def test_placeholders_alone_beyond_their_pools_are_reported(headroom: StackRun):
    old = placeholders(headroom)
    found = check_stack(BUDGET, headroom, old, with_replicas(old, 5))
    assert_reported(found, BUDGET, f"Deployment inference/{PLACEHOLDER}", "replicas 5 hold 5 GPUs", "4 GPUs")


def test_a_placeholder_that_does_not_tolerate_the_gpu_taint_is_reported(headroom: StackRun):
    old = placeholders(headroom)
    mutated = with_inputs(old, lambda i: i["spec"]["template"]["spec"].pop("tolerations"))
    assert_reported(check_stack(GPU_PODS, headroom, old, mutated), GPU_PODS, PLACEHOLDER, "does not tolerate")


def test_one_placeholder_is_not_a_single_replica_on_the_request_path(headroom: StackRun):
    prod_level = load_config("prod")
    assert check(REQUEST_PATH, [placeholders(headroom)], prod_level) == []


def test_the_same_deployment_without_the_placeholder_priority_is_a_request_path_workload(headroom: StackRun):
    old = placeholders(headroom)
    mutated = with_inputs(old, lambda i: i["spec"]["template"]["spec"].pop("priorityClassName"))
    assert_reported(check(REQUEST_PATH, [mutated], load_config("prod")), REQUEST_PATH, PLACEHOLDER, "1 replica(s)")
