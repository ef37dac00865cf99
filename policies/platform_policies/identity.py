"""AWS identities: who may assume the platform's roles, what their policies grant, which pods
get one. The model store is only as safe as the weakest role that can write to it, and the
predictors serve weights they must never be able to change, so they get no AWS identity at all.

Policy documents are read as the engine passes them (JSON strings, or mappings); a document
built from an ARN created in the same update is unknown in a first preview and is checked when
the stack policies run again on the real outputs after `pulumi up`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from . import documents, k8s
from .base import Subject, of_kind, resource_policy, stack_policy, subject_of
from .links import refers_to
from .workloads import WORKLOAD_KINDS  # the kinds whose pods could run as the writer's service account

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
MANAGED_POLICY = "aws:iam/policy:Policy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ADDON = "aws:eks/addon:Addon"
SERVICE_ACCOUNT = ("", "ServiceAccount")
# The Mountpoint for S3 CSI driver's add-on; its controller's pods get the role of its
# podIdentityAssociations (EKS user guide, "Mountpoint for Amazon S3 CSI driver").
MOUNTPOINT_ADDON = "aws-mountpoint-s3-csi-driver"
MOUNTPOINT_SERVICE_ACCOUNT = "s3-csi-driver-sa"
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"

# Actions that destroy what versioning keeps or switch off the bucket's and key's protections:
# a role that holds one can make a bad model permanent or readable (S3 User Guide, "Deleting
# object versions from a versioning-enabled bucket": only DeleteObjectVersion removes a version
# for good; KMS Developer Guide, "Deleting AWS KMS keys").
DESTRUCTIVE_ACTIONS = (
    "s3:DeleteObjectVersion",
    "s3:DeleteBucket",
    "s3:PutBucketPolicy",
    "s3:DeleteBucketPolicy",
    "s3:PutBucketVersioning",
    "s3:PutLifecycleConfiguration",
    "s3:PutBucketPublicAccessBlock",
    "s3:PutEncryptionConfiguration",
    "s3:PutBucketOwnershipControls",
    "s3:PutBucketAcl",
    "s3:PutObjectAcl",
    "s3:BypassGovernanceRetention",
    "kms:ScheduleKeyDeletion",
    "kms:DisableKey",
    "kms:DisableKeyRotation",
    "kms:PutKeyPolicy",
)
# Object writes; each must stay under a key prefix (the model revisions), never the whole bucket.
OBJECT_WRITES = ("s3:PutObject", "s3:DeleteObject")
# What the read-only mount may do: list and read the weights, decrypt them (Mountpoint for S3,
# "Configuring Mountpoint: AWS permissions" lists s3:ListBucket and s3:GetObject for reads;
# writes need s3:PutObject, s3:AbortMultipartUpload, s3:DeleteObject).
MOUNT_WRITES = (
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:AbortMultipartUpload",
    "s3:PutObjectTagging",
    "kms:Encrypt",
    "kms:GenerateDataKey",
)
# AWS managed policies that give a workload the account (or every bucket and key).
BROAD_MANAGED_POLICIES = (
    "AdministratorAccess",
    "PowerUserAccess",
    "IAMFullAccess",
    "AmazonS3FullAccess",
    "AWSKeyManagementServicePowerUser",
    # aps:RemoteWrite on "*": every AMP workspace of the account (AWS managed policy reference,
    # AmazonPrometheusRemoteWriteAccess).
    "AmazonPrometheusRemoteWriteAccess",
)
# Writes into a named resource that a statement must not widen to every resource of the account.
SCOPED_WRITES = ("aps:RemoteWrite",)


# --- trust policies ---------------------------------------------------------------------------


def _check_trust(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if subject.resource_type != ROLE:
        return
    statements = documents.parse(k8s.get(subject.props, "assumeRolePolicy", unknown=None))
    for statement in statements or []:
        if statement.effect == "Allow" and "*" in statement.principals:
            yield (
                f"{subject.label}: its trust policy ({documents.label(statement)}) lets any principal assume it "
                '(Principal "*"), in any account'
            )


roles_trust_named_principals = resource_policy(
    name="iam-roles-trust-named-principals",
    description=(
        "Every IAM role's trust policy names who may assume it (an AWS service such as pods.eks.amazonaws.com): "
        'a "Principal": "*" lets any AWS principal in any account assume the role (IAM User Guide, "AWS JSON '
        'policy elements: Principal", anonymous/all principals).'
    ),
    remediation=(
        "Build trust policies with components/iam.py (pod_identity_trust, service_trust): a service principal, "
        "never a wildcard."
    ),
    check=_check_trust,
)


# --- what policies grant ----------------------------------------------------------------------


def policy_documents(resources: list[Any]) -> Iterator[tuple[Subject, Any]]:
    """(resource, document) of every inline and managed policy in the stack."""
    for resource in resources:
        subject = subject_of(resource)
        if subject.resource_type in (ROLE_POLICY, MANAGED_POLICY):
            yield subject, k8s.get(subject.props, "policy", unknown=None)
        elif subject.resource_type == ROLE:
            for inline in k8s.known_items(subject.props, "inlinePolicies"):
                yield subject, k8s.get(inline, "policy", unknown=None)


def _object_key(resource_arn: str) -> str | None:
    """The key part of an S3 object ARN (`arn:aws:s3:::bucket/<key>`), `*` for a bare `*`."""
    if resource_arn == "*":
        return "*"
    if not resource_arn.startswith("arn:") or ":s3:" not in resource_arn:
        return None
    return resource_arn.split("/", 1)[1] if "/" in resource_arn else None


def _whole_bucket_writes(statement: documents.Statement) -> list[str]:
    if not documents.granted([statement], OBJECT_WRITES):
        return []
    if statement.not_resources:  # every resource but those listed
        return [f"NotResource {list(statement.not_resources)}"]
    return [r for r in statement.resources if (_object_key(r) or "x").startswith("*") or r.endswith(":s3:::*")]


def _check_grants(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    for subject, document in policy_documents(resources):
        for statement in documents.parse(document) or []:
            if statement.effect != "Allow":
                continue
            where = f"{subject.label}: {documents.label(statement)}"
            broad = [a for a in statement.actions if a == "*" or a.endswith(":*")]
            if broad or statement.not_actions:
                shown = broad or [f"NotAction {list(statement.not_actions)}"]
                yield f"{where} grants every action of a service ({shown})", subject.urn
            destructive = documents.granted([statement], DESTRUCTIVE_ACTIONS)
            if destructive:
                yield (
                    f"{where} grants {destructive}, which destroy object versions or switch off the bucket's or "
                    "key's protections",
                    subject.urn,
                )
            everywhere = [a for a in documents.granted([statement], SCOPED_WRITES) if "*" in statement.resources]
            if everywhere:
                yield (
                    f'{where} grants {everywhere} on every resource ("*"); remote write belongs to the stack\'s '
                    "own workspace",
                    subject.urn,
                )
            whole = _whole_bucket_writes(statement)
            if whole:
                yield (
                    f"{where} writes or deletes objects anywhere in the bucket ({whole}); writes belong under "
                    "the model revisions' prefixes",
                    subject.urn,
                )
    for attachment in (subject_of(r) for r in resources if r.resource_type == ATTACHMENT):
        arn = k8s.get(attachment.props, "policyArn", unknown=None)
        if isinstance(arn, str) and arn.rsplit("/", 1)[-1] in BROAD_MANAGED_POLICIES:
            yield f"{attachment.label}: attaches {arn}, far beyond what any platform workload needs", attachment.urn


iam_least_privilege = stack_policy(
    name="iam-policies-grant-least-privilege",
    description=(
        "No IAM policy in the stack grants a whole service (`*`, `s3:*`, NotAction), an action that destroys "
        "object versions or switches off bucket/key protections (s3:DeleteObjectVersion, s3:PutBucketPolicy, "
        "kms:ScheduleKeyDeletion, ...), or object writes on a whole bucket; and no role gets a broad AWS managed "
        "policy (AdministratorAccess, AmazonS3FullAccess, ...). Versioning keeps every published revision only "
        "while nobody may delete versions."
    ),
    remediation=(
        "Grant the named actions a workload uses on the resources it uses (components/model_store.py: writes "
        "under each model revision's prefix, deletes only of its manifest). Never DeleteObjectVersion."
    ),
    check=_check_grants,
)


# --- the read-only mount -----------------------------------------------------------------------


def _mount_roles(resources: list[Any]) -> list[Any]:
    """Roles the Mountpoint CSI driver runs as: through its add-on's Pod Identity associations, or
    an association of its controller's service account."""
    roles = [r for r in resources if r.resource_type == ROLE]
    addons = [
        r
        for r in resources
        if r.resource_type == ADDON and k8s.get(r.props, "addonName", unknown=None) == MOUNTPOINT_ADDON
    ]
    associations = [
        r
        for r in resources
        if r.resource_type == POD_IDENTITY
        and k8s.get(r.props, "serviceAccount", unknown=None) == MOUNTPOINT_SERVICE_ACCOUNT
    ]
    direct = [role for role in roles if any(refers_to(a, "roleArn", role, parent_counts=False) for a in associations)]
    via_addon = [
        role
        for role in roles
        if any(refers_to(a, "podIdentityAssociations", role, parent_counts=False) for a in addons)
    ]
    return via_addon + [role for role in direct if role not in via_addon]


def _policies_of(role: Any, resources: list[Any]) -> Iterator[tuple[Subject, Any]]:
    for resource in resources:
        if resource.resource_type == ROLE_POLICY and refers_to(resource, "role", role):
            yield subject_of(resource), k8s.get(resource.props, "policy", unknown=None)
    for inline in k8s.known_items(role.props, "inlinePolicies"):
        yield subject_of(role), k8s.get(inline, "policy", unknown=None)
    for attachment in (r for r in resources if r.resource_type == ATTACHMENT and refers_to(r, "role", role)):
        for policy in (r for r in resources if r.resource_type == MANAGED_POLICY):
            if refers_to(attachment, "policyArn", policy, parent_counts=False):
                yield subject_of(policy), k8s.get(policy.props, "policy", unknown=None)


MOUNTPOINT_DRIVER = "s3.csi.aws.com"
PERSISTENT_VOLUME = ("", "PersistentVolume")


def _writable_weight_mounts(isvc: Subject, claims: set[tuple[Any, Any]]) -> Iterator[tuple[str, str | None]]:
    """A predictor's volume of a Mountpoint claim, or a container's mount of it, that is not readOnly."""
    for where, pod_spec in k8s.pod_specs(k8s.INFERENCE_SERVICE, isvc.props):
        weights = {
            str(k8s.get(v, "name"))
            for v in k8s.known_items(pod_spec, "volumes")
            if (isvc.namespace, k8s.get(v, "persistentVolumeClaim", "claimName", unknown=None)) in claims
        }
        for volume in k8s.known_items(pod_spec, "volumes"):
            if (
                str(k8s.get(volume, "name")) in weights
                and k8s.get(volume, "persistentVolumeClaim", "readOnly") is not True
            ):
                yield (
                    f"{isvc.label}: {where} volume {k8s.get(volume, 'name')!r} claims the weights read-write",
                    isvc.urn,
                )
        for name, container in k8s.containers(pod_spec):
            for mount in k8s.known_items(container, "volumeMounts"):
                if str(k8s.get(mount, "name")) in weights and k8s.get(mount, "readOnly") is not True:
                    yield f"{isvc.label}: {where}.{name} mounts the weights without readOnly", isvc.urn


def _check_mount_read_only(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    # Mountpoint refuses writes and deletes through a file system mounted with `read-only`
    # (Mountpoint for S3 CSI driver, "Configuration": mountOptions are Mountpoint's flags).
    for volume in of_kind(resources, *PERSISTENT_VOLUME):
        if k8s.get(volume.props, "spec", "csi", "driver", unknown=None) != MOUNTPOINT_DRIVER:
            continue
        options = [str(o).strip() for o in k8s.known_items(volume.props, "spec", "mountOptions")]
        if "read-only" not in options:
            yield (
                f"{volume.label}: mounts the model store without the read-only option; predictors could write "
                "through it wherever the driver's role allows",
                volume.urn,
            )
    claims = {
        (
            k8s.get(v.props, "spec", "claimRef", "namespace", unknown=None),
            k8s.get(v.props, "spec", "claimRef", "name", unknown=None),
        )
        for v in of_kind(resources, *PERSISTENT_VOLUME)
        if k8s.get(v.props, "spec", "csi", "driver", unknown=None) == MOUNTPOINT_DRIVER
    }
    for isvc in of_kind(resources, *k8s.INFERENCE_SERVICE):
        yield from _writable_weight_mounts(isvc, claims)
    for role in _mount_roles(resources):
        for subject, document in _policies_of(role, resources):
            writes = documents.granted(documents.parse(document) or [], MOUNT_WRITES)
            if writes:
                yield (
                    f"{subject.label}: gives the Mountpoint CSI role '{role.name}' {writes}; the predictors' "
                    "mount would be able to change the weights it serves",
                    subject.urn,
                )


mount_read_only = stack_policy(
    name="model-mount-is-read-only",
    description=(
        "The predictors' weights mount is read-only three times: predictors claim and mount it readOnly, every "
        "Mountpoint PersistentVolume mounts with `read-only`, and the Mountpoint CSI driver's role may list, read "
        "and decrypt, never write, delete or encrypt. A mount "
        "that can write lets any predictor pod change the weights every replica serves."
    ),
    remediation=(
        "Keep the read-only mount option of components/model_store.py and its mountpoint-read policy (s3:ListBucket "
        "on the prefixes, s3:GetObject, kms:Decrypt); writes belong to the model-sync role only."
    ),
    check=_check_mount_read_only,
)


# --- predictors have no AWS identity -----------------------------------------------------------


def _predictor_accounts(resources: list[Any]) -> dict[tuple[str | None, str], Subject]:
    """(namespace, service account) each InferenceService's predictor pods run as."""
    found: dict[tuple[str | None, str], Subject] = {}
    for isvc in of_kind(resources, *k8s.INFERENCE_SERVICE):
        account = k8s.get(isvc.props, "spec", "predictor", "serviceAccountName", unknown=None) or "default"
        found[(isvc.namespace, str(account))] = isvc
    return found


def _check_predictor_identity(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    accounts = _predictor_accounts(resources)
    for association in (subject_of(r) for r in resources if r.resource_type == POD_IDENTITY):
        key = (
            k8s.get(association.props, "namespace", unknown=None),
            str(k8s.get(association.props, "serviceAccount", unknown="")),
        )
        if key in accounts:
            yield (
                f"{association.label}: gives an AWS role to service account {key[0]}/{key[1]}, which the predictors "
                f"of {accounts[key].label} run as; a predictor (vLLM, arbitrary model code) would hold AWS credentials",
                association.urn,
            )
    for account in of_kind(resources, *SERVICE_ACCOUNT):
        key = (account.namespace, account.k8s_name)
        annotation = k8s.get(account.props, "metadata", "annotations", IRSA_ANNOTATION, unknown=None)
        if key in accounts and annotation:
            yield (
                f"{account.label}: annotated {IRSA_ANNOTATION} (IAM roles for service accounts), and the predictors "
                f"of {accounts[key].label} run as it",
                account.urn,
            )


predictors_without_aws_identity = stack_policy(
    name="predictors-have-no-aws-identity",
    description=(
        "No EKS Pod Identity association (and no IRSA annotation) names the service account a predictor runs as: "
        "the predictors read weights through the read-only mount and need no AWS credentials; an association is "
        "per namespace and service account (EKS user guide, 'Learn how EKS Pod Identity grants pods access to AWS "
        "services'), so binding the writer there hands it to every predictor pod."
    ),
    remediation=(
        "Associate roles only with the service accounts of the workloads that need them (model-sync's own account, "
        "the CSI driver's); keep serving.<model> pods on their own predictor service account."
    ),
    check=_check_predictor_identity,
)

# --- trust policies carry their conditions ---------------------------------------------------------

# What each service principal's trust must be conditioned on. EKS Pod Identity tags every session
# with the association's cluster ARN, namespace and service account (EKS user guide, "Create IAM role
# with trust policy required by EKS Pod Identity" and "Enable or disable session tags"): without
# them, anyone who may create an association and pass the role binds it to another cluster or
# service account. VPC Flow Logs act for any account unless aws:SourceAccount / aws:SourceArn say
# whose (Amazon VPC user guide, "IAM role for publishing flow logs to CloudWatch Logs"; IAM user
# guide, "The confused deputy problem").
TRUST_CONDITIONS = {
    "pods.eks.amazonaws.com": (
        "aws:SourceAccount",
        "aws:RequestTag/eks-cluster-arn",
        "aws:RequestTag/kubernetes-namespace",
        "aws:RequestTag/kubernetes-service-account",
    ),
    "vpc-flow-logs.amazonaws.com": ("aws:SourceAccount", "aws:SourceArn"),
}


def _condition_values(statement: documents.Statement) -> dict[str, list[str]]:
    """Condition key (lower case, as IAM compares them) -> the values some operator pins it to."""
    found: dict[str, list[str]] = {}
    for _operator, block in statement.conditions.items():
        if not k8s.is_map(block):
            continue
        for key in block:
            value = block[key]
            values = [str(v) for v in value] if k8s.is_list(value) else [str(value)]
            found.setdefault(str(key).lower(), []).extend(values)
    return found


def _check_trust_conditions(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if subject.resource_type != ROLE:
        return
    for statement in documents.parse(k8s.get(subject.props, "assumeRolePolicy", unknown=None)) or []:
        if statement.effect != "Allow":
            continue
        pinned = _condition_values(statement)
        for service in (p for p in statement.principals if p in TRUST_CONDITIONS):
            missing = [
                key for key in TRUST_CONDITIONS[service] if not any(v and v != "*" for v in pinned.get(key.lower(), []))
            ]
            if missing:
                yield (
                    f"{subject.label}: its trust of {service} ({documents.label(statement)}) does not pin {missing}; "
                    "whoever may pass the role can have it assumed for another cluster, service account or account"
                )


trust_conditioned = resource_policy(
    name="iam-role-trust-is-conditioned",
    description=(
        "A role trusted by EKS Pod Identity names its cluster ARN, namespace, service account (session tags) and "
        "source account in its trust conditions; a role trusted by VPC Flow Logs names its source account and "
        "flow-log ARN. Without them the trust is as wide as everyone who may pass the role."
    ),
    remediation=(
        "Build Pod Identity trust with components/iam.py pod_identity_trust (it pins all four) and the flow-logs "
        "trust with flow_logs_trust."
    ),
    check=_check_trust_conditions,
)


# --- the model writer runs alone ------------------------------------------------------------------


def writer_roles(resources: list[Any]) -> list[tuple[Any, list[tuple[Subject, Any]]]]:
    """Roles some policy of theirs lets write S3 objects (s3:PutObject), with those policies."""
    found = []
    for role in (r for r in resources if r.resource_type == ROLE):
        policies = list(_policies_of(role, resources))
        if any(documents.granted(documents.parse(d) or [], ["s3:PutObject"]) for _, d in policies):
            found.append((role, policies))
    return found


def _check_writer_alone(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    subjects = [subject_of(r) for r in resources]
    associations = [r for r in resources if r.resource_type == POD_IDENTITY]
    for role, _policies in writer_roles(resources):
        for association in (subject_of(a) for a in associations if refers_to(a, "roleArn", role)):
            namespace = k8s.get(association.props, "namespace", unknown=None)
            account = k8s.get(association.props, "serviceAccount", unknown=None)
            if namespace is None:
                continue
            sharing = [s for s in subjects if s.namespace == namespace and s.gk == k8s.INFERENCE_SERVICE]
            sharing += [
                s
                for s in subjects
                if s.namespace == namespace
                and s.gk in WORKLOAD_KINDS
                and s.gk != ("batch", "Job")
                and any(
                    str(k8s.get(spec, "serviceAccountName", unknown="")) != account
                    for _, spec in k8s.pod_specs(s.gk, s.props)
                )
            ]
            if sharing:
                yield (
                    f"{association.label}: associates the object writer '{role.name}' in namespace {namespace}, "
                    f"where {[s.label for s in sharing]} run; whoever may create a workload there runs as the writer "
                    "and can publish weights the predictors serve",
                    association.urn,
                )


writer_alone = stack_policy(
    name="model-writer-alone-in-its-namespace",
    description=(
        "A role that writes objects to the model store is associated only in a namespace of its own (the model-sync "
        "Jobs'): no InferenceService and no other workload runs there, so creating a pod beside the predictors or "
        "the gateway never yields the writer's credentials."
    ),
    remediation=(
        "Keep modelStore.syncNamespace apart from serving, gateway and monitoring (the settings refuse a shared "
        "one); components/model_store.py associates the writer there only."
    ),
    check=_check_writer_alone,
)

POLICIES = [
    roles_trust_named_principals,
    iam_least_privilege,
    mount_read_only,
    predictors_without_aws_identity,
    trust_conditioned,
    writer_alone,
]
