"""ModelSync: one Kubernetes Job per pinned model revision that delivers it to the model store,
and the init container that keeps a predictor from serving a model before it is complete.

The Job runs `python -m modelsync sync` from a pinned Python image; the package source travels in
an immutable ConfigMap read from this repository when the program runs, so no custom image or
registry is needed. The Job authenticates as the model-sync service account, which ModelStore
binds to its writer role with an EKS Pod Identity association. The Jobs run in a namespace of
their own (`modelStore.syncNamespace`), the only one the writer role trusts, and write create-only
(`--create-only`, what the writer role's policy allows): a published revision is never replaced.
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from contract import names
from contract.images import SYNC_IMAGE
from contract.pod_security import NON_ROOT_UID, container_security_context, pod_security_context
from contract.settings.models import ModelSettings

from . import isolation
from .model_store import MODEL_SYNC_SERVICE_ACCOUNT
from .naming import type_token

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "modelsync"
SOURCE_MOUNT = "/opt/modelsync"
WORK_MOUNT = "/work"
# Only incomplete multipart uploads older than this are aborted at the start of a run. A Job runs one pod
# at a time (podReplacementPolicy: Failed), so any upload under the prefix belongs to a dead pod; the age
# only spares a concurrent manual run's newest upload and clock skew. A retry comes >= 10 s (the Job's
# first backoff) after a kill, so it always cleans up what the killed pod left.
STALE_UPLOAD_AGE_SECONDS = 5
GATE_PARALLEL_READS = 8
# Formats vLLM never loads; skipping them keeps the download close to the declared size.
DEFAULT_EXCLUDE = (
    "original/*",
    "*.gguf",
    "*.onnx",
    "onnx/*",
    "*.msgpack",
    "*.h5",
    "*.ot",
    "flax_model*",
    "tf_model*",
    "rust_model*",
    "*.mlmodel",
    "coreml/*",
)


def source_files(package_dir: Path = PACKAGE_DIR) -> dict[str, str]:
    """The modelsync package (flat: every *.py) and its Job requirements, keyed by file name."""
    files = {p.name: p.read_text() for p in sorted(package_dir.glob("*.py"))}
    files["requirements.txt"] = (package_dir / "requirements.txt").read_text()
    return files


def content_hash(files: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for name, text in sorted(files.items()):
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()


def job_deadline_seconds(size_gib: float) -> int:
    """Half an hour of slack plus two minutes per GiB (download, then upload, at >= ~18 MB/s each)."""
    return 1800 + math.ceil(120 * size_gib)


def ephemeral_storage(size_gib: float) -> tuple[str, str]:
    """(request, limit): the whole revision is staged on local disk, plus the pip-installed deps."""
    return f"{math.ceil(size_gib * 1.1) + 2}Gi", f"{math.ceil(size_gib * 1.25) + 4}Gi"


def job_name(model: ModelSettings) -> str:
    # <= 60 characters: served names are at most 40 (a label value and a DNS label must fit).
    return f"model-sync-{model.name}-{model.revision[:8]}"


def sync_arguments(model: ModelSettings, bucket: str, region: str, exclude: tuple[str, ...]) -> list[str]:
    args = [
        "sync",
        "--model-id",
        model.hugging_face_id,
        "--revision",
        model.revision,
        "--bucket",
        bucket,
        "--prefix",
        model.store_prefix,
        "--source",
        "hf",
        "--region",
        region,
        "--staging-dir",
        f"{WORK_MOUNT}/staging",
        "--concurrency",
        "8",
        "--abort-stale-uploads-after",
        str(STALE_UPLOAD_AGE_SECONDS),
        # The writer role may only create objects (components/model_store.py).
        "--create-only",
    ]
    for pattern in exclude:
        args += ["--exclude", pattern]
    return args


# pip into the writable work volume (the root file system is read-only), then hand over to modelsync.
# Every wheel is pinned to PyPI's sha256 (scripts/hash_modelsync_requirements.py): a swapped
# artifact fails the install instead of running with the bucket's write role.
_ENTRYPOINT = (
    f"set -eu; mkdir -p {WORK_MOUNT}/home {WORK_MOUNT}/tmp; "
    f"python -m pip install --quiet --no-cache-dir --disable-pip-version-check --require-hashes "
    f"--only-binary=:all: --target {WORK_MOUNT}/deps -r {SOURCE_MOUNT}/modelsync/requirements.txt; "
    f'PYTHONPATH={WORK_MOUNT}/deps:{SOURCE_MOUNT} exec python -m modelsync "$@"'
)


def job_manifest(
    model: ModelSettings,
    bucket: str,
    region: str,
    namespace: str,
    source_config_map: str,
    source_hash: str,
    *,
    image: str = SYNC_IMAGE,
    hf_token_secret: str | None = None,
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE,
    backoff_limit: int = 4,
    ttl_seconds_after_finished: int = 86_400,
) -> dict[str, Any]:
    """The batch/v1 Job that syncs one model (plain data, so tests validate it against the schema)."""
    storage_request, storage_limit = ephemeral_storage(model.size_gib)
    labels = {
        "app.kubernetes.io/name": "model-sync",
        **names.PART_OF,
        names.MODEL_LABEL: model.name,
    }
    env: list[dict[str, Any]] = [
        {"name": "AWS_REGION", "value": region},
        {"name": "HOME", "value": f"{WORK_MOUNT}/home"},
        {"name": "TMPDIR", "value": f"{WORK_MOUNT}/tmp"},
        {"name": "HF_HOME", "value": f"{WORK_MOUNT}/hf"},
        {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    if hf_token_secret:
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": hf_token_secret, "key": "token"}}})
    container = {
        "name": "sync",
        "image": image,
        "command": ["/bin/sh", "-c", _ENTRYPOINT, "modelsync"],
        "args": sync_arguments(model, bucket, region, exclude),
        "env": env,
        "resources": {
            # Eight parallel 64 MiB parts plus the hub client's buffers.
            "requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": storage_request},
            "limits": {"memory": "3Gi", "ephemeral-storage": storage_limit},
        },
        "securityContext": container_security_context(runAsNonRoot=True),
        "volumeMounts": [
            {"name": "modelsync", "mountPath": f"{SOURCE_MOUNT}/modelsync", "readOnly": True},
            {"name": "work", "mountPath": WORK_MOUNT},
        ],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(model),
            "namespace": namespace,
            "labels": labels,
            # The predictor's init container waits for the manifest, so `pulumi up` need not block
            # for the length of a multi-GiB download.
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "backoffLimit": backoff_limit,
            # A retry starts only once the failed pod is gone, so no two pods ever write the prefix at once.
            "podReplacementPolicy": "Failed",
            "activeDeadlineSeconds": job_deadline_seconds(model.size_gib),
            "ttlSecondsAfterFinished": ttl_seconds_after_finished,
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"inference-platform/modelsync-source-sha256": source_hash},
                },
                "spec": {
                    "serviceAccountName": MODEL_SYNC_SERVICE_ACCOUNT,
                    # No Kubernetes API token: Pod Identity injects its own projected token
                    # (audience pods.eks.amazonaws.com) whatever this says.
                    "automountServiceAccountToken": False,
                    "restartPolicy": "Never",
                    # SIGTERM makes modelsync abort its in-flight multipart uploads; give it time to.
                    "terminationGracePeriodSeconds": 60,
                    "securityContext": pod_security_context(),
                    "containers": [container],
                    "volumes": [
                        {"name": "modelsync", "configMap": {"name": source_config_map, "defaultMode": 0o444}},
                        {"name": "work", "emptyDir": {"sizeLimit": storage_limit}},
                    ],
                },
            },
        },
    }


def manifest_wait_init_container(
    model: ModelSettings, mount_path: str, volume_name: str = "model-weights", package_dir: Path = PACKAGE_DIR
) -> dict[str, Any]:
    """An init container for a predictor: waits until the mounted prefix holds the published
    `_MANIFEST.json` of the pinned revision and every listed file at its size, then verifies each
    file's SHA-256 (unless the model's gateVerification is "size"), else fails saying why.

    Runs from the predictor's own pinned serving image (it has python3) and needs no AWS access:
    it only reads the read-only Mountpoint volume that the predictor mounts at `mount_path`.
    """
    script = (package_dir / "mounted_check.py").read_text()
    return {
        "name": "wait-for-model",
        "image": model.image,
        "command": ["python3", "-c", script],
        "args": [
            "--dir",
            mount_path,
            "--model-id",
            model.hugging_face_id,
            "--revision",
            model.revision,
            "--verify",
            model.gate_verification,
            "--parallel-reads",
            str(GATE_PARALLEL_READS),
            # As long as the sync Job itself may run; after that the pod restarts and waits again.
            "--timeout-seconds",
            str(job_deadline_seconds(model.size_gib)),
            "--interval-seconds",
            "15",
        ],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "securityContext": container_security_context(runAsNonRoot=True, runAsUser=NON_ROOT_UID),
        "volumeMounts": [{"name": volume_name, "mountPath": mount_path, "readOnly": True}],
    }


# The EKS Pod Identity Agent, where the SDK gets the writer's credentials (EKS user guide, "Set up
# the Amazon EKS Pod Identity Agent": it listens on 169.254.170.23, port 80).
POD_IDENTITY_AGENT = "169.254.170.23/32"
POD_IDENTITY_AGENT_PORT = 80
HTTPS = 443


def egress_policy(namespace: str, vpc_cidr: str) -> dict[str, Any]:
    """The Jobs reach the Pod Identity Agent and HTTPS outside the VPC (the Hugging Face hub and its
    CDN, S3 and STS over the NAT or S3 gateway endpoint), not the VPC itself (the Kubernetes API,
    other pods) nor IMDS (port 80 on 169.254.169.254)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "model-sync-egress", "namespace": namespace, "labels": names.PART_OF},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [{"ipBlock": {"cidr": POD_IDENTITY_AGENT}}],
                    "ports": [{"protocol": "TCP", "port": POD_IDENTITY_AGENT_PORT}],
                },
                {
                    "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [vpc_cidr]}}],
                    "ports": [{"protocol": "TCP", "port": HTTPS}],
                },
            ],
        },
    }


def namespace_policies(namespace: str, vpc_cidr: str) -> list[dict[str, Any]]:
    """Nothing calls the Jobs; they call only DNS, the Pod Identity Agent and HTTPS outside the VPC."""
    return [
        isolation.default_deny_ingress(namespace),
        isolation.default_deny_egress(namespace),
        isolation.dns_egress(namespace),
        egress_policy(namespace, vpc_cidr),
    ]


@dataclass(frozen=True)
class ModelSyncArgs:
    models: list[ModelSettings]
    bucket_name: pulumi.Input[str]
    # The Jobs' own namespace (created here): the only one the writer role trusts.
    namespace: str
    region: str
    provider: k8s.Provider
    # The VPC's CIDR: the Jobs' HTTPS egress excludes it.
    vpc_cidr: str
    kubernetes_version: str
    # A Secret in `namespace` whose key `token` holds a Hugging Face token (gated or private models).
    hf_token_secret: str | None = None
    image: str = SYNC_IMAGE
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    labels: dict[str, str] = field(default_factory=dict)


def _job_for(model: ModelSettings, args: ModelSyncArgs, source_hash: str, resolved: list[Any]) -> dict[str, Any]:
    bucket, namespace, config_map = resolved
    return job_manifest(
        model,
        bucket,
        args.region,
        namespace,
        config_map,
        source_hash,
        image=args.image,
        hf_token_secret=args.hf_token_secret,
        exclude=args.exclude,
    )


class ModelSync(pulumi.ComponentResource):
    """The model-sync service account, the package ConfigMap, and one Job per model."""

    job_names: dict[str, str]
    source_config_map: pulumi.Output[str]

    def __init__(self, name: str, args: ModelSyncArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("models", "ModelSync"), name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        files = source_files()
        source_hash = content_hash(files)
        labels = {
            "app.kubernetes.io/name": "model-sync",
            **names.PART_OF,
            **args.labels,
        }

        namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata={
                "name": args.namespace,
                "labels": {**names.PART_OF, **isolation.pod_security_labels("restricted", args.kubernetes_version)},
            },
            opts=k8s_opts,
        )
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace])
        for policy in namespace_policies(args.namespace, args.vpc_cidr):
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{policy['metadata']['name']}", metadata=policy["metadata"], spec=policy["spec"], opts=k8s_opts
            )
        account = k8s.core.v1.ServiceAccount(
            f"{name}-account",
            # The name ModelStore's Pod Identity association binds to the writer role.
            metadata={"name": MODEL_SYNC_SERVICE_ACCOUNT, "namespace": args.namespace, "labels": labels},
            automount_service_account_token=False,
            opts=k8s_opts,
        )
        # Immutable and named by content: a changed package is a new ConfigMap and new Jobs, never a
        # running Job whose code changes underneath it.
        source = k8s.core.v1.ConfigMap(
            f"{name}-source",
            metadata={"name": f"model-sync-source-{source_hash[:10]}", "namespace": args.namespace, "labels": labels},
            immutable=True,
            data=files,
            opts=k8s_opts,
        )

        self.job_names = {}
        for model in args.models:
            manifest = pulumi.Output.all(args.bucket_name, args.namespace, source.metadata.name).apply(
                functools.partial(_job_for, model, args, source_hash)
            )
            k8s.batch.v1.Job(
                f"{name}-{model.name}",
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                # Jobs are immutable and named per model revision: replace by deleting first.
                opts=pulumi.ResourceOptions.merge(
                    k8s_opts, pulumi.ResourceOptions(depends_on=[account], delete_before_replace=True)
                ),
            )
            self.job_names[model.name] = job_name(model)

        self.source_config_map = source.metadata.name
        self.register_outputs({"jobNames": self.job_names, "sourceConfigMap": self.source_config_map})
