"""ModelStore: the S3 bucket of pinned model weights, who may read and write it, and one
read-only PersistentVolume + claim per model (Mountpoint for S3)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from contract import names
from contract.settings.model_store import ModelStoreSettings
from contract.settings.models import ModelSettings

from . import iam
from .naming import type_token

MOUNTPOINT_DRIVER = "s3.csi.aws.com"
MODEL_SYNC_SERVICE_ACCOUNT = "model-sync"


def claim_name(model: ModelSettings) -> str:
    return f"{model.name}-weights"


@dataclass(frozen=True)
class ModelStoreArgs:
    settings: ModelStoreSettings
    models: list[ModelSettings]
    cluster_name: pulumi.Input[str]
    region: str
    # The predictors' namespace (the weights claims live there).
    namespace: pulumi.Input[str]
    # The model-sync Jobs' namespace: the only one whose service account may assume the writer role.
    sync_namespace: str
    mountpoint_role: aws.iam.Role
    provider: k8s.Provider
    tags: dict[str, str]


class ModelStore(pulumi.ComponentResource):
    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    writer_role_arn: pulumi.Output[str]
    claim_names: dict[str, str]

    def __init__(self, name: str, args: ModelStoreArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("models", "ModelStore"), name, None, opts)
        s, tags = args.settings, args.tags
        child = pulumi.ResourceOptions(parent=self)

        writer, _ = iam.pod_identity_role(
            f"{name}-model-sync",
            cluster_name=args.cluster_name,
            namespace=args.sync_namespace,
            service_account=MODEL_SYNC_SERVICE_ACCOUNT,
            tags=tags,
            parent=self,
            description="Model sync Jobs: create (never replace) pinned model revisions under their prefixes",
            association_under_role=True,
        )
        # The key's own policy names who may use it: the writer and the Mountpoint role, through S3.
        key_policy = pulumi.Output.all(
            aws.get_partition_output().partition,
            aws.get_caller_identity_output().account_id,
            writer.arn,
            args.mountpoint_role.arn,
        ).apply(lambda a: weights_key_policy(a[0], a[1], args.region, writer_arn=a[2], reader_arn=a[3]))
        key = aws.kms.Key(
            f"{name}-weights",
            description="Model store encryption",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            policy=key_policy,
            tags=tags,
            opts=child,
        )
        bucket = aws.s3.Bucket(f"{name}-weights", force_destroy=s.force_destroy, tags=tags, opts=child)
        bucket_opts = pulumi.ResourceOptions(parent=bucket)
        block = aws.s3.BucketPublicAccessBlock(
            f"{name}-weights",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=bucket_opts,
        )
        aws.s3.BucketOwnershipControls(
            f"{name}-weights",
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=bucket_opts,
        )
        aws.s3.BucketVersioning(
            f"{name}-weights",
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=bucket_opts,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-weights",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms", kms_master_key_id=key.arn
                    ),
                    # S3 Bucket Keys cut KMS calls (and cost) for large multi-file models.
                    bucket_key_enabled=True,
                )
            ],
            opts=bucket_opts,
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-weights",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-noncurrent-and-abandoned-uploads",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                        noncurrent_days=s.noncurrent_version_expiration_days
                    ),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=s.abort_incomplete_multipart_days
                    ),
                )
            ],
            opts=bucket_opts,
        )
        aws.s3.BucketPolicy(
            f"{name}-weights",
            bucket=bucket.id,
            policy=pulumi.Output.all(bucket.arn, key.arn, writer.arn).apply(lambda a: bucket_policy(a[0], a[1], a[2])),
            # S3 rejects a bucket policy while the public-access block is being applied.
            opts=pulumi.ResourceOptions(parent=bucket, depends_on=[block]),
        )

        prefixes = [m.store_prefix for m in args.models]
        # Read-only: the Mountpoint driver may list and read the model prefixes, nothing else.
        aws.iam.RolePolicy(
            f"{name}-mountpoint-read",
            role=args.mountpoint_role.id,
            policy=pulumi.Output.all(bucket.arn, key.arn).apply(lambda a: _read_policy(a[0], a[1], prefixes)),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-model-sync",
            role=writer.id,
            policy=pulumi.Output.all(bucket.arn, key.arn).apply(lambda a: _write_policy(a[0], a[1], prefixes)),
            opts=pulumi.ResourceOptions(parent=writer),
        )

        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.claim_names = {}
        for model in args.models:
            self.claim_names[model.name] = self._volume(name, model, bucket.id, args, k8s_opts)

        self.bucket_name = bucket.id
        self.bucket_arn = bucket.arn
        self.writer_role_arn = writer.arn
        self.register_outputs({"bucketName": self.bucket_name, "writerRoleArn": self.writer_role_arn})

    @staticmethod
    def _volume(
        name: str, model: ModelSettings, bucket: pulumi.Output[str], args: ModelStoreArgs, opts: pulumi.ResourceOptions
    ) -> str:
        """A static Mountpoint PV scoped to exactly this model's prefix, and its claim."""
        pv_name = f"{model.name}-weights"
        capacity = f"{max(1, round(model.size_gib * 1.2))}Gi"  # informational for S3; must be set
        pv = k8s.core.v1.PersistentVolume(
            f"{name}-{model.name}",
            metadata={"name": pv_name, "labels": {names.MODEL_LABEL: model.name}},
            spec={
                "capacity": {"storage": capacity},
                "accessModes": ["ReadOnlyMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "claimRef": {"namespace": args.namespace, "name": claim_name(model)},
                # Weights are immutable per revision: mount read-only, cache metadata.
                "mountOptions": [
                    "read-only",
                    "allow-other",
                    f"prefix {model.store_prefix}/",
                    f"region {args.region}",
                ],
                "csi": {
                    "driver": MOUNTPOINT_DRIVER,
                    "volumeHandle": f"model-store-{model.name}",
                    "readOnly": True,
                    "volumeAttributes": {"bucketName": bucket},
                },
            },
            opts=opts,
        )
        k8s.core.v1.PersistentVolumeClaim(
            f"{name}-{model.name}",
            metadata={
                "name": claim_name(model),
                "namespace": args.namespace,
                "labels": {names.MODEL_LABEL: model.name},
            },
            spec={
                "accessModes": ["ReadOnlyMany"],
                "storageClassName": "",
                "volumeName": pv_name,
                "resources": {"requests": {"storage": capacity}},
            },
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[pv])),
        )
        return claim_name(model)


# S3 condition keys of conditional writes (S3 user guide, "Enforce conditional writes on Amazon S3
# buckets"): the If-None-Match header, and which operation creates the object.
IF_NONE_MATCH = "s3:if-none-match"
CREATION_OPERATION = "s3:ObjectCreationOperation"
HEADERLESS_OPERATIONS = ("CreateMultipartUpload", "UploadPart")


def bucket_policy(bucket_arn: str, key_arn: str, writer_arn: str) -> str:
    """TLS only; objects encrypted with the bucket's own KMS key only; the writer role can neither
    replace nor delete an object, whatever identity policy it is given later."""
    objects = f"{bucket_arn}/*"
    return iam.document(
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [bucket_arn, objects],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        },
        {
            # An upload naming SSE-S3 (or no KMS) is refused; one naming nothing gets the bucket's
            # default (SSE-KMS with this key), hence IfExists (IAM user guide, "...IfExists condition operators").
            "Sid": "DenyOtherEncryption",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:PutObject",
            "Resource": objects,
            "Condition": {"StringNotEqualsIfExists": {"s3:x-amz-server-side-encryption": "aws:kms"}},
        },
        {
            "Sid": "DenyOtherKmsKey",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:PutObject",
            "Resource": objects,
            "Condition": {"StringNotEqualsIfExists": {"s3:x-amz-server-side-encryption-aws-kms-key-id": key_arn}},
        },
        {
            "Sid": "DenyWriterReplacing",
            "Effect": "Deny",
            "Principal": {"AWS": writer_arn},
            "Action": "s3:PutObject",
            "Resource": objects,
            "Condition": {
                "Null": {IF_NONE_MATCH: "true"},
                "StringNotEquals": {CREATION_OPERATION: list(HEADERLESS_OPERATIONS)},
            },
        },
        {
            "Sid": "DenyWriterDeleting",
            "Effect": "Deny",
            "Principal": {"AWS": writer_arn},
            "Action": ["s3:DeleteObject", "s3:DeleteObjectVersion", "s3:PutObjectRetention", "s3:PutObjectLegalHold"],
            "Resource": objects,
        },
    )


# The KMS Developer Guide's default key policy ("Default key policy": "Allows access to the AWS account
# and enables IAM policies") gives the account root kms:*, so any identity policy in the account that
# grants kms:Decrypt on "*" decrypts the weights. This policy keeps the account's IAM in charge of the
# key's administration (iam.administer_key_through_account_iam) and gives its cryptographic use to the
# two roles that need it, and only in requests S3 makes for them (kms:ViaService, "AWS KMS condition keys").
def weights_key_policy(partition: str, account_id: str, region: str, *, writer_arn: str, reader_arn: str) -> str:
    via_s3 = {"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com", "kms:CallerAccount": account_id}}
    return iam.document(
        iam.administer_key_through_account_iam(partition, account_id),
        {
            # Uploads (single and multipart) need GenerateDataKey and Decrypt (S3 User Guide,
            # "Using server-side encryption with AWS KMS keys": permissions for multipart uploads).
            "Sid": "WriterEncryptsThroughS3",
            "Effect": "Allow",
            "Principal": {"AWS": writer_arn},
            "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
            "Resource": "*",
            "Condition": via_s3,
        },
        {
            "Sid": "MountDecryptsThroughS3",
            "Effect": "Allow",
            "Principal": {"AWS": reader_arn},
            "Action": "kms:Decrypt",
            "Resource": "*",
            "Condition": via_s3,
        },
    )


def _read_policy(bucket_arn: str, key_arn: str, prefixes: list[str]) -> str:
    return iam.document(
        {
            "Sid": "ListModelPrefixes",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": bucket_arn,
            "Condition": {"StringLike": {"s3:prefix": [f"{p}/*" for p in prefixes] + [f"{p}/" for p in prefixes]}},
        },
        {
            "Sid": "ReadModelObjects",
            "Effect": "Allow",
            "Action": "s3:GetObject",
            "Resource": [f"{bucket_arn}/{p}/*" for p in prefixes],
        },
        {"Sid": "DecryptWeights", "Effect": "Allow", "Action": "kms:Decrypt", "Resource": key_arn},
    )


def _write_policy(bucket_arn: str, key_arn: str, prefixes: list[str]) -> str:
    objects = [f"{bucket_arn}/{p}/*" for p in prefixes]
    return iam.document(
        {
            "Sid": "ListModelPrefixes",
            "Effect": "Allow",
            "Action": ["s3:ListBucket", "s3:ListBucketMultipartUploads"],
            "Resource": bucket_arn,
            "Condition": {"StringLike": {"s3:prefix": [f"{p}/*" for p in prefixes] + [f"{p}/" for p in prefixes]}},
        },
        {
            "Sid": "ReadModelObjects",
            "Effect": "Allow",
            "Action": [
                "s3:GetObject",
                "s3:GetObjectAttributes",
                "s3:AbortMultipartUpload",
                "s3:ListMultipartUploadParts",
            ],
            "Resource": objects,
        },
        {
            # PutObject and CompleteMultipartUpload only with If-None-Match: a key that exists (a
            # published object, the manifest) is never replaced; no DeleteObject either.
            "Sid": "CreateModelObjectsOnly",
            "Effect": "Allow",
            "Action": "s3:PutObject",
            "Resource": objects,
            "Condition": {"Null": {IF_NONE_MATCH: "false"}},
        },
        {
            # These take no conditional header (S3 user guide, "Enforce conditional writes on Amazon
            # S3 buckets"); an upload still creates nothing until its CompleteMultipartUpload.
            "Sid": "UploadPartsOfNewObjects",
            "Effect": "Allow",
            "Action": "s3:PutObject",
            "Resource": objects,
            "Condition": {"StringEquals": {CREATION_OPERATION: list(HEADERLESS_OPERATIONS)}},
        },
        {
            "Sid": "EncryptWeights",
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
            "Resource": key_arn,
        },
    )
