"""S3 buckets (the model store and any other): private, encrypted, versioned, TLS only.

With pulumi-aws 7 these properties live on separate resources that point at the bucket
(`bucket: bucket.id`), so the check is a stack policy that joins them back to their bucket.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from . import k8s
from .base import Subject, resource_policy, stack_policy

BUCKET_TYPES = {"aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2"}
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
ENCRYPTION = {
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
}
VERSIONING = {"aws:s3/bucketVersioning:BucketVersioning", "aws:s3/bucketVersioningV2:BucketVersioningV2"}
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
PUBLIC_ACCESS_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
SSE_ALGORITHMS = {"aws:kms", "aws:kms:dsse", "AES256"}
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
        algorithms = {k8s.get(rule, "applyServerSideEncryptionByDefault", "sseAlgorithm") for rule in rules}
        if not algorithms & SSE_ALGORITHMS:
            yield f"{label}: has no default server-side encryption configuration", bucket.urn

        statuses = {
            k8s.get(r.props, "versioningConfiguration", "status") for r in settings if r.resource_type in VERSIONING
        }
        if "Enabled" not in statuses:
            yield f"{label}: versioning is not Enabled", bucket.urn

        policies = [r for r in settings if r.resource_type == BUCKET_POLICY]
        documents = [k8s.get(p.props, "policy", unknown=_UNKNOWN) for p in policies]
        # A policy built from the bucket's ARN is unknown before the first update; the stack
        # policy runs again on the real outputs after `pulumi up`, where it is known.
        if _UNKNOWN in documents:
            continue
        if not any(_denies_insecure_transport(d) for d in documents):
            yield f"{label}: no bucket policy denies requests without TLS (aws:SecureTransport = false)", bucket.urn


s3_buckets = stack_policy(
    name="s3-buckets-private-encrypted-versioned-tls-only",
    description=(
        "Every S3 bucket blocks all public access, encrypts by default, keeps versions and denies non-TLS requests."
    ),
    remediation=(
        "Give each aws.s3.Bucket a BucketPublicAccessBlock with all four flags true, a "
        "BucketServerSideEncryptionConfiguration (aws:kms), a BucketVersioning with status Enabled and a "
        "BucketPolicy that denies s3:* when aws:SecureTransport is false (see components/model_store.py)."
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

POLICIES = [s3_buckets, no_force_destroy]
