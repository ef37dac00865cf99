"""The ModelSync component and the predictor gate, evaluated under Pulumi mocks and validated
against the Kubernetes schemas (kubernetes-validate, strict)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.model_sync import (
    ModelSync,
    ModelSyncArgs,
    content_hash,
    ephemeral_storage,
    job_deadline_seconds,
    job_manifest,
    manifest_wait_init_container,
    source_files,
)
from contract.settings import SettingsError, parse
from contract.settings.models import ModelSettings
from contract.settings.stack_file import load_stack
from tests.contract.test_settings import stack_raw, with_value
from tests.harness import ROOT, CapturingMonitor, PlatformMocks, StackRun
from tests.k8s_schemas import validate

REVISION = "a" * 40
MODELS = [
    ModelSettings.model_validate(
        {"name": "qwen-small", "huggingFaceId": "Qwen/Qwen2.5-0.5B-Instruct", "revision": REVISION, "sizeGiB": 1.2}
    ),
    ModelSettings.model_validate(
        {
            "name": "llama-big",
            "huggingFaceId": "meta-llama/Llama-3.1-70B-Instruct",
            "revision": "b" * 40,
            "sizeGiB": 140,
            "s3Prefix": "llama/70b",
        }
    ),
]


def run_component(**overrides) -> list:
    """Registers one ModelSync under mocks and returns every captured resource."""
    # Pulumi's mocks need a current event loop; async tests elsewhere in the session may leave none.
    asyncio.set_event_loop(asyncio.new_event_loop())
    mocks = PlatformMocks("test")
    monitor = CapturingMonitor(mocks)
    pulumi.runtime.settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project="inference-platform", stack="test", preview=False, monitor=monitor)

    def program() -> None:
        provider = __import__("pulumi_kubernetes").Provider("k8s")
        ModelSync(
            "models-sync",
            ModelSyncArgs(
                models=MODELS,
                bucket_name="weights-bucket",
                namespace="model-sync",
                region="us-west-2",
                provider=provider,
                vpc_cidr="10.0.0.0/16",
                kubernetes_version="1.35",
                **overrides,
            ),
        )

    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    _sync_await(run_pulumi_func(program))
    return monitor.captured


@pytest.fixture(scope="module")
def captured() -> list:
    return run_component()


def of_type(captured: list, token: str) -> list:
    return [r for r in captured if r.type == token]


def as_object(resource, api_version: str, kind: str) -> dict:
    return {
        "apiVersion": api_version,
        "kind": kind,
        **{k: v for k, v in resource.inputs.items() if k not in ("apiVersion", "kind")},
    }


def test_component_uses_its_type_token_and_parents_every_child(captured):
    (component,) = of_type(captured, "inference-platform:models:ModelSync")
    children = [r for r in captured if r.parent == component.urn]
    assert {r.type for r in children} == {
        "kubernetes:core/v1:Namespace",
        "kubernetes:networking.k8s.io/v1:NetworkPolicy",
        "kubernetes:core/v1:ServiceAccount",
        "kubernetes:core/v1:ConfigMap",
        "kubernetes:batch/v1:Job",
    }


def test_one_job_per_model_named_by_model_and_revision(captured):
    jobs = of_type(captured, "kubernetes:batch/v1:Job")
    assert sorted(j.inputs["metadata"]["name"] for j in jobs) == [
        "model-sync-llama-big-bbbbbbbb",
        "model-sync-qwen-small-aaaaaaaa",
    ]


def test_jobs_and_configmap_validate_against_kubernetes_schemas(captured):
    objects = [as_object(r, "batch/v1", "Job") for r in of_type(captured, "kubernetes:batch/v1:Job")]
    objects += [as_object(r, "v1", "ConfigMap") for r in of_type(captured, "kubernetes:core/v1:ConfigMap")]
    objects += [as_object(r, "v1", "ServiceAccount") for r in of_type(captured, "kubernetes:core/v1:ServiceAccount")]
    assert [problem for obj in objects for problem in validate(obj)] == []


def test_schema_validation_catches_a_misplaced_job_field(captured):
    job = as_object(of_type(captured, "kubernetes:batch/v1:Job")[0], "batch/v1", "Job")
    job["spec"]["template"]["spec"]["backoffLimit"] = 3

    assert validate(job) != []


def test_job_syncs_the_pinned_revision_to_the_models_prefix_as_the_writer_service_account(captured):
    job = next(j for j in of_type(captured, "kubernetes:batch/v1:Job") if "llama" in j.inputs["metadata"]["name"])
    pod = job.inputs["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[:2] == ["sync", "--model-id"]
    assert args[args.index("--revision") + 1] == "b" * 40
    assert args[args.index("--prefix") + 1] == "llama/70b"
    assert args[args.index("--bucket") + 1] == "weights-bucket"
    assert pod["serviceAccountName"] == "model-sync"
    (account,) = of_type(captured, "kubernetes:core/v1:ServiceAccount")
    assert account.inputs["metadata"] == {
        "name": "model-sync",
        "namespace": "model-sync",
        "labels": account.inputs["metadata"]["labels"],
    }


def test_job_is_bounded_and_cleaned_up(captured):
    for job in of_type(captured, "kubernetes:batch/v1:Job"):
        spec = job.inputs["spec"]
        assert spec["backoffLimit"] == 4
        assert spec["ttlSecondsAfterFinished"] == 86_400
        assert spec["activeDeadlineSeconds"] >= 1800


def test_job_runs_non_root_on_a_read_only_root_file_system(captured):
    for job in of_type(captured, "kubernetes:batch/v1:Job"):
        pod = job.inputs["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        container = pod["containers"][0]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_job_mounts_no_kubernetes_api_token(captured):
    # EKS Pod Identity injects its own projected token (audience pods.eks.amazonaws.com) regardless.
    for job in of_type(captured, "kubernetes:batch/v1:Job"):
        assert job.inputs["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    (account,) = of_type(captured, "kubernetes:core/v1:ServiceAccount")
    assert account.inputs["automountServiceAccountToken"] is False


def test_job_image_is_pinned_and_deps_come_from_the_pinned_requirements(captured):
    job = of_type(captured, "kubernetes:batch/v1:Job")[0]
    container = job.inputs["spec"]["template"]["spec"]["containers"][0]
    assert ":" in container["image"] and not container["image"].endswith(":latest")
    assert "-r /opt/modelsync/modelsync/requirements.txt" in container["command"][2]
    assert "--require-hashes --only-binary=:all:" in container["command"][2]


def test_every_job_requirement_is_an_exact_version_with_a_wheel_hash():
    text = source_files()["requirements.txt"]
    requirements = [r.strip() for r in text.replace("\\\n", " ").splitlines() if r.strip() and not r.startswith("#")]
    assert len(requirements) >= 20  # boto3 and huggingface_hub with their closure
    for requirement in requirements:
        name_version, *options = requirement.split()
        assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[^=\s]+", name_version), requirement
        hashes = [o for o in options if o.startswith("--hash=sha256:")]
        assert hashes and all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes), requirement


def test_ephemeral_storage_and_deadline_grow_with_the_declared_model_size(captured):
    jobs = {j.inputs["metadata"]["name"]: j for j in of_type(captured, "kubernetes:batch/v1:Job")}
    big = jobs["model-sync-llama-big-bbbbbbbb"].inputs["spec"]
    small = jobs["model-sync-qwen-small-aaaaaaaa"].inputs["spec"]
    big_requests = big["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert big_requests["ephemeral-storage"] == ephemeral_storage(140)[0] == "156Gi"
    assert big["activeDeadlineSeconds"] == job_deadline_seconds(140) > small["activeDeadlineSeconds"]


def test_configmap_carries_the_package_and_is_named_by_its_content(captured):
    (config_map,) = of_type(captured, "kubernetes:core/v1:ConfigMap")
    files = source_files()
    assert config_map.inputs["data"] == files
    assert config_map.inputs["immutable"] is True
    assert config_map.inputs["metadata"]["name"] == f"model-sync-source-{content_hash(files)[:10]}"
    assert {"__init__.py", "__main__.py", "cli.py", "sync.py", "store.py"} <= set(files)


def test_configmap_is_mounted_as_the_modelsync_package(captured):
    (config_map,) = of_type(captured, "kubernetes:core/v1:ConfigMap")
    pod = of_type(captured, "kubernetes:batch/v1:Job")[0].inputs["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if "configMap" in v)
    assert volume["configMap"]["name"] == config_map.inputs["metadata"]["name"]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"])
    assert mount["mountPath"] == "/opt/modelsync/modelsync"


def test_hf_token_comes_from_the_named_secret_only_when_configured(captured):
    env = of_type(captured, "kubernetes:batch/v1:Job")[0].inputs["spec"]["template"]["spec"]["containers"][0]["env"]
    assert "HF_TOKEN" not in {e["name"] for e in env}
    job = job_manifest(MODELS[0], "b", "us-west-2", "serving", "cm", "h", hf_token_secret="hf-token")
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}} in env


def test_job_entrypoint_runs_the_mounted_package(tmp_path: Path):
    """The shell entrypoint, minus the pip step, runs `python -m modelsync` from the mount layout."""
    job = job_manifest(MODELS[0], "b", "us-west-2", "serving", "cm", "h")
    container = job["spec"]["template"]["spec"]["containers"][0]
    package = tmp_path / "opt" / "modelsync" / "modelsync"
    package.mkdir(parents=True)
    for name, text in source_files().items():
        (package / name).write_text(text)
    script = (
        container["command"][2]
        .replace("/opt/modelsync", str(tmp_path / "opt/modelsync"))
        .replace("/work", str(tmp_path / "work"))
    )
    script = script.replace("python -m pip install", "true")
    result = subprocess.run(
        [
            "/bin/sh",
            "-c",
            script.replace("python -m modelsync", f"{sys.executable} -m modelsync"),
            "modelsync",
            "sync",
            "--model-id",
            "x/y",
            "--revision",
            "main",
            "--bucket",
            "bkt",
            "--prefix",
            "p",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--revision 'main' must be a 40-character lowercase hex commit id" in result.stderr


def test_wait_init_container_is_a_valid_container_of_a_pod():
    container = manifest_wait_init_container(MODELS[0], "/mnt/models")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "initContainers": [container],
            "containers": [{"name": "c", "image": "busybox:1.37"}],
            "volumes": [{"name": "model-weights", "persistentVolumeClaim": {"claimName": "w", "readOnly": True}}],
        },
    }

    assert validate(pod) == []
    assert container["image"] == MODELS[0].image
    assert container["volumeMounts"] == [{"name": "model-weights", "mountPath": "/mnt/models", "readOnly": True}]


def test_wait_init_container_checks_the_pinned_revision_of_the_mounted_prefix(tmp_path: Path):
    container = manifest_wait_init_container(MODELS[0], str(tmp_path))
    args = [
        a if a != container["args"][container["args"].index("--timeout-seconds") + 1] else "0"
        for a in container["args"]
    ]

    result = subprocess.run(
        [sys.executable, "-I", *container["command"][1:], *args], capture_output=True, text=True, timeout=30
    )

    assert result.returncode == 1
    assert "refusing to serve a partial model" in result.stderr
    assert args[args.index("--revision") + 1] == REVISION


# --- in both stacks -------------------------------------------------------------------------------


def stack_objects(stack: StackRun, type_token: str) -> list[dict[str, Any]]:
    return [r.inputs for r in stack.of_type(type_token)]


def test_jobs_run_in_the_sync_namespace_and_never_beside_the_predictors(stack: StackRun) -> None:
    settings = load_stack(stack.stack, ROOT)
    jobs = [
        j for j in stack_objects(stack, "kubernetes:batch/v1:Job") if j["metadata"]["name"].startswith("model-sync-")
    ]
    assert jobs and {j["metadata"]["namespace"] for j in jobs} == {settings.model_store.sync_namespace}
    assert settings.model_store.sync_namespace != settings.serving.namespace


def test_the_writer_role_is_associated_only_with_the_sync_namespaces_service_account(stack: StackRun) -> None:
    settings = load_stack(stack.stack, ROOT)
    [writer] = [
        a
        for a in stack_objects(stack, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if a["roleArn"].endswith("-models-model-sync")
    ]
    assert (writer["namespace"], writer["serviceAccount"]) == (settings.model_store.sync_namespace, "model-sync")


def test_jobs_write_create_only(stack: StackRun) -> None:
    for job in stack_objects(stack, "kubernetes:batch/v1:Job"):
        assert "--create-only" in job["spec"]["template"]["spec"]["containers"][0]["args"]


def test_the_sync_namespace_is_restricted_and_reaches_only_dns_the_agent_and_https_outside_the_vpc(
    stack: StackRun,
) -> None:
    settings = load_stack(stack.stack, ROOT)
    namespace = settings.model_store.sync_namespace
    [ns] = [n for n in stack_objects(stack, "kubernetes:core/v1:Namespace") if n["metadata"]["name"] == namespace]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    policies = {
        p["metadata"]["name"]: p["spec"]
        for p in stack_objects(stack, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if p["metadata"]["namespace"] == namespace
    }
    assert policies["default-deny-ingress"]["policyTypes"] == ["Ingress"]
    assert policies["default-deny-egress"] == {"podSelector": {}, "policyTypes": ["Egress"]}
    agent, https = policies["model-sync-egress"]["egress"]
    assert agent == {"to": [{"ipBlock": {"cidr": "169.254.170.23/32"}}], "ports": [{"protocol": "TCP", "port": 80}]}
    assert https == {
        "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [settings.network.cidr]}}],
        "ports": [{"protocol": "TCP", "port": 443}],
    }


def test_a_sync_namespace_shared_with_the_predictors_is_refused_naming_the_key() -> None:
    raw = with_value(stack_raw("prod"), ["modelStore", "syncNamespace"], "inference")
    with pytest.raises(SettingsError) as refused:
        parse(raw)
    assert "inference-platform:modelStore.syncNamespace ('inference') is also serving.namespace" in str(refused.value)
