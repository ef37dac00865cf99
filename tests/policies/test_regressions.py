"""The pack catches the regression of every control the prod stack has: each case removes or
weakens one control in the graph the program registers for prod (with the property
dependencies the engine sends, so a policy links to its role as in a real preview), and the
named policy must report it, at the level prod's policy config gives it. The committed stacks,
linked the same way, raise no violation at all. policies/REGRESSIONS.md is the catalogue: one
line per regression, the ones the pack cannot catch with the reason."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from pulumi_policy import EnforcementLevel, StackValidationPolicy

from policies.platform_policies import documents
from tests.harness import ROOT, Captured, StackRun
from tests.policies.policy_harness import (
    POLICIES,
    UNKNOWN,
    Dependencies,
    load_config,
    policy,
    record_dependencies,
    run_policy,
    with_inputs,
)
from tests.policies.test_policies import COVERED, assert_reported

CATALOGUE = ROOT / "policies" / "REGRESSIONS.md"
Mutation = Callable[[list[Captured]], list[Captured]]


@dataclass(frozen=True)
class Regression:
    control: str  # the case id: which control is removed or weakened
    policy: str
    mutate: Mutation
    fragments: tuple[str, ...]


def _find(resources: list[Captured], type_suffix: str, name: str) -> Captured:
    """The resource whose type ends with `type_suffix` and whose Pulumi name or metadata.name is `name`."""
    found = [
        r
        for r in resources
        if r.type.endswith(type_suffix)
        and (
            r.name == name or (isinstance(r.inputs.get("metadata"), dict) and r.inputs["metadata"].get("name") == name)
        )
    ]
    assert len(found) == 1, f"{len(found)} resources {type_suffix} {name}"
    return found[0]


def edit(type_suffix: str, name: str, change: Callable[[dict[str, Any]], None]) -> Mutation:
    def mutate(resources: list[Captured]) -> list[Captured]:
        old = _find(resources, type_suffix, name)
        new = with_inputs(old, change)
        assert new.inputs != old.inputs, "the mutation changed nothing"
        return [new if r is old else r for r in resources]

    return mutate


def remove(type_suffix: str, name: str) -> Mutation:
    def mutate(resources: list[Captured]) -> list[Captured]:
        old = _find(resources, type_suffix, name)
        return [r for r in resources if r is not old]

    return mutate


def add(make: Callable[[list[Captured]], Captured]) -> Mutation:
    return lambda resources: [*resources, make(resources)]


# --- what the mutations change --------------------------------------------------------------------

BUCKET = "llm-prod-models-weights"
SECRETS_KEY = "llm-prod-cluster-secrets"
SECRETS_KEY_USERS = "eks-secrets-key-names-its-users"
ISVC = "qwen25-14b-awq"
PREDICTOR_SA = f"{ISVC}-predictor"
SSE = ":BucketServerSideEncryptionConfiguration"


def sse_default(inputs: dict[str, Any]) -> dict[str, Any]:
    return inputs["rules"][0]["applyServerSideEncryptionByDefault"]


def policy_statement(sid: str, change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """Change one statement of the JSON policy document in `policy`, by Sid."""

    def mutate(inputs: dict[str, Any]) -> None:
        document = json.loads(inputs["policy"])
        change(next(s for s in document["Statement"] if s.get("Sid") == sid))
        inputs["policy"] = json.dumps(document)

    return mutate


def add_statement(statement: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def mutate(inputs: dict[str, Any]) -> None:
        document = json.loads(inputs["policy"])
        document["Statement"].append(statement)
        inputs["policy"] = json.dumps(document)

    return mutate


def actions_plus(*actions: str) -> Callable[[dict[str, Any]], None]:
    def change(statement: dict[str, Any]) -> None:
        current = statement["Action"]
        statement["Action"] = [*([current] if isinstance(current, str) else current), *actions]

    return change


def whole_bucket(statement: dict[str, Any]) -> None:
    statement["Resource"] = [statement["Resource"][0].split("/", 1)[0] + "/*"]


def as_dict_document_with(*actions: str) -> Callable[[dict[str, Any]], None]:
    """The policy as a mapping (as a program passing a dict would send it), one statement wider."""

    def mutate(inputs: dict[str, Any]) -> None:
        document = json.loads(inputs["policy"])
        actions_plus(*actions)(next(s for s in document["Statement"] if s.get("Sid") == "CreateModelObjectsOnly"))
        inputs["policy"] = document

    return mutate


def predictor(inputs: dict[str, Any]) -> dict[str, Any]:
    return inputs["spec"]["predictor"]


def vllm(inputs: dict[str, Any]) -> dict[str, Any]:
    return predictor(inputs)["containers"][0]


def template(inputs: dict[str, Any]) -> dict[str, Any]:
    return inputs["spec"]["template"]["spec"]


def first_container(inputs: dict[str, Any]) -> dict[str, Any]:
    return template(inputs)["containers"][0]


def without_digest(image: str) -> str:
    return image.split("@", 1)[0]


def command_without(flag: str) -> Callable[[dict[str, Any]], None]:
    def change(inputs: dict[str, Any]) -> None:
        container = first_container(inputs)
        container["command"] = [c.replace(f"{flag} ", "") for c in container["command"]]

    return change


def _attachment(resources: list[Captured], role_name: str, name: str, policy_arn: str) -> Captured:
    """A policy attachment added to the role named `role_name` (a control's regression)."""
    role = _find(resources, ":Role", role_name)
    kind = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
    return Captured(
        kind,
        name,
        {"role": role.name, "policyArn": policy_arn},
        f"urn:pulumi:prod::inference-platform::{kind}::{name}",
        role.urn,
        True,
    )


def admin_attachment(resources: list[Captured]) -> Captured:
    return _attachment(
        resources, "llm-prod-models-model-sync", "writer-admin", "arn:aws:iam::aws:policy/AdministratorAccess"
    )


def amp_managed_attachment(resources: list[Captured]) -> Captured:
    return _attachment(
        resources, "llm-prod-obs-amp-writer", "amp-managed", "arn:aws:iam::aws:policy/AmazonPrometheusRemoteWriteAccess"
    )


def every_pod_peer(inputs: dict[str, Any]) -> None:
    inputs["spec"]["ingress"][0]["from"].append({"namespaceSelector": {}, "podSelector": {}})


def trust_anyone(inputs: dict[str, Any]) -> None:
    document = json.loads(inputs["assumeRolePolicy"])
    document["Statement"][0]["Principal"] = "*"
    inputs["assumeRolePolicy"] = json.dumps(document)


def drop_env(name: str) -> Callable[[dict[str, Any]], None]:
    def change(inputs: dict[str, Any]) -> None:
        container = vllm(inputs)
        container["env"] = [e for e in container["env"] if e["name"] != name]

    return change


def drop_redis_env(name: str) -> Callable[[dict[str, Any]], None]:
    def change(inputs: dict[str, Any]) -> None:
        container = first_container(inputs)
        container["env"] = [e for e in container["env"] if e["name"] != name]

    return change


def drop_rate_limit_env(name: str) -> Callable[[dict[str, Any]], None]:
    def change(inputs: dict[str, Any]) -> None:
        kubernetes = inputs["values"]["config"]["envoyGateway"]["provider"]["kubernetes"]
        container = kubernetes["rateLimitDeployment"]["container"]
        container["env"] = [e for e in container["env"] if e["name"] != name]

    return change


def set_arg(flag: str, value: str) -> Callable[[dict[str, Any]], None]:
    def change(inputs: dict[str, Any]) -> None:
        args = predictor(inputs)["initContainers"][0]["args"]
        args[args.index(flag) + 1] = value

    return change


def drop_statement(sid: str) -> Callable[[dict[str, Any]], None]:
    def mutate(inputs: dict[str, Any]) -> None:
        document = json.loads(inputs["policy"])
        document["Statement"] = [s for s in document["Statement"] if s.get("Sid") != sid]
        inputs["policy"] = json.dumps(document)

    return mutate


def trust_condition(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """Change the StringEquals/ArnLike condition blocks of the first trust statement."""

    def mutate(inputs: dict[str, Any]) -> None:
        document = json.loads(inputs["assumeRolePolicy"])
        change(document["Statement"][0]["Condition"])
        inputs["assumeRolePolicy"] = json.dumps(document)

    return mutate


def release_values(*path: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def reach(inputs: dict[str, Any]) -> dict[str, Any]:
        found = inputs["values"]
        for key in path:
            found = found[key]
        return found

    return reach


def labels(inputs: dict[str, Any]) -> dict[str, Any]:
    return inputs["metadata"]["labels"]


def predictor_rule(index: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda inputs: inputs["spec"]["ingress"][index]


PSA_ENFORCE = "pod-security.kubernetes.io/enforce"
GRAFANA = release_values("grafana")
PROMETHEUS_SPEC = release_values("prometheus", "prometheusSpec")
KEDA_PERMISSIONS = release_values("permissions")


S3 = "s3-buckets-private-encrypted-versioned-tls-only"
KMS = "kms-keys-rotate-and-delete-slowly"
LEAST = "iam-policies-grant-least-privilege"
MOUNT = "model-mount-is-read-only"
NO_IDENTITY = "predictors-have-no-aws-identity"
TRUST = "iam-roles-trust-named-principals"
EKS = "eks-control-plane-logged-encrypted-private"
RESTRICTED = "platform-pods-run-restricted"
TOKEN = "platform-pods-mount-no-api-token"
BEHIND_GATEWAY = "predictors-reachable-only-through-gateway"
WORKLOADS_ISOLATED = "platform-workloads-reachable-only-from-named-pods"
CLIENT_ID = "quotas-charged-to-the-authenticated-client"
BACKEND_KEY = "predictors-accept-only-the-gateway-key"
CREATE_ONLY = "model-store-writes-create-only"
CONDITIONED = "iam-role-trust-is-conditioned"
RATE_LIMIT = "rate-limit-service-reachable-only-from-envoy"
METRICS_ONLY = "predictors-admit-prometheus-on-the-metrics-port-only"
EGRESS = "platform-namespaces-deny-egress-by-default"
OPERATORS_ISOLATED = "operator-namespaces-deny-ingress-by-default"
PSA = "platform-namespaces-enforce-pod-security"
OPERATOR_VALUES = "operator-charts-keep-their-restrictions"
LOOK_BACK = "trigger-look-back-within-prometheus-retention"

REGRESSIONS = [
    # --- the model store: bucket and keys
    Regression(
        "s3-public-access-block-removed", S3, remove(":BucketPublicAccessBlock", BUCKET), ("BucketPublicAccessBlock",)
    ),
    Regression(
        "s3-block-public-policy-off",
        S3,
        edit(":BucketPublicAccessBlock", BUCKET, lambda i: i.update(blockPublicPolicy=False)),
        ("blockPublicPolicy",),
    ),
    Regression(
        "s3-sse-kms-to-sse-s3",
        S3,
        edit(
            SSE, BUCKET, lambda i: i["rules"][0].update(applyServerSideEncryptionByDefault={"sseAlgorithm": "AES256"})
        ),
        ("AES256",),
    ),
    Regression(
        "s3-sse-kms-with-aws-managed-key",
        S3,
        edit(SSE, BUCKET, lambda i: sse_default(i).pop("kmsMasterKeyId")),
        ("aws/s3",),
    ),
    Regression("s3-default-encryption-removed", S3, remove(SSE, BUCKET), ("no default server-side encryption",)),
    Regression(
        "s3-acls-re-enabled",
        S3,
        edit(":BucketOwnershipControls", BUCKET, lambda i: i["rule"].update(objectOwnership="ObjectWriter")),
        ("ACLs are not disabled",),
    ),
    Regression(
        "s3-versioning-suspended",
        S3,
        edit(":BucketVersioning", BUCKET, lambda i: i["versioningConfiguration"].update(status="Suspended")),
        ("versioning",),
    ),
    Regression("s3-tls-only-policy-removed", S3, remove(":BucketPolicy", BUCKET), ("aws:SecureTransport",)),
    Regression(
        "s3-policy-grants-principal-star",
        S3,
        edit(
            ":BucketPolicy",
            BUCKET,
            add_statement(
                {"Sid": "Share", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "*"}
            ),
        ),
        ('Principal "*"', "'Share'"),
    ),
    Regression(
        "s3-force-destroy",
        "buckets-keep-their-objects-on-destroy",
        edit(":Bucket", BUCKET, lambda i: i.update(forceDestroy=True)),
        ("forceDestroy",),
    ),
    Regression(
        "kms-weights-key-rotation-off",
        KMS,
        edit("kms/key:Key", BUCKET, lambda i: i.update(enableKeyRotation=False)),
        ("llm-prod-models-weights", "enableKeyRotation"),
    ),
    Regression(
        "kms-secrets-key-rotation-off",
        KMS,
        edit("kms/key:Key", "llm-prod-cluster-secrets", lambda i: i.pop("enableKeyRotation")),
        ("llm-prod-cluster-secrets", "enableKeyRotation"),
    ),
    Regression(
        "kms-deletion-window-7-days",
        KMS,
        edit("kms/key:Key", BUCKET, lambda i: i.update(deletionWindowInDays=7)),
        ("deletionWindowInDays 7",),
    ),
    # --- who may read and write the weights
    Regression(
        "mount-role-gains-put-object",
        MOUNT,
        edit(
            ":RolePolicy",
            "llm-prod-models-mountpoint-read",
            policy_statement("ReadModelObjects", actions_plus("s3:PutObject")),
        ),
        ("Mountpoint CSI role", "s3:PutObject"),
    ),
    Regression(
        "mount-role-gains-s3-wildcard",
        MOUNT,
        edit(
            ":RolePolicy",
            "llm-prod-models-mountpoint-read",
            policy_statement("ReadModelObjects", lambda s: s.update(Action="s3:*")),
        ),
        ("s3:DeleteObject",),
    ),
    Regression(
        "mount-volume-writable",
        MOUNT,
        edit(":PersistentVolume", f"{ISVC}-weights", lambda i: i["spec"]["mountOptions"].remove("read-only")),
        (f"PersistentVolume {ISVC}-weights", "read-only"),
    ),
    Regression(
        "predictor-claims-weights-read-write",
        MOUNT,
        edit(
            ":InferenceService",
            ISVC,
            lambda i: predictor(i)["volumes"][0]["persistentVolumeClaim"].update(readOnly=False),
        ),
        ("'model-weights' claims the weights read-write",),
    ),
    Regression(
        "predictor-mounts-weights-writable",
        MOUNT,
        edit(":InferenceService", ISVC, lambda i: vllm(i)["volumeMounts"][0].pop("readOnly")),
        ("containers[kserve-container] mounts the weights without readOnly",),
    ),
    Regression(
        "writer-scoped-to-whole-bucket",
        LEAST,
        edit(":RolePolicy", "llm-prod-models-model-sync", policy_statement("CreateModelObjectsOnly", whole_bucket)),
        ("anywhere in the bucket",),
    ),
    Regression(
        "writer-gains-delete-object-version",
        LEAST,
        edit(
            ":RolePolicy",
            "llm-prod-models-model-sync",
            policy_statement("CreateModelObjectsOnly", actions_plus("s3:DeleteObjectVersion")),
        ),
        ("s3:DeleteObjectVersion",),
    ),
    Regression(
        "writer-gains-delete-wildcard-in-a-dict-document",
        LEAST,
        edit(":RolePolicy", "llm-prod-models-model-sync", as_dict_document_with("s3:Delete*")),
        ("s3:DeleteObjectVersion", "s3:DeleteBucket"),
    ),
    Regression(
        "writer-may-schedule-key-deletion",
        LEAST,
        edit(
            ":RolePolicy",
            "llm-prod-models-model-sync",
            policy_statement("EncryptWeights", actions_plus("kms:ScheduleKeyDeletion")),
        ),
        ("kms:ScheduleKeyDeletion",),
    ),
    Regression("writer-gets-administrator-access", LEAST, add(admin_attachment), ("AdministratorAccess",)),
    Regression(
        "writer-associated-with-predictor-service-account",
        NO_IDENTITY,
        edit(
            ":PodIdentityAssociation",
            "llm-prod-models-model-sync",
            lambda i: i.update(namespace="inference", serviceAccount=PREDICTOR_SA),
        ),
        (f"inference/{PREDICTOR_SA}", ISVC),
    ),
    Regression(
        "predictor-service-account-gets-irsa-role",
        NO_IDENTITY,
        edit(
            ":ServiceAccount",
            PREDICTOR_SA,
            lambda i: i["metadata"].update(annotations={"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/x"}),
        ),
        ("eks.amazonaws.com/role-arn",),
    ),
    Regression(
        "writer-trusts-any-principal",
        TRUST,
        edit(":Role", "llm-prod-models-model-sync", trust_anyone),
        ("llm-prod-models-model-sync", 'Principal "*"'),
    ),
    # --- the cluster
    Regression(
        "eks-secrets-encryption-removed",
        EKS,
        edit("eks:index:Cluster", "llm-prod-cluster-eks", lambda i: i.pop("encryptionConfigKeyArn")),
        ("envelope-encrypted",),
    ),
    Regression(
        "eks-audit-log-off",
        EKS,
        edit("eks:index:Cluster", "llm-prod-cluster-eks", lambda i: i["enabledClusterLogTypes"].remove("audit")),
        ("audit",),
    ),
    Regression(
        "eks-public-endpoint-without-allowlist",
        EKS,
        edit("eks:index:Cluster", "llm-prod-cluster-eks", lambda i: i.update(endpointPublicAccess=True)),
        ("allowlist",),
    ),
    Regression(
        "eks-deletion-protection-off",
        "eks-clusters-deletion-protected",
        edit("eks:index:Cluster", "llm-prod-cluster-eks", lambda i: i.update(deletionProtection=False)),
        ("deletionProtection",),
    ),
    Regression(
        "eks-config-map-authentication",
        "eks-authentication-by-access-entries-only",
        edit("eks:index:Cluster", "llm-prod-cluster-eks", lambda i: i.update(authenticationMode="CONFIG_MAP")),
        ("CONFIG_MAP", "aws-auth"),
    ),
    Regression(
        "eks-api-and-config-map-authentication",
        "eks-authentication-by-access-entries-only",
        edit("eks:index:Cluster", "llm-prod-cluster-eks", lambda i: i.update(authenticationMode="API_AND_CONFIG_MAP")),
        ("API_AND_CONFIG_MAP",),
    ),
    Regression(
        "deployer-ingress-open-to-the-world",
        "security-groups-admit-named-ranges",
        edit(":SecurityGroupIngressRule", "llm-prod-cluster-deployer-0", lambda i: i.update(cidrIpv4="0.0.0.0/0")),
        ("0.0.0.0/0",),
    ),
    Regression(
        "vpc-flow-logs-removed",
        "vpc-flow-logs-capture-all-traffic",
        remove("flowLog:FlowLog", "llm-prod-net-flow-logs"),
        ("no flow log",),
    ),
    Regression(
        "vpc-flow-logs-rejected-only",
        "vpc-flow-logs-capture-all-traffic",
        edit("flowLog:FlowLog", "llm-prod-net-flow-logs", lambda i: i.update(trafficType="REJECT")),
        ("REJECT",),
    ),
    # --- network isolation
    Regression(
        "network-policy-controller-switch-removed",
        "network-policies-enforced",
        remove(":ConfigMap", "amazon-vpc-cni"),
        ("enable-network-policy-controller",),
    ),
    Regression(
        "node-class-network-policy-removed",
        "network-policies-enforced",
        edit(":NodeClass", "gpu", lambda i: i["spec"].pop("networkPolicy")),
        ("networkPolicy",),
    ),
    Regression(
        "predictors-default-deny-removed",
        BEHIND_GATEWAY,
        remove(":NetworkPolicy", "llm-prod-serving-default-deny"),
        ("default-deny",),
    ),
    Regression(
        "predictor-peer-ip-block",
        BEHIND_GATEWAY,
        edit(
            ":NetworkPolicy",
            "predictors",
            lambda i: i["spec"]["ingress"][0]["from"].append({"ipBlock": {"cidr": "10.0.0.0/8"}}),
        ),
        ("NetworkPolicy inference/predictors", "not named pods"),
    ),
    Regression(
        "predictor-peer-every-pod-in-every-namespace",
        BEHIND_GATEWAY,
        edit(":NetworkPolicy", "predictors", every_pod_peer),
        ("NetworkPolicy inference/predictors", "not named pods"),
    ),
    Regression(
        "predictor-prometheus-peer-in-any-namespace",
        BEHIND_GATEWAY,
        edit(":NetworkPolicy", "predictors", lambda i: i["spec"]["ingress"][1]["from"][0].update(namespaceSelector={})),
        ("NetworkPolicy inference/predictors", "not named pods"),
    ),
    Regression(
        "predictor-rule-without-sources",
        BEHIND_GATEWAY,
        edit(":NetworkPolicy", "predictors", lambda i: i["spec"]["ingress"][0].pop("from")),
        ("NetworkPolicy inference/predictors",),
    ),
    Regression(
        "gateway-namespace-default-deny-removed",
        WORKLOADS_ISOLATED,
        remove(":NetworkPolicy", "llm-prod-gateway-default-deny"),
        ("StatefulSet ai-gateway/ratelimit-redis", "default-deny"),
    ),
    Regression(
        "redis-peer-every-pod-in-every-namespace",
        WORKLOADS_ISOLATED,
        edit(":NetworkPolicy", "ratelimit-redis", every_pod_peer),
        ("NetworkPolicy ai-gateway/ratelimit-redis", "not named pods"),
    ),
    # --- the platform's pods
    Regression(
        "predictor-mounts-api-token",
        TOKEN,
        edit(":InferenceService", ISVC, lambda i: predictor(i).update(automountServiceAccountToken=True)),
        (f"InferenceService inference/{ISVC}", "automountServiceAccountToken: true"),
    ),
    Regression(
        "model-sync-mounts-api-token",
        TOKEN,
        edit(
            ":Job",
            "llm-prod-model-sync-qwen25-14b-awq",
            lambda i: template(i).update(automountServiceAccountToken=True),
        ),
        ("Job model-sync/model-sync-qwen25-14b-awq", "automountServiceAccountToken: true"),
    ),
    Regression(
        "redis-token-left-to-the-default-service-account",
        TOKEN,
        edit(":StatefulSet", "ratelimit-redis", lambda i: template(i).pop("automountServiceAccountToken")),
        ("ratelimit-redis", "service account default"),
    ),
    Regression(
        "predictor-host-path",
        RESTRICTED,
        edit(
            ":InferenceService",
            ISVC,
            lambda i: predictor(i)["volumes"].append({"name": "host", "hostPath": {"path": "/"}}),
        ),
        ("hostPath", "'host'"),
    ),
    Regression(
        "predictor-sys-admin",
        RESTRICTED,
        edit(":InferenceService", ISVC, lambda i: vllm(i)["securityContext"]["capabilities"].update(add=["SYS_ADMIN"])),
        ("SYS_ADMIN",),
    ),
    Regression(
        "predictor-seccomp-removed",
        RESTRICTED,
        edit(":InferenceService", ISVC, lambda i: predictor(i)["securityContext"].pop("seccompProfile")),
        ("seccomp",),
    ),
    Regression(
        "predictor-host-network",
        RESTRICTED,
        edit(":InferenceService", ISVC, lambda i: predictor(i).update(hostNetwork=True)),
        ("hostNetwork",),
    ),
    Regression(
        "predictor-gate-keeps-capabilities",
        RESTRICTED,
        edit(
            ":InferenceService",
            ISVC,
            lambda i: predictor(i)["initContainers"][0]["securityContext"].pop("capabilities"),
        ),
        ("initContainers[wait-for-model]", "drop ALL"),
    ),
    Regression(
        "redis-privileged",
        RESTRICTED,
        edit(
            ":StatefulSet", "ratelimit-redis", lambda i: first_container(i)["securityContext"].update(privileged=True)
        ),
        ("containers[redis]", "privileged"),
    ),
    Regression(
        "redis-runs-as-root",
        RESTRICTED,
        edit(":StatefulSet", "ratelimit-redis", lambda i: template(i)["securityContext"].update(runAsUser=0)),
        ("root",),
    ),
    Regression(
        "redis-writable-root-filesystem",
        RESTRICTED,
        edit(
            ":StatefulSet",
            "ratelimit-redis",
            lambda i: first_container(i)["securityContext"].update(readOnlyRootFilesystem=False),
        ),
        ("readOnlyRootFilesystem",),
    ),
    Regression(
        "model-sync-privilege-escalation",
        RESTRICTED,
        edit(
            ":Job",
            "llm-prod-model-sync-qwen25-14b-awq",
            lambda i: first_container(i)["securityContext"].update(allowPrivilegeEscalation=True),
        ),
        ("Job model-sync/model-sync-qwen25-14b-awq", "allowPrivilegeEscalation"),
    ),
    # --- what runs
    Regression(
        "pip-install-without-require-hashes",
        "pip-installs-require-hashes",
        edit(":Job", "llm-prod-model-sync-qwen25-14b-awq", command_without("--require-hashes")),
        ("--require-hashes",),
    ),
    Regression(
        "pip-install-accepts-source-distributions",
        "pip-installs-require-hashes",
        edit(":Job", "llm-prod-model-sync-qwen25-14b-awq", command_without("--only-binary=:all:")),
        ("--only-binary=:all:",),
    ),
    Regression(
        "predictor-gate-checks-sizes-only",
        "predictors-serve-only-verified-weights",
        edit(":InferenceService", ISVC, set_arg("--verify", "size")),
        ("'size'",),
    ),
    Regression(
        "predictor-gate-removed",
        "predictors-serve-only-verified-weights",
        edit(":InferenceService", ISVC, lambda i: predictor(i).pop("initContainers")),
        ("no init container gates",),
    ),
    Regression(
        "predictor-image-latest",
        "images-and-model-revisions-pinned",
        edit(":InferenceService", ISVC, lambda i: vllm(i).update(image="vllm/vllm-openai:latest")),
        ("latest",),
    ),
    Regression(
        "predictor-image-by-tag-only",
        "images-and-model-revisions-pinned",
        edit(":InferenceService", ISVC, lambda i: vllm(i).update(image=without_digest(vllm(i)["image"]))),
        ("vllm/vllm-openai:v0.25.1 is pinned by tag only",),
    ),
    Regression(
        "model-sync-image-by-tag-only",
        "images-and-model-revisions-pinned",
        edit(
            ":Job",
            "llm-prod-model-sync-qwen25-14b-awq",
            lambda i: first_container(i).update(image=without_digest(first_container(i)["image"])),
        ),
        ("python:3.11.15-slim-bookworm is pinned by tag only",),
    ),
    Regression(
        "redis-image-by-tag-only",
        "images-and-model-revisions-pinned",
        edit(
            ":StatefulSet",
            "ratelimit-redis",
            lambda i: first_container(i).update(image=without_digest(first_container(i)["image"])),
        ),
        ("redis:7.4.10-alpine is pinned by tag only",),
    ),
    Regression(
        "model-revision-branch",
        "images-and-model-revisions-pinned",
        edit(":InferenceService", ISVC, set_arg("--revision", "main")),
        ("--revision 'main'",),
    ),
    # --- the gateway
    Regression(
        "api-key-auth-removed",
        "ai-routes-require-api-key-and-rate-limit",
        edit(":SecurityPolicy", "client-api-keys", lambda i: i["spec"].pop("apiKeyAuth")),
        ("API-key",),
    ),
    Regression(
        "rate-limit-removed",
        "ai-routes-require-api-key-and-rate-limit",
        edit(":BackendTrafficPolicy", "client-limits", lambda i: i["spec"].pop("rateLimit")),
        ("rate limit",),
    ),
    Regression(
        "token-cost-not-recorded",
        "token-budgets-charge-recorded-costs",
        edit(":AIGatewayRoute", "inference", lambda i: i["spec"]["llmRequestCosts"].pop()),
        ("llm_total_token", "cost 0 tokens"),
    ),
    Regression(
        "gateway-admits-routes-from-every-namespace",
        "predictors-have-no-other-entrance",
        edit(
            ":Gateway",
            "inference",
            lambda i: i["spec"]["listeners"][0]["allowedRoutes"]["namespaces"].update({"from": "All"}),
        ),
        ("Gateway ai-gateway/inference", "every namespace"),
    ),
    Regression(
        "kserve-creates-its-own-ingress",
        "predictors-have-no-other-entrance",
        edit(
            ":Release",
            "llm-prod-serving-kserve",
            lambda i: i["values"]["kserve"]["controller"]["gateway"].update(disableIngressCreation=False),
        ),
        ("disableIngressCreation",),
    ),
    Regression(
        "client-id-header-not-forwarded",
        CLIENT_ID,
        edit(":SecurityPolicy", "client-api-keys", lambda i: i["spec"]["apiKeyAuth"].pop("forwardClientIDHeader")),
        ("BackendTrafficPolicy ai-gateway/client-limits", "x-client-id"),
    ),
    Regression(
        "client-key-forwarded-upstream",
        CLIENT_ID,
        edit(":SecurityPolicy", "client-api-keys", lambda i: i["spec"]["apiKeyAuth"].update(sanitize=False)),
        ("sanitize",),
    ),
    Regression(
        "backend-security-policy-removed",
        BACKEND_KEY,
        remove(":BackendSecurityPolicy", f"{ISVC}-key"),
        (f"AIServiceBackend ai-gateway/{ISVC}", "BackendSecurityPolicy"),
    ),
    Regression(
        "predictor-api-key-removed",
        BACKEND_KEY,
        edit(":InferenceService", ISVC, drop_env("VLLM_API_KEY")),
        (f"InferenceService inference/{ISVC}", "VLLM_API_KEY"),
    ),
    Regression(
        "internet-facing-plain-http-nlb",
        "internet-facing-load-balancers-terminate-tls",
        edit(
            ":Service",
            "inference-gateway",
            lambda i: i["metadata"]["annotations"].update(
                {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internet-facing"}
            ),
        ),
        ("internet-facing", "in clear"),
    ),
    Regression(
        "redis-without-password",
        "rate-limit-store-authenticated",
        edit(":StatefulSet", "ratelimit-redis", drop_redis_env("REDIS_PASSWORD")),
        ("containers[redis]", "REDIS_PASSWORD"),
    ),
    Regression(
        "rate-limit-service-without-store-password",
        "rate-limit-store-authenticated",
        edit(":Release", "llm-prod-gateway-envoy-gateway", drop_rate_limit_env("REDIS_AUTH")),
        ("REDIS_AUTH", "fails open"),
    ),
    Regression(
        "monitoring-volumes-unencrypted",
        "ebs-storage-classes-encrypt",
        edit(":StorageClass", "monitoring-gp3", lambda i: i["parameters"].pop("encrypted")),
        ("StorageClass monitoring-gp3", "not encrypted"),
    ),
    # --- serving safely
    Regression(
        "predictor-disruption-budget-removed",
        "predictors-probed-drained-and-disruption-budgeted",
        remove(":PodDisruptionBudget", "llm-prod-serving-qwen25-14b-awq"),
        ("PodDisruptionBudget",),
    ),
    Regression(
        "single-envoy-proxy",
        "no-single-replica-on-request-path",
        edit(
            ":EnvoyProxy",
            "inference-proxy",
            lambda i: i["spec"]["provider"]["kubernetes"]["envoyDeployment"].update(replicas=1),
        ),
        ("Envoy proxies run 1",),
    ),
    # --- the controls of issue 24 (findings 1-10 and 11)
    Regression(
        "s3-policy-accepts-sse-s3-uploads",
        S3,
        edit(":BucketPolicy", BUCKET, drop_statement("DenyOtherEncryption")),
        ("s3:x-amz-server-side-encryption", "SSE-S3"),
    ),
    Regression(
        "s3-policy-accepts-other-kms-keys",
        S3,
        edit(":BucketPolicy", BUCKET, drop_statement("DenyOtherKmsKey")),
        ("s3:x-amz-server-side-encryption-aws-kms-key-id", "another KMS key"),
    ),
    Regression(
        "redis-password-on-redis-cli-argv",
        "rate-limit-store-authenticated",
        edit(
            ":ConfigMap",
            "ratelimit-redis-scripts",
            lambda i: i["data"].update(
                {"start.sh": i["data"]["start.sh"].replace("redis-cli -h", 'redis-cli -a "$REDIS_PASSWORD" -h')}
            ),
        ),
        ("ConfigMap ai-gateway/ratelimit-redis-scripts", "REDISCLI_AUTH"),
    ),
    Regression(
        "amp-writer-on-every-workspace",
        LEAST,
        edit(
            ":RolePolicy",
            "llm-prod-obs-amp-writer",
            lambda i: i.update(
                policy=json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": "aps:RemoteWrite", "Resource": "*"}],
                    }
                )
            ),
        ),
        ("aps:RemoteWrite", "every resource"),
    ),
    Regression(
        "amp-writer-gets-managed-remote-write-policy",
        LEAST,
        add(amp_managed_attachment),
        ("AmazonPrometheusRemoteWriteAccess",),
    ),
    Regression(
        "weights-key-default-policy",
        "bucket-keys-name-their-users",
        edit("kms/key:Key", BUCKET, lambda i: i.pop("policy")),
        (f"KMS key '{BUCKET}'", "no key policy of its own"),
    ),
    Regression(
        "weights-key-lets-account-iam-decrypt",
        "bucket-keys-name-their-users",
        edit(
            "kms/key:Key", BUCKET, policy_statement("AdministerThroughAccountIam", lambda s: s.update(Action="kms:*"))
        ),
        ("'AdministerThroughAccountIam'", "kms:Decrypt", ":root"),
    ),
    Regression(
        "secrets-key-default-policy",
        SECRETS_KEY_USERS,
        edit("kms/key:Key", SECRETS_KEY, lambda i: i.pop("policy")),
        (f"KMS key '{SECRETS_KEY}'", "no key policy of its own"),
    ),
    Regression(
        "secrets-key-lets-account-iam-decrypt",
        SECRETS_KEY_USERS,
        edit(
            "kms/key:Key",
            SECRETS_KEY,
            policy_statement("AdministerThroughAccountIam", lambda s: s.update(Action="kms:*")),
        ),
        ("'AdministerThroughAccountIam'", "kms:Decrypt", ":root"),
    ),
    Regression(
        "secrets-key-open-to-every-principal",
        SECRETS_KEY_USERS,
        edit("kms/key:Key", SECRETS_KEY, policy_statement("ClusterRoleUsesKey", lambda s: s.update(Principal="*"))),
        ("'ClusterRoleUsesKey'", "['*']"),
    ),
    Regression(
        "secrets-key-cluster-role-dropped",
        SECRETS_KEY_USERS,
        edit("kms/key:Key", SECRETS_KEY, drop_statement("ClusterRoleUsesKey")),
        ("no named principal may ['kms:Encrypt', 'kms:Decrypt']",),
    ),
    Regression(
        "bucket-policy-lets-writer-replace",
        CREATE_ONLY,
        edit(":BucketPolicy", BUCKET, drop_statement("DenyWriterReplacing")),
        ("If-None-Match",),
    ),
    Regression(
        "bucket-policy-lets-writer-delete",
        CREATE_ONLY,
        edit(":BucketPolicy", BUCKET, drop_statement("DenyWriterDeleting")),
        ("s3:DeleteObject", "s3:DeleteObjectVersion"),
    ),
    Regression(
        "writer-puts-without-if-none-match",
        CREATE_ONLY,
        edit(
            ":RolePolicy",
            "llm-prod-models-model-sync",
            policy_statement("CreateModelObjectsOnly", lambda s: s.pop("Condition")),
        ),
        ("'CreateModelObjectsOnly'", "without If-None-Match"),
    ),
    Regression(
        "writer-associated-in-predictors-namespace",
        "model-writer-alone-in-its-namespace",
        edit(":PodIdentityAssociation", "llm-prod-models-model-sync", lambda i: i.update(namespace="inference")),
        ("namespace inference", f"InferenceService inference/{ISVC}"),
    ),
    Regression(
        "writer-associated-in-gateway-namespace",
        "model-writer-alone-in-its-namespace",
        edit(":PodIdentityAssociation", "llm-prod-models-model-sync", lambda i: i.update(namespace="ai-gateway")),
        ("StatefulSet ai-gateway/ratelimit-redis",),
    ),
    Regression(
        "writer-trust-without-conditions",
        CONDITIONED,
        edit(":Role", "llm-prod-models-model-sync", trust_condition(lambda c: c.clear())),
        ("llm-prod-models-model-sync", "aws:RequestTag/kubernetes-namespace", "aws:SourceAccount"),
    ),
    Regression(
        "writer-trust-any-namespace",
        CONDITIONED,
        edit(
            ":Role",
            "llm-prod-models-model-sync",
            trust_condition(lambda c: c["StringEquals"].pop("aws:RequestTag/kubernetes-namespace")),
        ),
        ("['aws:RequestTag/kubernetes-namespace']",),
    ),
    Regression(
        "amp-writer-trust-any-cluster",
        CONDITIONED,
        edit(
            ":Role",
            "llm-prod-obs-amp-writer",
            trust_condition(lambda c: c["StringEquals"].update({"aws:RequestTag/eks-cluster-arn": "*"})),
        ),
        ("llm-prod-obs-amp-writer", "aws:RequestTag/eks-cluster-arn"),
    ),
    Regression(
        "flow-logs-trust-without-source-arn",
        CONDITIONED,
        edit(":Role", "llm-prod-net-flow-logs", trust_condition(lambda c: c.pop("ArnLike"))),
        ("vpc-flow-logs.amazonaws.com", "aws:SourceArn"),
    ),
    Regression(
        "force-include-usage-dropped",
        "token-budgets-see-streamed-usage",
        edit(":InferenceService", ISVC, lambda i: vllm(i)["args"].remove("--enable-force-include-usage")),
        (f"InferenceService inference/{ISVC}", "--enable-force-include-usage"),
    ),
    Regression(
        "force-include-usage-negated",
        "token-budgets-see-streamed-usage",
        edit(":InferenceService", ISVC, lambda i: vllm(i)["args"].append("--no-enable-force-include-usage")),
        ("charged 0 tokens",),
    ),
    Regression(
        "rate-limit-policy-removed",
        RATE_LIMIT,
        remove(":NetworkPolicy", "llm-prod-isolation-envoy-gateway-system-rate-limit"),
        ("envoy-gateway-system", "isolates the rate-limit service"),
    ),
    Regression(
        "rate-limit-json-port-open",
        RATE_LIMIT,
        edit(
            ":NetworkPolicy",
            "llm-prod-isolation-envoy-gateway-system-rate-limit",
            lambda i: i["spec"]["ingress"][0]["ports"].append({"protocol": "TCP", "port": 8080}),
        ),
        ("'8080'",),
    ),
    Regression(
        "rate-limit-admits-every-pod",
        RATE_LIMIT,
        edit(":NetworkPolicy", "llm-prod-isolation-envoy-gateway-system-rate-limit", every_pod_peer),
        ("not named pods",),
    ),
    Regression(
        "prometheus-admitted-to-vllm-port",
        METRICS_ONLY,
        edit(":NetworkPolicy", "predictors", lambda i: predictor_rule(1)(i)["ports"][0].update(port=8080)),
        ("vLLM's port ['8080']",),
    ),
    Regression(
        "prometheus-admitted-on-every-port",
        METRICS_ONLY,
        edit(":NetworkPolicy", "predictors", lambda i: predictor_rule(1)(i).pop("ports")),
        ("every port", "/update_weights"),
    ),
    Regression(
        "gateway-listener-plain-http",
        "gateway-terminates-tls",
        edit(
            ":Gateway",
            "inference",
            lambda i: i["spec"]["listeners"][0].update(protocol="HTTP", tls=None),
        ),
        ("Gateway ai-gateway/inference", "speaks HTTP", "in clear"),
    ),
    Regression(
        "gateway-listener-without-certificate",
        "gateway-terminates-tls",
        edit(":Gateway", "inference", lambda i: i["spec"]["listeners"][0]["tls"].pop("certificateRefs")),
        ("no certificateRefs",),
    ),
    Regression(
        "nlb-source-ranges-removed",
        "load-balancers-admit-named-ranges",
        edit(":Service", "inference-gateway", lambda i: i["spec"].pop("loadBalancerSourceRanges")),
        ("Service envoy-gateway-system/inference-gateway", "no loadBalancerSourceRanges"),
    ),
    Regression(
        "nlb-source-ranges-everywhere",
        "load-balancers-admit-named-ranges",
        edit(":Service", "inference-gateway", lambda i: i["spec"].update(loadBalancerSourceRanges=["0.0.0.0/0"])),
        ("every address",),
    ),
    Regression(
        "predictors-default-deny-egress-removed",
        EGRESS,
        remove(":NetworkPolicy", "llm-prod-serving-deny-egress"),
        ("namespace inference", "default-deny egress"),
    ),
    Regression(
        "predictors-egress-on-every-port",
        EGRESS,
        edit(":NetworkPolicy", "llm-prod-serving-dns", lambda i: i["spec"]["egress"][0].pop("ports")),
        ("NetworkPolicy inference/allow-dns", "every port"),
    ),
    Regression(
        "model-sync-default-deny-egress-removed",
        EGRESS,
        remove(":NetworkPolicy", "llm-prod-model-sync-default-deny-egress"),
        ("namespace model-sync",),
    ),
    Regression(
        "model-sync-https-egress-into-the-vpc",
        EGRESS,
        edit(
            ":NetworkPolicy",
            "llm-prod-model-sync-model-sync-egress",
            lambda i: i["spec"]["egress"][1]["to"][0]["ipBlock"].pop("except"),
        ),
        ("NetworkPolicy model-sync/model-sync-egress", "without excepting the VPC ['10.30.0.0/16']"),
    ),
    Regression(
        "gateway-namespace-default-deny-egress-removed",
        EGRESS,
        remove(":NetworkPolicy", "llm-prod-gateway-deny-egress"),
        ("namespace ai-gateway",),
    ),
    Regression(
        "monitoring-default-deny-removed",
        OPERATORS_ISOLATED,
        remove(":NetworkPolicy", "llm-prod-isolation-monitoring-default-deny-ingress"),
        ("namespace monitoring", "default-deny ingress"),
    ),
    Regression(
        "keda-default-deny-removed",
        OPERATORS_ISOLATED,
        remove(":NetworkPolicy", "llm-prod-isolation-keda-default-deny-ingress"),
        ("namespace keda",),
    ),
    Regression(
        "alertmanager-open-to-every-namespace",
        OPERATORS_ISOLATED,
        edit(
            ":NetworkPolicy",
            "llm-prod-isolation-monitoring-same-namespace",
            lambda i: i["spec"]["ingress"][0]["from"][0].update(namespaceSelector={}),
        ),
        ("NetworkPolicy monitoring/same-namespace", "every pod of every namespace"),
    ),
    Regression(
        "exporters-default-deny-removed",
        OPERATORS_ISOLATED,
        remove(":NetworkPolicy", "llm-prod-isolation-monitoring-exporters-default-deny-ingress"),
        ("namespace monitoring-exporters", "default-deny ingress"),
    ),
    Regression(
        "exporters-open-to-every-namespace",
        OPERATORS_ISOLATED,
        edit(
            ":NetworkPolicy",
            "llm-prod-isolation-monitoring-exporters-prometheus",
            lambda i: i["spec"]["ingress"][0]["from"][0].update(namespaceSelector={}),
        ),
        ("NetworkPolicy monitoring-exporters/prometheus", "every pod of every namespace"),
    ),
    Regression(
        "webhook-policy-on-every-port",
        OPERATORS_ISOLATED,
        edit(":NetworkPolicy", "llm-prod-isolation-kserve-api-server", lambda i: i["spec"]["ingress"][0].pop("ports")),
        ("NetworkPolicy kserve/api-server",),
    ),
    Regression(
        "predictors-namespace-enforce-removed",
        PSA,
        edit(":Namespace", "inference", lambda i: labels(i).pop(PSA_ENFORCE)),
        ("namespace inference", "enforces no Pod Security level"),
    ),
    Regression(
        "model-sync-namespace-enforces-baseline",
        PSA,
        edit(":Namespace", "model-sync", lambda i: labels(i).update({PSA_ENFORCE: "baseline"})),
        ("namespace model-sync: enforces baseline, below restricted",),
    ),
    Regression(
        "keda-namespace-privileged",
        PSA,
        edit(":NamespacePatch", "keda", lambda i: labels(i).update({PSA_ENFORCE: "privileged"})),
        ("namespace keda: enforces privileged, below baseline",),
    ),
    Regression(
        "monitoring-namespace-privileged",
        PSA,
        edit(":NamespacePatch", "monitoring", lambda i: labels(i).update({PSA_ENFORCE: "privileged"})),
        ("namespace monitoring: enforces privileged, below baseline",),
    ),
    Regression(
        "kserve-namespace-labels-removed",
        PSA,
        remove(":NamespacePatch", "llm-prod-isolation-kserve"),
        ("namespace kserve",),
    ),
    Regression(
        "gateway-namespace-audit-off",
        PSA,
        edit(":NamespacePatch", "ai-gateway", lambda i: labels(i).pop("pod-security.kubernetes.io/audit")),
        ("namespace ai-gateway", "audit"),
    ),
    Regression(
        "grafana-cluster-wide-rbac",
        OPERATOR_VALUES,
        edit(":Release", "llm-prod-obs-stack", lambda i: GRAFANA(i)["rbac"].update(namespaced=False)),
        ("grafana.rbac.namespaced", "every namespace"),
    ),
    Regression(
        "grafana-sidecar-searches-all-namespaces",
        OPERATOR_VALUES,
        edit(
            ":Release",
            "llm-prod-obs-stack",
            lambda i: GRAFANA(i)["sidecar"]["dashboards"].update(searchNamespace="ALL"),
        ),
        ("grafana.sidecar.dashboards.searchNamespace is ALL",),
    ),
    Regression(
        "prometheus-rules-from-every-namespace",
        OPERATOR_VALUES,
        edit(":Release", "llm-prod-obs-stack", lambda i: PROMETHEUS_SPEC(i).update(ruleNamespaceSelector={})),
        ("ruleNamespaceSelector is empty",),
    ),
    Regression(
        "prometheus-monitors-from-every-namespace",
        OPERATOR_VALUES,
        edit(":Release", "llm-prod-obs-stack", lambda i: PROMETHEUS_SPEC(i).pop("podMonitorNamespaceSelector")),
        ("podMonitorNamespaceSelector is unset",),
    ),
    Regression(
        "keda-reads-every-secret",
        OPERATOR_VALUES,
        edit(":Release", "llm-prod-autoscaling-keda", lambda i: KEDA_PERMISSIONS(i).pop("operator")),
        ("permissions.operator.restrict.secret",),
    ),
    Regression(
        "dcgm-exporter-sys-admin",
        OPERATOR_VALUES,
        edit(":Release", "llm-prod-obs-dcgm", lambda i: i["values"].pop("securityContext")),
        ("dcgm-exporter", "SYS_ADMIN"),
    ),
    Regression(
        "prometheus-retention-below-trigger-look-back",
        LOOK_BACK,
        edit(
            ":Release",
            "llm-prod-obs-stack",
            lambda i: i["values"]["prometheus"]["prometheusSpec"].update(retention="1m"),
        ),
        ("beyond the stack's Prometheus retention (1m)",),
    ),
]
COVERED.update(r.policy for r in REGRESSIONS)


@pytest.fixture(scope="module")
def prod_linked() -> tuple[StackRun, Dependencies]:
    return record_dependencies("prod")


@pytest.fixture(scope="module")
def dev_linked() -> tuple[StackRun, Dependencies]:
    return record_dependencies("dev")


@pytest.mark.parametrize("regression", REGRESSIONS, ids=[r.control for r in REGRESSIONS])
def test_the_pack_catches_the_regression(regression: Regression, prod_linked: tuple[StackRun, Dependencies]) -> None:
    run, deps = prod_linked
    mutated = regression.mutate(copy.copy(run.resources))
    found = run_policy(policy(regression.policy), mutated, load_config("prod"), None, deps)
    assert_reported(found, regression.policy, *regression.fragments)
    assert {v.level for v in found} == {EnforcementLevel.MANDATORY}


@pytest.mark.parametrize("stack_name", ["dev", "prod"])
def test_linked_stacks_raise_no_false_alarm(
    stack_name: str, dev_linked: tuple[StackRun, Dependencies], prod_linked: tuple[StackRun, Dependencies]
) -> None:
    """Every policy, dev and prod as the engine links them: nothing reported except by the
    policies the stack's config disables on purpose (dev's single replicas, force-destroy bucket,
    deletable cluster, no flow logs)."""
    run, deps = {"dev": dev_linked, "prod": prod_linked}[stack_name]
    config = load_config(stack_name)
    found = [v for p in POLICIES for v in run_policy(p, run.resources, config, None, deps)]
    assert [v.message for v in found if v.level != EnforcementLevel.DISABLED] == []


def test_the_unlinked_graph_does_not_link_the_mount_role_by_luck(prod_linked: tuple[StackRun, Dependencies]) -> None:
    """The control for mount-role-gains-put-object: without the engine's property dependencies the
    mountpoint-read policy (not a child of the role) cannot be tied to the Mountpoint role."""
    run, _ = prod_linked
    regression = next(r for r in REGRESSIONS if r.control == "mount-role-gains-put-object")
    assert run_policy(policy(MOUNT), regression.mutate(list(run.resources)), None) == []


def test_a_policy_document_unknown_in_a_first_preview_is_left_for_the_update(
    prod_linked: tuple[StackRun, Dependencies],
) -> None:
    run, deps = prod_linked
    mutated = edit(":RolePolicy", "llm-prod-models-model-sync", lambda i: i.update(policy=UNKNOWN))(list(run.resources))
    assert run_policy(policy(LEAST), mutated, None, None, deps) == []


# What a first preview cannot know: ids and ARNs of resources created in the same update, and
# the policy documents built from them (those naming the mocked account's ARNs).
FIRST_PREVIEW_UNKNOWNS = {
    "bucket",
    "role",
    "roleArn",
    "vpcId",
    "iamRoleArn",
    "logDestination",
    "kmsMasterKeyId",
    "encryptionConfigKeyArn",
    "securityGroupId",
    "podIdentityAssociations",
}


def first_preview_unknowns(run: StackRun) -> dict[str, set[str]]:
    unknown = {r.urn: FIRST_PREVIEW_UNKNOWNS & set(r.inputs) for r in run.resources if r.type.startswith("aws:")}
    for r in run.resources:
        if r.type.startswith("aws:") and "123456789012" in str(r.inputs.get("policy", "")):
            unknown[r.urn].add("policy")
    return unknown


@pytest.mark.parametrize("stack_name", ["dev", "prod"])
def test_a_first_preview_runs_every_stack_rule_without_false_alarms(
    stack_name: str, dev_linked: tuple[StackRun, Dependencies], prod_linked: tuple[StackRun, Dependencies]
) -> None:
    """Unknown ids and ARNs: the rules link through the engine's property dependencies and leave
    unknown documents for the update; none raises (CrossGuard would skip it with a warning)."""
    run, deps = {"dev": dev_linked, "prod": prod_linked}[stack_name]
    unknown = first_preview_unknowns(run)
    assert sum("policy" in keys for keys in unknown.values()) >= 3  # the store's policies and the flow logs'
    config = load_config(stack_name)
    stack_rules = [p for p in POLICIES if isinstance(p, StackValidationPolicy)]
    found = [v for p in stack_rules for v in run_policy(p, run.resources, config, unknown, deps)]
    assert [v.message for v in found if v.level != EnforcementLevel.DISABLED] == []


def test_a_first_preview_still_catches_the_writer_on_the_predictor_account(
    prod_linked: tuple[StackRun, Dependencies],
) -> None:
    run, deps = prod_linked
    regression = next(r for r in REGRESSIONS if r.control == "writer-associated-with-predictor-service-account")
    unknown = first_preview_unknowns(run)
    found = run_policy(policy(NO_IDENTITY), regression.mutate(list(run.resources)), None, unknown, deps)
    assert_reported(found, NO_IDENTITY, *regression.fragments)


def test_a_mount_role_bound_outside_the_add_on_is_read_only_too(prod_linked: tuple[StackRun, Dependencies]) -> None:
    """The driver's role given by a standalone association of its service account, not the add-on's."""
    run, deps = prod_linked
    addon = _find(run.resources, ":Addon", "llm-prod-cluster-mountpoint-s3-csi")
    role = _find(run.resources, ":Role", "llm-prod-cluster-mountpoint-s3")
    association = Captured(
        "aws:eks/podIdentityAssociation:PodIdentityAssociation",
        "mountpoint",
        {"clusterName": "llm-prod", "namespace": "kube-system", "serviceAccount": "s3-csi-driver-sa", "roleArn": "x"},
        "urn:pulumi:prod::inference-platform::aws:eks/podIdentityAssociation:PodIdentityAssociation::mountpoint",
        "",
        True,
    )
    linked = {**deps, association.urn: {"roleArn": [role.urn]}}
    regression = next(r for r in REGRESSIONS if r.control == "mount-role-gains-put-object")
    mutated = [r for r in regression.mutate(list(run.resources)) if r is not addon] + [association]
    assert_reported(run_policy(policy(MOUNT), mutated, None, None, linked), MOUNT, "s3:PutObject")


def test_writes_on_every_resource_but_some_are_whole_bucket_writes() -> None:
    def writer(inputs: dict[str, Any]) -> None:
        inputs["policy"] = {
            "Statement": [
                {"Sid": "All", "Effect": "Allow", "Action": "s3:PutObject", "NotResource": "arn:aws:s3:::b/x"}
            ]
        }

    found = run_policy(policy(LEAST), [with_inputs(_role_policy_stub(), writer)], None)
    assert_reported(found, LEAST, "NotResource")


def _role_policy_stub() -> Captured:
    return Captured(
        "aws:iam/rolePolicy:RolePolicy",
        "stub",
        {"role": "r", "policy": "{}"},
        "urn:pulumi:prod::inference-platform::aws:iam/rolePolicy:RolePolicy::stub",
        "",
        True,
    )


def test_json_and_mapping_documents_read_alike() -> None:
    document = {
        "Version": "2012-10-17",
        "Statement": {"Sid": "One", "Effect": "Allow", "Action": "S3:Get*", "Resource": "arn:aws:s3:::b/p/*"},
    }
    parsed = documents.parse(document)
    assert parsed == documents.parse(json.dumps(document))
    assert parsed is not None and documents.granted(parsed, ["s3:GetObject", "s3:PutObject"]) == ["s3:GetObject"]
    assert documents.parse("not json") is None


def test_not_action_counts_as_granting_everything_else() -> None:
    (statement,) = documents.parse({"Statement": [{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}]}) or []
    assert documents.allows(statement, "s3:DeleteObjectVersion") and not documents.allows(statement, "iam:PassRole")


def _catalogued() -> dict[str, str]:
    """case id -> policy (or `not caught`) of every row of policies/REGRESSIONS.md."""
    rows = re.findall(
        r"^\| `([a-z0-9-]+)` \|[^|]*\|[^|]*\| (`[a-z0-9-]+`|not caught[^|]*) \|", CATALOGUE.read_text(), re.M
    )
    return {case: rule.strip("`") for case, rule in rows}


def test_the_catalogue_lists_every_case_with_its_rule() -> None:
    catalogued = _catalogued()
    assert {r.control: r.policy for r in REGRESSIONS} == {
        case: rule for case, rule in catalogued.items() if not rule.startswith("not caught")
    }
