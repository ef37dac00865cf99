"""S3 buckets (the model store and any other): private, encrypted, versioned, TLS only.

With pulumi-aws 7 these properties live on separate resources that point at the bucket
(`bucket: bucket.id`), so the check is a stack policy that joins them back to their bucket.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import PolicyConfigSchema

from . import documents, k8s
from .base import Subject, resource_policy, stack_policy
from .identity import writer_roles
from .links import refers_to

BUCKET_TYPES = {"aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2"}
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
ENCRYPTION = {
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
}
VERSIONING = {"aws:s3/bucketVersioning:BucketVersioning", "aws:s3/bucketVersioningV2:BucketVersioningV2"}
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
OWNERSHIP = {"aws:s3/bucketOwnershipControls:BucketOwnershipControls"}
PUBLIC_ACCESS_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
# SSE-KMS with the platform's own key: AES256 (SSE-S3) encrypts with a key anyone holding s3:GetObject
# may use, and aws:kms without kmsMasterKeyId falls back to the AWS managed key aws/s3, whose key
# policy nobody in the account can narrow (S3 User Guide, "Using server-side encryption with AWS KMS
# keys (SSE-KMS)").
KMS_ALGORITHMS = {"aws:kms", "aws:kms:dsse"}
_UNKNOWN = object()


def _belongs_to(resource: Any, bucket: Any) -> bool:
    """A bucket setting belongs to a bucket when the engine records that its `bucket` input
    came from that bucket (property dependencies, known even in preview); failing that, when
    its `bucket` value equals the bucket's name or it is the bucket's child."""
    deps = getattr(resource, "property_dependencies", {}) or {}
    if any(dep.urn == bucket.urn for dep in deps.get("bucket", [])):
        return True
    # Before the first update the bucket's name is unknown: then only the links above can tell.
    value = k8s.get(resource.props, "bucket", unknown=None)
    names = (k8s.get(bucket.props, "bucket", unknown=None), k8s.get(bucket.props, "id", unknown=None))
    if isinstance(value, str) and value in names:
        return True
    parent = getattr(resource, "parent", None)
    return parent is not None and getattr(parent, "urn", None) == bucket.urn


def _denies_insecure_transport(policy_text: Any) -> bool:
    try:
        document = json.loads(policy_text) if isinstance(policy_text, str) else policy_text
    except ValueError:
        return False
    statements = k8s.get(document, "Statement", default=[])
    statements = [statements] if k8s.is_map(statements) else list(statements or [])
    for statement in statements:
        if k8s.get(statement, "Effect") != "Deny":
            continue
        actions = k8s.get(statement, "Action")
        actions = [actions] if isinstance(actions, str) else list(actions or [])
        secure = k8s.get(statement, "Condition", "Bool", "aws:SecureTransport")
        secure = secure[0] if k8s.is_list(secure) and len(secure) == 1 else secure
        if any(a in ("s3:*", "*") for a in actions) and str(secure).lower() == "false":
            return True
    return False


def _public_grants(policy_text: Any) -> list[documents.Statement]:
    """Allow statements with a wildcard principal: everyone, including anonymous callers (IAM User
    Guide, "AWS JSON policy elements: Principal")."""
    return [s for s in documents.parse(policy_text) or [] if s.effect == "Allow" and "*" in s.principals]


# An upload that names its own encryption is stored that way, whatever the bucket's default says
# (S3 User Guide, "Requiring server-side encryption": deny s3:PutObject when
# s3:x-amz-server-side-encryption is not aws:kms, and when s3:x-amz-server-side-encryption-aws-kms-key-id
# is not the bucket's key).
ENCRYPTION_DENIES = (
    ("s3:x-amz-server-side-encryption", "aws:kms", "another encryption than SSE-KMS (SSE-S3)"),
    ("s3:x-amz-server-side-encryption-aws-kms-key-id", None, "another KMS key"),
)


def covers(statement: documents.Statement, action: str) -> bool:
    """Whether a statement (Allow or Deny) names `action`, through Action or NotAction."""
    if statement.not_actions:
        return not any(documents.action_matches(p, action) for p in statement.not_actions)
    return any(documents.action_matches(p, action) for p in statement.actions)


def _condition(statement: documents.Statement, operator_prefix: str, key: str) -> list[str] | None:
    """The values of `key` under any condition operator starting with `operator_prefix` (case-insensitive keys)."""
    for operator, block in statement.conditions.items():
        if not str(operator).startswith(operator_prefix) or not k8s.is_map(block):
            continue
        for name in block:
            if str(name).lower() == key.lower():
                value = block[name]
                return [str(v) for v in value] if k8s.is_list(value) else [str(value)]
    return None


def _denies_upload_unless(statement: documents.Statement, key: str, value: str | None) -> bool:
    if statement.effect != "Deny" or not covers(statement, "s3:PutObject"):
        return False
    values = _condition(statement, "StringNotEquals", key)
    return values is not None and (value is None or values == [value])


def _check_buckets(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    for bucket in (r for r in resources if r.resource_type in BUCKET_TYPES):
        label = f"S3 bucket '{bucket.name}'"
        settings = [r for r in resources if r is not bucket and _belongs_to(r, bucket)]

        blocks = [r for r in settings if r.resource_type == PUBLIC_ACCESS_BLOCK]
        if not blocks:
            yield f"{label}: has no BucketPublicAccessBlock", bucket.urn
        for block in blocks:
            off = [flag for flag in PUBLIC_ACCESS_FLAGS if k8s.get(block.props, flag) is not True]
            if off:
                yield f"{label}: public access block '{block.name}' leaves {off} off", bucket.urn

        rules = [rule for r in settings if r.resource_type in ENCRYPTION for rule in k8s.items(r.props, "rules")]
        if not rules:
            yield f"{label}: has no default server-side encryption configuration", bucket.urn
        for rule in rules:
            default = k8s.get(rule, "applyServerSideEncryptionByDefault")
            algorithm = k8s.get(default, "sseAlgorithm")
            if algorithm not in KMS_ALGORITHMS:
                yield f"{label}: encrypts with {algorithm} instead of SSE-KMS with the platform's key", bucket.urn
            elif not k8s.is_set(default, "kmsMasterKeyId"):
                yield f"{label}: SSE-KMS without kmsMasterKeyId uses the AWS managed key aws/s3", bucket.urn

        # ACLs disabled: only the bucket policy and IAM decide access (S3 User Guide, "Controlling
        # ownership of objects and disabling ACLs for your bucket").
        ownership = {
            k8s.get(rule, "objectOwnership", unknown=None)
            for r in settings
            if r.resource_type in OWNERSHIP
            for rule in [k8s.get(r.props, "rule", unknown=None)]
        }
        if "BucketOwnerEnforced" not in ownership:
            yield f"{label}: ACLs are not disabled (no BucketOwnershipControls with BucketOwnerEnforced)", bucket.urn

        statuses = {
            k8s.get(r.props, "versioningConfiguration", "status") for r in settings if r.resource_type in VERSIONING
        }
        if "Enabled" not in statuses:
            yield f"{label}: versioning is not Enabled", bucket.urn

        policies = [r for r in settings if r.resource_type == BUCKET_POLICY]
        texts = [k8s.get(p.props, "policy", unknown=_UNKNOWN) for p in policies]
        # A policy built from the bucket's ARN is unknown before the first update; the stack
        # policy runs again on the real outputs after `pulumi up`, where it is known.
        if _UNKNOWN in texts:
            continue
        if not any(_denies_insecure_transport(t) for t in texts):
            yield f"{label}: no bucket policy denies requests without TLS (aws:SecureTransport = false)", bucket.urn
        statements = [st for t in texts for st in documents.parse(t) or []]
        for key, value, what in ENCRYPTION_DENIES:
            if not any(_denies_upload_unless(st, key, value) for st in statements):
                yield (
                    f"{label}: no bucket policy statement denies an upload that names {what} ({key}); the "
                    "default encryption applies only to uploads that name none",
                    bucket.urn,
                )
        for policy, text in zip(policies, texts, strict=True):
            for statement in _public_grants(text):
                yield (
                    f"{label}: bucket policy '{policy.name}' {documents.label(statement)} allows "
                    f"{list(statement.actions)} "
                    'to Principal "*" (anyone, signed or anonymous)',
                    bucket.urn,
                )


s3_buckets = stack_policy(
    name="s3-buckets-private-encrypted-versioned-tls-only",
    description=(
        "Every S3 bucket blocks all public access, disables ACLs, encrypts by default with SSE-KMS under the "
        'platform\'s own key, keeps versions, denies non-TLS requests and grants nothing to Principal "*".'
    ),
    remediation=(
        "Give each aws.s3.Bucket a BucketPublicAccessBlock with all four flags true, a "
        "BucketOwnershipControls (BucketOwnerEnforced), a BucketServerSideEncryptionConfiguration (aws:kms with "
        "kmsMasterKeyId), a BucketVersioning with status Enabled and a BucketPolicy that denies s3:* when "
        "aws:SecureTransport is false and allows nothing to a wildcard principal (see components/model_store.py)."
    ),
    check=_check_buckets,
)


def _check_force_destroy(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if subject.resource_type in BUCKET_TYPES and k8s.get(subject.props, "forceDestroy", unknown=False) is True:
        yield f"{subject.label}: forceDestroy deletes every object (the model store) with the stack"


no_force_destroy = resource_policy(
    name="buckets-keep-their-objects-on-destroy",
    description="S3 buckets do not set forceDestroy: a `pulumi destroy` must not delete the objects with them.",
    remediation=(
        "Leave modelStore.forceDestroy false (the settings refuse true in prod). A throwaway dev stack may "
        "disable this policy in policies/config/dev.json."
    ),
    check=_check_force_destroy,
)

# --- KMS keys ----------------------------------------------------------------------------------

KMS_KEY = "aws:kms/key:Key"
DEFAULT_MIN_DELETION_WINDOW_DAYS = 30
# KMS waits 7-30 days (30 when unset) before it deletes a scheduled key; every object encrypted
# under it is unreadable after that (KMS Developer Guide, "Deleting AWS KMS keys").
KMS_DEFAULT_DELETION_WINDOW_DAYS = 30


def _check_kms_key(subject: Subject, config: Mapping[str, Any]) -> Iterator[str]:
    if subject.resource_type != KMS_KEY:
        return
    # Automatic rotation is off by default for customer managed keys and applies to symmetric keys
    # (KMS Developer Guide, "Rotate AWS KMS keys").
    spec = k8s.get(subject.props, "customerMasterKeySpec", unknown=None) or k8s.get(
        subject.props, "keySpec", unknown=None
    )
    if spec in (None, "SYMMETRIC_DEFAULT") and k8s.get(subject.props, "enableKeyRotation", unknown=True) is not True:
        yield f"KMS key '{subject.name}': enableKeyRotation is not true (KMS never rotates it)"
    minimum = int(config.get("minDeletionWindowDays", DEFAULT_MIN_DELETION_WINDOW_DAYS))
    window = k8s.get(subject.props, "deletionWindowInDays", unknown=None)
    days = KMS_DEFAULT_DELETION_WINDOW_DAYS if window is None else window
    if isinstance(days, (int, float)) and days < minimum:
        yield f"KMS key '{subject.name}': deletionWindowInDays {days:g} leaves less than {minimum} days to cancel a deletion"


kms_keys = resource_policy(
    name="kms-keys-rotate-and-delete-slowly",
    description=(
        "Customer managed KMS keys (the model store's, the EKS secrets') rotate automatically and keep the longest "
        "deletion window: rotation is off unless enabled, and a deleted key makes everything it encrypted unreadable."
    ),
    remediation="Create keys with enable_key_rotation=True and deletion_window_in_days=30 (components/model_store.py, "
    "components/cluster.py).",
    check=_check_kms_key,
    config=PolicyConfigSchema(
        properties={
            "minDeletionWindowDays": {
                "type": "integer",
                "minimum": 7,
                "maximum": 30,
                "default": DEFAULT_MIN_DELETION_WINDOW_DAYS,
            }
        }
    ),
)

# --- EBS volumes ---------------------------------------------------------------------------------

STORAGE_CLASS = ("storage.k8s.io", "StorageClass")
# The EBS CSI driver (and EKS Auto Mode's) creates unencrypted volumes unless the class says
# `encrypted: "true"` (aws-ebs-csi-driver docs/parameters.md; EKS user guide, "Create a storage class").
EBS_PROVISIONERS = {"ebs.csi.aws.com", "ebs.csi.eks.amazonaws.com"}


def _check_storage_class(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if subject.gk != STORAGE_CLASS or k8s.get(subject.props, "provisioner", unknown=None) not in EBS_PROVISIONERS:
        return
    if str(k8s.get(subject.props, "parameters", "encrypted", unknown="true")).lower() != "true":
        yield f'{subject.label}: EBS volumes of this class are not encrypted (parameters.encrypted is not "true")'


ebs_encrypted = resource_policy(
    name="ebs-storage-classes-encrypt",
    description=(
        "StorageClasses of the EBS CSI driver set encrypted: \"true\": Prometheus' and Alertmanager's volumes hold "
        "every client id, model and request rate the platform records, and EBS leaves volumes unencrypted by default."
    ),
    remediation='Keep parameters.encrypted "true" on the monitoring StorageClass (components/observability/).',
    check=_check_storage_class,
)

# --- the model writer only creates ------------------------------------------------------------------

# S3 conditional writes (S3 User Guide, "Enforce conditional writes on Amazon S3 buckets"): a PutObject
# or CompleteMultipartUpload with If-None-Match fails when the key exists; s3:if-none-match is the
# header, s3:ObjectCreationOperation names the operations that take none (the upload's parts).
IF_NONE_MATCH = "s3:if-none-match"
CREATION_OPERATION = "s3:ObjectCreationOperation"
HEADERLESS_OPERATIONS = {"CreateMultipartUpload", "UploadPart"}
WRITER_DELETES = ("s3:DeleteObject", "s3:DeleteObjectVersion")


def _create_only(statement: documents.Statement) -> bool:
    if (_condition(statement, "Null", IF_NONE_MATCH) or [""])[0].lower() == "false":
        return True
    operations = _condition(statement, "StringEquals", CREATION_OPERATION)
    return bool(operations) and set(operations or []) <= HEADERLESS_OPERATIONS


def _denies_replacing(statement: documents.Statement) -> bool:
    return (
        statement.effect == "Deny"
        and "*" not in statement.principals
        and covers(statement, "s3:PutObject")
        and (_condition(statement, "Null", IF_NONE_MATCH) or [""])[0].lower() == "true"
    )


def _check_create_only(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    writers = writer_roles(resources)
    for role, policies in writers:
        for subject, document in policies:
            for statement in documents.parse(document) or []:
                if documents.allows(statement, "s3:PutObject") and not _create_only(statement):
                    yield (
                        f"{subject.label}: {documents.label(statement)} lets '{role.name}' put objects without "
                        f"If-None-Match ({IF_NONE_MATCH}); it could replace a published revision's files and manifest",
                        subject.urn,
                    )
    if not writers:
        return
    for bucket in (r for r in resources if r.resource_type in BUCKET_TYPES):
        policies = [r for r in resources if r.resource_type == BUCKET_POLICY and _belongs_to(r, bucket)]
        texts = [k8s.get(p.props, "policy", unknown=_UNKNOWN) for p in policies]
        if _UNKNOWN in texts:
            continue
        statements = [st for t in texts for st in documents.parse(t) or []]
        label = f"S3 bucket '{bucket.name}'"
        if not any(_denies_replacing(st) for st in statements):
            yield (
                f"{label}: no bucket policy statement denies the writer a PutObject without If-None-Match; an "
                "identity policy widened later would let it replace published weights",
                bucket.urn,
            )
        denied = {
            a
            for st in statements
            if st.effect == "Deny" and "*" not in st.principals
            for a in WRITER_DELETES
            if covers(st, a)
        }
        missing = [a for a in WRITER_DELETES if a not in denied]
        if missing:
            yield f"{label}: no bucket policy statement denies the writer {missing}", bucket.urn


create_only_writes = stack_policy(
    name="model-store-writes-create-only",
    description=(
        "The model writer may only create objects: every statement that lets it s3:PutObject requires "
        "If-None-Match (or names the upload operations that take none), and the bucket policy denies it a "
        "PutObject without If-None-Match and every delete, whatever its identity policy says later. A published "
        "revision and the manifest the serving gate trusts are never replaced."
    ),
    remediation=(
        "Keep _write_policy (CreateModelObjectsOnly, UploadPartsOfNewObjects) and bucket_policy (DenyWriterReplacing, "
        "DenyWriterDeleting) of components/model_store.py."
    ),
    check=_check_create_only,
)

# --- the bucket's key names who may use it ----------------------------------------------------------

# Without a policy, KMS gives a key its default policy: the account root gets kms:*, so every identity
# policy in the account that grants kms:Decrypt on "*" decrypts what the key protects (KMS Developer
# Guide, "Default key policy").
CRYPTOGRAPHIC_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey", "kms:Encrypt", "kms:ReEncryptFrom")
SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"


def _account_wide(principal: str) -> bool:
    return principal == "*" or principal.endswith(":root") or (principal.isdigit() and len(principal) == 12)


def _encrypts_with(encryption: Any, key: Any) -> bool:
    """The engine records that the configuration's `rules` came from the key (its ARN); failing that,
    a rule's kmsMasterKeyId equals one of the key's identifiers."""
    if refers_to(encryption, "rules", key, parent_counts=False):
        return True
    named = {k8s.get(key.props, i, unknown=None) for i in ("arn", "id", "keyId")} - {None}
    return any(
        k8s.get(rule, "applyServerSideEncryptionByDefault", "kmsMasterKeyId", unknown=None) in named
        for rule in k8s.items(encryption.props, "rules")
    )


def _own_policy_problems(key: Any, label: str, protects: str) -> Iterator[tuple[str, str | None]]:
    """A key on KMS's default policy, or one whose policy lets the account root (hence any identity
    policy) or everyone use it."""
    if k8s.get(key.props, "policy", unknown=_UNKNOWN) is None:
        yield (
            f"{label}: has no key policy of its own; the default lets every principal the account's IAM "
            f"allows decrypt {protects}",
            key.urn,
        )
        return
    for statement in documents.parse(k8s.get(key.props, "policy", unknown=None)) or []:
        wide = [p for p in statement.principals if _account_wide(p)]
        granted = [a for a in CRYPTOGRAPHIC_ACTIONS if documents.allows(statement, a)]
        if wide and granted:
            yield (
                f"{label}: {documents.label(statement)} gives {granted} to {wide}; any identity policy in the "
                f"account could then decrypt {protects}",
                key.urn,
            )


def _check_bucket_keys(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    keys = [r for r in resources if r.resource_type == KMS_KEY]
    encryption = [r for r in resources if r.resource_type == SSE]
    for key in keys:
        if any(_encrypts_with(e, key) for e in encryption):
            yield from _own_policy_problems(key, f"KMS key '{key.name}' (encrypts an S3 bucket)", "the bucket")


bucket_keys_name_users = stack_policy(
    name="bucket-keys-name-their-users",
    description=(
        "A KMS key that encrypts an S3 bucket carries its own key policy, and that policy gives cryptographic use "
        "to named roles only, never to the account root (which would let any identity policy decrypt): the "
        "account's IAM administers the key, the writer and the Mountpoint role use it through S3."
    ),
    remediation="Keep weights_key_policy on the model store's key (components/model_store.py).",
    check=_check_bucket_keys,
)

# --- the EKS secrets key names who may use it -----------------------------------------------------

# Where each EKS cluster shape names its secrets key: the pulumi_eks component's input, or the
# raw cluster's encryptionConfig (a real preview sees both; the component's is the one the engine
# records a dependency for).
EKS_KEY_INPUTS = {"eks:index:Cluster": "encryptionConfigKeyArn", "aws:eks/cluster:Cluster": "encryptionConfig"}
# What the cluster needs to read and write Secrets under the key (components/cluster.py).
EKS_KEY_USE = ("kms:Encrypt", "kms:Decrypt")


def _encrypts_secrets_with(cluster: Any, key: Any) -> bool:
    field = EKS_KEY_INPUTS[cluster.resource_type]
    if refers_to(cluster, field, key, parent_counts=False):
        return True
    named = {k8s.get(key.props, i, unknown=None) for i in ("arn", "id", "keyId")} - {None}
    configs = k8s.get(cluster.props, field, unknown=None)
    if isinstance(configs, str):
        return configs in named
    configs = [configs] if k8s.is_map(configs) else list(k8s.items(cluster.props, field))
    return any(k8s.get(c, "provider", "keyArn", unknown=None) in named for c in configs)


def _check_secrets_keys(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    clusters = [r for r in resources if r.resource_type in EKS_KEY_INPUTS]
    for key in (r for r in resources if r.resource_type == KMS_KEY):
        if not any(_encrypts_secrets_with(c, key) for c in clusters):
            continue
        label = f"KMS key '{key.name}' (encrypts EKS Secrets)"
        yield from _own_policy_problems(key, label, "every Kubernetes Secret")
        statements = documents.parse(k8s.get(key.props, "policy", unknown=None))
        if statements is None:
            continue  # no policy (reported above) or one the engine does not know yet
        users = {
            p
            for s in statements
            if s.effect == "Allow" and all(documents.allows(s, a) for a in EKS_KEY_USE)
            for p in s.principals
            if not _account_wide(p)
        }
        if not users:
            yield (
                f"{label}: no named principal may {list(EKS_KEY_USE)} with it; the cluster role could not read or "
                "write Secrets (EKS secrets encryption cannot be switched off once on)",
                key.urn,
            )


secrets_keys_name_users = stack_policy(
    name="eks-secrets-key-names-its-users",
    description=(
        "The KMS key that envelope-encrypts an EKS cluster's Secrets carries its own key policy: the account's IAM "
        "administers it without kms:Decrypt/Encrypt (so no identity policy in the account decrypts Secrets), and a "
        "named principal, the cluster role, uses it."
    ),
    remediation="Keep secrets_key_policy on the cluster's secrets key (components/cluster.py).",
    check=_check_secrets_keys,
)

POLICIES = [
    s3_buckets,
    no_force_destroy,
    kms_keys,
    ebs_encrypted,
    create_only_writes,
    bucket_keys_name_users,
    secrets_keys_name_users,
]
