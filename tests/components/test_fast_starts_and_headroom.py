"""A stack that enables the start features and warm headroom renders them, valid against the
upstream schemas and the policy pack: SOCI parallel pull in the Karpenter EC2NodeClass's userData
(aws-samples/karpenter-blueprints@529b88c blueprints/soci-snapshotter/soci-snapshotter.yaml), none
in Auto Mode's NodeClass (no userData there), the Run:ai streamer and a shared compile cache on the
predictors (vLLM docs/models/extensions/runai_model_streamer.md, docs/design/torch_compile.md), and
placeholder pods below every predictor's priority (kubernetes/website
content/en/docs/tasks/administer-cluster/node-overprovisioning.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from pulumi_policy import EnforcementLevel

from components.gpu_capacity import NODE_CLASS_NAME, SOCI_VOLUME_THROUGHPUT_MIBS
from components.headroom import PLACEHOLDER, PRIORITY, PRIORITY_CLASS
from components.serving.objects import COMPILE_CACHE_CLAIM, CONTAINER, compile_cache_dir
from contract.gpu import GPU_RESOURCE
from tests.fast_start_stacks import fast_start_config
from tests.harness import Captured, StackRun, run_program
from tests.k8s_schemas import validate
from tests.policies.policy_harness import load_config, run_pack


@pytest.fixture(scope="module")
def karpenter_fast() -> StackRun:
    return run_program("dev", fast_start_config("karpenter"))


@pytest.fixture(scope="module")
def auto_mode_fast() -> StackRun:
    return run_program("dev", fast_start_config("auto-mode"))


def gpu_node_class(run: StackRun, kind: str) -> Captured:
    (found,) = [
        r
        for r in run.kubernetes_objects()
        if r.inputs["kind"] == kind and r.inputs["metadata"]["name"] == NODE_CLASS_NAME
    ]
    return found


def predictor(run: StackRun) -> dict[str, Any]:
    (isvc,) = [r for r in run.kubernetes_objects() if r.inputs["kind"] == "InferenceService"]
    return isvc.inputs["spec"]["predictor"]


def engine(run: StackRun) -> dict[str, Any]:
    return next(c for c in predictor(run)["containers"] if c["name"] == CONTAINER)


def one(run: StackRun, kind: str) -> dict[str, Any]:
    (found,) = [
        r.inputs
        for r in run.kubernetes_objects()
        if r.inputs["kind"] == kind and PLACEHOLDER in str(r.inputs["metadata"].get("name"))
    ]
    return found


def test_the_karpenter_gpu_node_class_turns_on_fast_image_pull_through_nodeadm(karpenter_fast: StackRun):
    spec = gpu_node_class(karpenter_fast, "EC2NodeClass").inputs["spec"]
    assert yaml.safe_load(spec["userData"]) == {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"featureGates": {"FastImagePull": True}},
    }
    assert spec["blockDeviceMappings"][0]["ebs"]["throughput"] == SOCI_VOLUME_THROUGHPUT_MIBS


def test_a_bottlerocket_node_class_turns_on_the_soci_snapshotter_in_parallel_mode():
    run = run_program("dev", fast_start_config("karpenter", ami_alias="bottlerocket@v1.50.0"))
    user_data = gpu_node_class(run, "EC2NodeClass").inputs["spec"]["userData"]
    assert 'snapshotter = "soci"' in user_data
    assert 'pull-mode = "parallel-pull-unpack"' in user_data


def test_the_auto_mode_node_class_has_no_user_data(auto_mode_fast: StackRun):
    assert "userData" not in gpu_node_class(auto_mode_fast, "NodeClass").inputs["spec"]


def test_predictors_load_weights_with_the_run_ai_streamer(karpenter_fast: StackRun):
    args = engine(karpenter_fast)["args"]
    assert "--load-format=runai_streamer" in args
    (extra,) = [a.split("=", 1)[1] for a in args if a.startswith("--model-loader-extra-config=")]
    assert json.loads(extra) == {"concurrency": 16, "memory_limit": 2 * 2**30}


def test_predictors_share_one_read_write_many_compile_cache(karpenter_fast: StackRun):
    (claim,) = [
        r.inputs
        for r in karpenter_fast.kubernetes_objects()
        if r.inputs["kind"] == "PersistentVolumeClaim" and r.inputs["metadata"]["name"] == COMPILE_CACHE_CLAIM
    ]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == "efs-sc"
    volume = next(
        v
        for v in predictor(karpenter_fast)["volumes"]
        if v.get("persistentVolumeClaim", {}).get("claimName") == COMPILE_CACHE_CLAIM
    )
    mount = next(m for m in engine(karpenter_fast)["volumeMounts"] if m["name"] == volume["name"])
    assert mount["mountPath"] == compile_cache_dir()


def test_placeholders_rank_below_every_predictor_and_preempt_nothing(karpenter_fast: StackRun):
    (pc,) = [r.inputs for r in karpenter_fast.kubernetes_objects() if r.inputs["kind"] == "PriorityClass"]
    assert (pc["metadata"]["name"], pc["value"], pc["preemptionPolicy"], pc["globalDefault"]) == (
        PRIORITY_CLASS,
        PRIORITY,
        "Never",
        False,
    )
    assert PRIORITY < 0 and "priorityClassName" not in predictor(karpenter_fast)


def test_a_placeholder_holds_the_node_a_predictor_would_land_on_with_its_image(karpenter_fast: StackRun):
    deployment = one(karpenter_fast, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] == 1
    assert pod["priorityClassName"] == PRIORITY_CLASS
    assert container["image"] == engine(karpenter_fast)["image"]
    assert container["resources"]["requests"] == engine(karpenter_fast)["resources"]["requests"]
    assert container["resources"]["limits"][GPU_RESOURCE] == "1"
    assert pod["affinity"] == predictor(karpenter_fast)["affinity"]
    assert pod["tolerations"] == predictor(karpenter_fast)["tolerations"]


@pytest.mark.parametrize("fixture", ["karpenter_fast", "auto_mode_fast"])
def test_every_kubernetes_object_matches_its_schema(fixture: str, request: pytest.FixtureRequest):
    run: StackRun = request.getfixturevalue(fixture)
    assert [p for obj in run.kubernetes_objects() for p in validate(obj.inputs)] == []


@pytest.mark.parametrize("fixture", ["karpenter_fast", "auto_mode_fast"])
def test_the_policy_pack_finds_no_mandatory_violation(fixture: str, request: pytest.FixtureRequest):
    run: StackRun = request.getfixturevalue(fixture)
    found = run_pack(run.resources, load_config("dev"))
    assert [v for v in found if v.level == EnforcementLevel.MANDATORY] == []
