"""The Kubernetes Job that runs planner workers in the platform's own cluster: N pods, each
`python -m capacity plan <plan args> --storage "$(OPTUNA_STORAGE)" --join`, joining one Optuna study
on an RDB storage whose URL comes from a Secret. Plain data, so tests validate it against the schema.

Why a work-queue Job (Kubernetes docs, concepts/workloads/controllers/job, "Parallel execution for
Jobs"): `.spec.completions` unset and `.spec.parallelism` = N; the pods coordinate through an external
service (the study), each can tell on its own that all the work is done (the study has its trials),
"when any Pod from the Job terminates with success, no new Pods are created", and the Job succeeds once
one has and all have ended. A fixed completion count would instead replace every finished worker until
N had succeeded.
"""

from __future__ import annotations

import re
from typing import Any

from contract import names
from contract.gpu import POOL_LABEL
from contract.pod_security import container_security_context, pod_security_context

STORAGE_ENV = "OPTUNA_STORAGE"
STORAGE_SECRET_KEY = "url"
DEFAULT_NAME = "capacity-plan-workers"
DEFAULT_STORAGE_SECRET = "optuna-storage"
CONTAINER = "worker"
# One simulation's peak resident memory, measured with /usr/bin/time -v on main 56ad579 (prod 14B):
# `plan --workers 1` on the one-hour Azure trace (19k requests) 114 MB; `simulate` (a policy and its
# oracle) of 78k synthetic requests 133 MB, of 467k 337 MB: ~90 MB plus ~0.5 KB per replayed request.
# The request holds ~1.8M requests (issue 35's day of real-shaped traffic at 6% of a region is 239k); the
# limit stops a runaway before it starves the node.
CPU_PER_SIMULATION = 1
MEMORY_REQUEST_MI_PER_SIMULATION = 1024
MEMORY_LIMIT_MI_PER_SIMULATION = 2048
SCRATCH = "/tmp"  # the root filesystem is read-only: HOME, TMPDIR and matplotlib's cache live here
SCRATCH_LIMIT = "1Gi"
# Flags the Job sets itself on every worker's command line.
JOB_FLAGS = ("--storage", "--join", "--workers")

# RFC 1123 names (Kubernetes docs, overview/working-with-objects/names): a Job's and a namespace's
# name is a DNS label; a Secret's a DNS subdomain.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def literal_argument(arg: str) -> str:
    """An argument Kubernetes passes through unchanged: in a container's command and args,
    `$(VAR)` is expanded from its env and `$$` is reduced to `$` (Container v1 API reference,
    `args`), so every `$` is doubled. No shell runs, so spaces and quotes need nothing."""
    return arg.replace("$", "$$")


def join_command(plan_args: list[str], simulations_per_pod: int = 1) -> list[str]:
    """One worker's command line: the coordinator's plan arguments, the storage URL expanded by
    Kubernetes from the Secret-backed env var, `--join`."""
    return [
        "python",
        "-m",
        "capacity",
        "plan",
        *map(literal_argument, plan_args),
        "--workers",
        str(simulations_per_pod),
        "--storage",
        f"$({STORAGE_ENV})",
        "--join",
    ]


def _check(
    plan_args: list[str],
    image: str,
    workers: int,
    storage_secret: str,
    namespace: str,
    name: str,
    active_deadline_seconds: int,
    simulations_per_pod: int,
) -> None:
    """Every rule the inputs break is refused before anything is built, one line naming the flag."""
    if not plan_args:
        raise ValueError("plan arguments are required after `--` (the same ones the coordinating `plan` runs with)")
    for arg in plan_args:
        flag = arg.split("=", 1)[0]
        if flag in JOB_FLAGS:
            raise ValueError(f"plan arguments must not contain {flag}: the Job sets it on every worker")
        if flag == "--journal":
            raise ValueError("plan arguments must not contain --journal: the workers share the study through --storage")
    if workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    if simulations_per_pod < 1:
        raise ValueError(f"--simulations-per-pod must be >= 1, got {simulations_per_pod}")
    if active_deadline_seconds < 1:
        raise ValueError(f"--active-deadline-seconds must be >= 1, got {active_deadline_seconds}")
    repository, _, reference = image.rpartition("@") if "@" in image else image.rpartition(":")
    if not repository or "/" in reference or reference in ("", "latest"):
        raise ValueError(f"--image {image!r} must be pinned by tag or digest (never latest)")
    for flag, value, pattern in (
        ("--namespace", namespace, _DNS_LABEL),
        ("--name", name, _DNS_LABEL),
        ("--storage-secret", storage_secret, _DNS_SUBDOMAIN),
    ):
        if not pattern.match(value):
            raise ValueError(f"{flag} {value!r} is not a Kubernetes name (lowercase letters, digits, '-')")


def worker_job(
    plan_args: list[str],
    image: str,
    workers: int,
    storage_secret: str,
    namespace: str,
    *,
    active_deadline_seconds: int,
    name: str = DEFAULT_NAME,
    simulations_per_pod: int = 1,
    backoff_limit: int = 4,
    ttl_seconds_after_finished: int = 86_400,
) -> dict[str, Any]:
    """The batch/v1 Job running `workers` planner workers on the cluster's general-purpose nodes."""
    _check(plan_args, image, workers, storage_secret, namespace, name, active_deadline_seconds, simulations_per_pod)
    labels = {"app.kubernetes.io/name": "capacity-plan-worker", **names.PART_OF}
    env: list[dict[str, Any]] = [
        # The URL, password included, stays in the Secret: the manifest and the pod spec hold only this reference.
        {"name": STORAGE_ENV, "valueFrom": {"secretKeyRef": {"name": storage_secret, "key": STORAGE_SECRET_KEY}}},
        {"name": "HOME", "value": SCRATCH},
        {"name": "TMPDIR", "value": SCRATCH},
        {"name": "MPLCONFIGDIR", "value": f"{SCRATCH}/matplotlib"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    container = {
        "name": CONTAINER,
        "image": image,
        "command": join_command(plan_args, simulations_per_pod),
        "env": env,
        "resources": {
            "requests": {
                "cpu": str(CPU_PER_SIMULATION * simulations_per_pod),
                "memory": f"{MEMORY_REQUEST_MI_PER_SIMULATION * simulations_per_pod}Mi",
            },
            "limits": {"memory": f"{MEMORY_LIMIT_MI_PER_SIMULATION * simulations_per_pod}Mi"},
        },
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "scratch", "mountPath": SCRATCH}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "parallelism": workers,  # no `completions`: a work queue (module docstring)
            "backoffLimit": backoff_limit,
            "activeDeadlineSeconds": active_deadline_seconds,
            "ttlSecondsAfterFinished": ttl_seconds_after_finished,
            "template": {
                "metadata": {"labels": dict(labels)},  # a copy: the printed YAML has no anchors
                "spec": {
                    "restartPolicy": "Never",
                    # A worker needs the database, not the Kubernetes API.
                    "automountServiceAccountToken": False,
                    "securityContext": pod_security_context(),
                    # Never a GPU node: every node the GPU pools launch carries POOL_LABEL (and the
                    # GPU taint, which this pod does not tolerate), so the scheduler keeps it on
                    # the general-purpose nodes.
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": POOL_LABEL, "operator": "DoesNotExist"}]}
                                ]
                            }
                        }
                    },
                    "containers": [container],
                    "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": SCRATCH_LIMIT}}],
                },
            },
        },
    }
