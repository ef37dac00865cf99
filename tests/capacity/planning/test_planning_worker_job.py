"""The planner workers' Kubernetes Job (capacity/planning/worker_job.py): a work-queue Job of N pods
joining one study, its storage URL only in a Secret, never on a GPU node, restricted like every pod
of the platform, and valid against Kubernetes 1.34's schema."""

from __future__ import annotations

import pytest
import yaml

from capacity.planning.worker_job import STORAGE_ENV, STORAGE_SECRET_KEY, literal_argument, worker_job
from contract.gpu import GPU_TAINT, POOL_LABEL
from contract.pod_security import container_security_context, pod_security_context
from tests.k8s_schemas import validate

PLAN_ARGS = ["--stack", "prod", "--trace", "traces/conv days.csv", "--trials", "150", "--seed", "0"]


def job(**overrides) -> dict:
    args = {
        "plan_args": PLAN_ARGS,
        "image": "registry.example/capacity:2026-12-06",
        "workers": 4,
        "storage_secret": "optuna-storage",
        "namespace": "capacity",
        "active_deadline_seconds": 7200,
        **overrides,
    }
    return worker_job(**args)


def pod_spec(manifest: dict) -> dict:
    return manifest["spec"]["template"]["spec"]


def container(manifest: dict) -> dict:
    (only,) = pod_spec(manifest)["containers"]
    return only


def test_the_job_validates_against_the_kubernetes_schema():
    assert validate(job()) == []


def test_the_job_runs_the_requested_workers_at_once_as_a_work_queue():
    spec = job(workers=4)["spec"]
    assert spec["parallelism"] == 4
    assert "completions" not in spec  # a work queue: the first worker to succeed means the study is done


def test_no_pod_tolerates_the_gpu_taint():
    tolerations = pod_spec(job()).get("tolerations", [])
    assert not [t for t in tolerations if t.get("key") in (GPU_TAINT["key"], None)]


def test_pods_are_kept_off_every_node_a_gpu_pool_launched():
    terms = pod_spec(job())["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [{"key": POOL_LABEL, "operator": "DoesNotExist"}]}]


def test_the_storage_url_comes_from_a_secret_key_and_never_appears_in_the_manifest():
    (storage,) = [e for e in container(job(storage_secret="planner-db"))["env"] if e["name"] == STORAGE_ENV]
    assert storage == {
        "name": STORAGE_ENV,
        "valueFrom": {"secretKeyRef": {"name": "planner-db", "key": STORAGE_SECRET_KEY}},
    }
    assert "postgresql" not in yaml.safe_dump(job())


def test_each_worker_joins_the_study_with_the_coordinators_arguments_and_the_secret_url():
    assert container(job())["command"] == [
        "python",
        "-m",
        "capacity",
        "plan",
        *PLAN_ARGS,
        "--workers",
        "1",
        "--storage",
        f"$({STORAGE_ENV})",
        "--join",
    ]


def test_an_argument_with_spaces_stays_one_argument():
    command = container(job(plan_args=["--trace", "my traces/one day.csv"]))["command"]
    assert command[command.index("--trace") + 1] == "my traces/one day.csv"


def test_a_dollar_in_an_argument_is_escaped_from_kubernetes_variable_expansion():
    # Container v1 `args`/`command`: `$(VAR)` expands from the env, `$$` reduces to `$`.
    command = container(job(plan_args=["--trace", "a$(HOME)b$c.csv"]))["command"]
    assert command[command.index("--trace") + 1] == "a$$(HOME)b$$c.csv"
    assert literal_argument("no dollar") == "no dollar"


def test_pods_run_with_the_platforms_restricted_security_context():
    manifest = job()
    assert pod_spec(manifest)["securityContext"] == pod_security_context()
    assert container(manifest)["securityContext"] == container_security_context()
    assert pod_spec(manifest)["automountServiceAccountToken"] is False


def test_a_pod_requests_one_cpu_and_one_simulations_memory_per_simulation():
    resources = container(job(simulations_per_pod=3))["resources"]
    assert resources["requests"] == {"cpu": "3", "memory": "3072Mi"}
    assert resources["limits"] == {"memory": "6144Mi"}


def test_the_deadline_and_cleanup_are_set_on_the_job():
    spec = job(active_deadline_seconds=5400)["spec"]
    assert (spec["activeDeadlineSeconds"], spec["ttlSecondsAfterFinished"]) == (5400, 86_400)
    assert spec["backoffLimit"] >= 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"workers": 0}, "--workers must be >= 1, got 0"),
        ({"image": "registry.example/capacity"}, "--image 'registry.example/capacity' must be pinned"),
        ({"image": "registry.example/capacity:latest"}, "must be pinned by tag or digest (never latest)"),
        ({"image": "registry.example:5000/capacity"}, "must be pinned"),
        ({"namespace": "Capacity"}, "--namespace 'Capacity' is not a Kubernetes name"),
        ({"storage_secret": "db_url"}, "--storage-secret 'db_url' is not a Kubernetes name"),
        ({"plan_args": ["--stack", "prod", "--join"]}, "plan arguments must not contain --join"),
        ({"plan_args": ["--storage=sqlite:///x.db"]}, "plan arguments must not contain --storage"),
        ({"plan_args": ["--journal", "plan.journal"]}, "must not contain --journal: the workers share the study"),
        ({"plan_args": []}, "plan arguments are required"),
        ({"active_deadline_seconds": 0}, "--active-deadline-seconds must be >= 1, got 0"),
    ],
)
def test_bad_input_is_refused_naming_the_flag(overrides, message):
    with pytest.raises(ValueError) as refused:
        job(**overrides)
    assert message in str(refused.value)


def test_an_image_pinned_by_digest_is_accepted():
    digest = "registry.example/capacity@sha256:" + "a" * 64
    assert container(job(image=digest))["image"] == digest
