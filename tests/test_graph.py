"""The platform graph each stack builds, asserted on what the program registered."""

from __future__ import annotations

import json

import pytest

from contract.settings.stack_file import load_stack
from tests.harness import ROOT, ProgramFailed, StackRun, run_program, stack_config

SUBNET = "aws:ec2/subnet:Subnet"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def subnets(run: StackRun, tier: str) -> list:
    return [r for r in run.of_type(SUBNET) if f"-{tier}-" in r.name]


def zones(stack: str) -> list[str]:
    return load_stack(stack, ROOT).network.availability_zones


def test_every_resource_belongs_to_the_platform_tree(stack: StackRun) -> None:
    platform = stack.of_type("inference-platform:platform:Platform")
    assert len(platform) == 1
    assert platform[0].parent.endswith("pulumi:pulumi:Stack::inference-platform-" + stack.stack)
    orphans = [r.name for r in stack.resources if r is not platform[0] and not r.parent]
    assert orphans == []


def test_components_use_the_project_type_tokens(stack: StackRun) -> None:
    components = {r.type for r in stack.resources if not r.custom and r.type.startswith("inference-platform:")}
    assert {
        "inference-platform:network:Network",
        "inference-platform:cluster:Cluster",
        "inference-platform:gpu:GpuCapacity",
        "inference-platform:models:ModelStore",
    } <= components


@pytest.mark.parametrize("tier", ["public", "private"])
def test_one_subnet_per_zone_per_tier(stack: StackRun, tier: str) -> None:
    made = sorted(r.inputs["availabilityZone"] for r in subnets(stack, tier))
    assert made == sorted(zones(stack.stack))


def test_public_subnets_are_tagged_for_internet_load_balancers(stack: StackRun) -> None:
    for subnet in subnets(stack, "public"):
        assert subnet.inputs["tags"]["kubernetes.io/role/elb"] == "1"
        assert subnet.inputs["mapPublicIpOnLaunch"] is False


def test_private_subnets_are_tagged_for_internal_load_balancers_and_node_discovery(stack: StackRun) -> None:
    cluster_name = f"llm-{stack.stack}"
    for subnet in subnets(stack, "private"):
        tags = subnet.inputs["tags"]
        assert tags["kubernetes.io/role/internal-elb"] == "1"
        assert tags["karpenter.sh/discovery"] == cluster_name
        assert tags[f"kubernetes.io/cluster/{cluster_name}"] == "shared"


def test_dev_shares_one_nat_gateway(dev: StackRun) -> None:
    assert len(dev.of_type("aws:ec2/natGateway:NatGateway")) == 1


def test_prod_has_a_nat_gateway_per_zone(prod: StackRun) -> None:
    assert len(prod.of_type("aws:ec2/natGateway:NatGateway")) == len(zones("prod"))


def test_private_subnets_reach_s3_through_a_gateway_endpoint(stack: StackRun) -> None:
    (endpoint,) = stack.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    assert endpoint.inputs["vpcEndpointType"] == "Gateway"
    assert endpoint.inputs["serviceName"] == "com.amazonaws.us-west-2.s3"
    assert len(endpoint.inputs["routeTableIds"]) == len(zones(stack.stack))


def test_only_vpc_flow_logs_of_this_account_may_assume_the_flow_logs_role(prod: StackRun) -> None:
    (flow_log,) = prod.of_type("aws:ec2/flowLog:FlowLog")
    (role,) = [r for r in prod.of_type("aws:iam/role:Role") if flow_log.inputs["iamRoleArn"].endswith(r.name)]
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"}
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "123456789012"},
        "ArnLike": {"aws:SourceArn": "arn:aws:ec2:us-west-2:123456789012:vpc-flow-log/*"},
    }


def test_flow_logs_only_in_prod(dev: StackRun, prod: StackRun) -> None:
    assert dev.of_type("aws:ec2/flowLog:FlowLog") == []
    (flow_log,) = prod.of_type("aws:ec2/flowLog:FlowLog")
    assert flow_log.inputs["trafficType"] == "ALL"


def test_cluster_uses_auto_mode_api_auth_and_private_endpoint(stack: StackRun) -> None:
    (cluster,) = stack.of_type("eks:index:Cluster")
    inputs = cluster.inputs
    assert inputs["autoMode"]["enabled"] is True
    assert inputs["autoMode"]["computeConfig"]["nodePools"] == ["system", "general-purpose"]
    assert inputs["authenticationMode"] == "API"
    assert inputs["endpointPrivateAccess"] is True
    assert inputs["endpointPublicAccess"] is False
    assert set(inputs["enabledClusterLogTypes"]) >= {"api", "audit", "authenticator"}
    assert inputs["encryptionConfigKeyArn"]


def test_public_endpoint_opens_only_to_the_configured_allowlist() -> None:
    config = stack_config("dev")
    cluster = json.loads(config["inference-platform:cluster"])
    cluster["endpointAccess"] = "public-allowlist"
    cluster["publicAccessCidrs"] = ["203.0.113.0/24"]
    config["inference-platform:cluster"] = json.dumps(cluster)
    (eks_cluster,) = run_program("dev", config).of_type("eks:index:Cluster")
    assert eks_cluster.inputs["endpointPublicAccess"] is True
    assert eks_cluster.inputs["publicAccessCidrs"] == ["203.0.113.0/24"]


def test_admin_principals_get_cluster_admin_access_entries() -> None:
    config = stack_config("dev")
    cluster = json.loads(config["inference-platform:cluster"])
    cluster["adminPrincipalArns"] = ["arn:aws:iam::123456789012:role/platform-admin"]
    config["inference-platform:cluster"] = json.dumps(cluster)
    (eks_cluster,) = run_program("dev", config).of_type("eks:index:Cluster")
    (entry,) = eks_cluster.inputs["accessEntries"].values()
    assert entry["principalArn"] == "arn:aws:iam::123456789012:role/platform-admin"
    (policy,) = entry["accessPolicies"].values()
    assert policy["policyArn"].endswith("AmazonEKSClusterAdminPolicy")
    assert policy["accessScope"] == {"type": "cluster"}


def test_secrets_encryption_key_rotates(stack: StackRun) -> None:
    keys = stack.of_type("aws:kms/key:Key")
    assert keys and all(k.inputs["enableKeyRotation"] is True for k in keys)


def test_mountpoint_driver_is_installed_with_pod_identity(stack: StackRun) -> None:
    (addon,) = [
        a for a in stack.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-mountpoint-s3-csi-driver"
    ]
    (association,) = addon.inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == "s3-csi-driver-sa"


def test_one_kubernetes_provider_is_shared_by_every_kubernetes_object(stack: StackRun) -> None:
    assert len(stack.of_type("pulumi:providers:kubernetes")) == 1


def node_pools(run: StackRun) -> dict[str, dict]:
    return {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in run.of_type(NODE_POOL)}


def test_spot_pool_is_tried_before_the_on_demand_fallback(stack: StackRun) -> None:
    pools = node_pools(stack)
    capacity = {
        name: next(
            q["values"] for q in spec["template"]["spec"]["requirements"] if q["key"] == "karpenter.sh/capacity-type"
        )
        for name, spec in pools.items()
    }
    assert capacity == {"gpu-spot": ["spot"], "gpu-on-demand": ["on-demand"]}
    assert pools["gpu-spot"]["weight"] > pools["gpu-on-demand"]["weight"]


def test_every_gpu_pool_is_tainted_and_limited(stack: StackRun) -> None:
    for spec in node_pools(stack).values():
        assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"} in spec["template"]["spec"]["taints"]
        assert int(spec["limits"]["nvidia.com/gpu"]) > 0
        assert spec["disruption"]["consolidationPolicy"] in ("WhenEmpty", "WhenEmptyOrUnderutilized")


def test_pool_limits_come_from_the_stack(dev: StackRun, prod: StackRun) -> None:
    for run, name in ((dev, "dev"), (prod, "prod")):
        for pool in load_stack(name, ROOT).gpu_capacity.pools:
            assert node_pools(run)[pool.name]["limits"] == {"nvidia.com/gpu": str(pool.gpu_limit)}
    assert node_pools(dev)["gpu-spot"]["limits"] == {"nvidia.com/gpu": "2"}


def test_auto_mode_pools_use_the_gpu_node_class(stack: StackRun) -> None:
    (node_class,) = stack.of_type("kubernetes:eks.amazonaws.com/v1:NodeClass")
    assert node_class.inputs["spec"]["ephemeralStorage"]["size"].endswith("Gi")
    for spec in node_pools(stack).values():
        assert spec["template"]["spec"]["nodeClassRef"] == {
            "group": "eks.amazonaws.com",
            "kind": "NodeClass",
            "name": "gpu",
        }


def bucket_children(run: StackRun, type_token: str) -> dict:
    (resource,) = run.of_type(type_token)
    return resource.inputs


def test_model_bucket_blocks_all_public_access(stack: StackRun) -> None:
    block = bucket_children(stack, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert all(
        block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )


def test_model_bucket_is_versioned_kms_encrypted_and_owner_enforced(stack: StackRun) -> None:
    assert (
        bucket_children(stack, "aws:s3/bucketVersioning:BucketVersioning")["versioningConfiguration"]["status"]
        == "Enabled"
    )
    (rule,) = bucket_children(
        stack, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    )["rules"]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    ownership = bucket_children(stack, "aws:s3/bucketOwnershipControls:BucketOwnershipControls")
    assert ownership["rule"]["objectOwnership"] == "BucketOwnerEnforced"


def bucket_statements(stack: StackRun) -> dict[str, dict]:
    policy = json.loads(bucket_children(stack, "aws:s3/bucketPolicy:BucketPolicy")["policy"])
    return {s["Sid"]: s for s in policy["Statement"]}


def test_model_bucket_denies_requests_without_tls(stack: StackRun) -> None:
    statement = bucket_statements(stack)["DenyInsecureTransport"]
    assert (statement["Effect"], statement["Principal"], statement["Action"]) == ("Deny", "*", "s3:*")
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_model_bucket_refuses_objects_encrypted_other_than_with_its_own_kms_key(stack: StackRun) -> None:
    """SSE-S3 or another account's key would decrypt without this key's policy; an upload naming
    neither gets the bucket default (this key), hence IfExists."""
    statements = bucket_statements(stack)
    (key,) = [k for k in stack.of_type("aws:kms/key:Key") if k.name.endswith("-models-weights")]
    key_arn = f"arn:aws:kms:us-west-2:123456789012:{key.name}"
    assert statements["DenyOtherEncryption"]["Condition"] == {
        "StringNotEqualsIfExists": {"s3:x-amz-server-side-encryption": "aws:kms"}
    }
    assert statements["DenyOtherKmsKey"]["Condition"] == {
        "StringNotEqualsIfExists": {"s3:x-amz-server-side-encryption-aws-kms-key-id": key_arn}
    }
    assert all(statements[sid]["Principal"] == "*" for sid in ("DenyOtherEncryption", "DenyOtherKmsKey"))


def test_the_weights_key_is_used_only_by_the_writer_and_the_mount_through_s3(stack: StackRun) -> None:
    """An explicit key policy instead of KMS's default (which gives the account root kms:* and so
    every identity policy in the account): the account's IAM administers the key, only the writer
    and the Mountpoint role may use it, and only in requests S3 makes (KMS Developer Guide, "Default
    key policy"; "AWS KMS condition keys", kms:ViaService)."""
    (key,) = [k for k in stack.of_type("aws:kms/key:Key") if k.name.endswith("-models-weights")]
    statements = {s["Sid"]: s for s in json.loads(key.inputs["policy"])["Statement"]}
    account = "123456789012"
    admin = statements["AdministerThroughAccountIam"]
    assert admin["Principal"] == {"AWS": f"arn:aws:iam::{account}:root"}
    assert not {a for a in admin["Action"] if a.startswith(("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"))}
    assert "kms:*" not in admin["Action"] and "kms:Put*" in admin["Action"]
    users = {
        statements[sid]["Principal"]["AWS"]: statements[sid]
        for sid in ("WriterEncryptsThroughS3", "MountDecryptsThroughS3")
    }
    prefix = f"arn:aws:iam:us-west-2:{account}:llm-{stack.stack}"
    assert set(users) == {f"{prefix}-models-model-sync", f"{prefix}-cluster-mountpoint-s3"}
    assert users[f"{prefix}-cluster-mountpoint-s3"]["Action"] == "kms:Decrypt"
    assert all(u["Condition"]["StringEquals"]["kms:ViaService"] == "s3.us-west-2.amazonaws.com" for u in users.values())


def test_the_bucket_denies_the_writer_any_replacing_write_or_delete(stack: StackRun) -> None:
    """Whatever identity policy the writer role is given, the bucket refuses it a PutObject or
    CompleteMultipartUpload without If-None-Match and every delete (S3 user guide, "Enforce
    conditional writes on Amazon S3 buckets")."""
    statements = bucket_statements(stack)
    writer = "arn:aws:iam:us-west-2:123456789012:llm-" + stack.stack + "-models-model-sync"
    replacing, deleting = statements["DenyWriterReplacing"], statements["DenyWriterDeleting"]
    assert replacing["Principal"] == deleting["Principal"] == {"AWS": writer}
    assert replacing["Condition"] == {
        "Null": {"s3:if-none-match": "true"},
        "StringNotEquals": {"s3:ObjectCreationOperation": ["CreateMultipartUpload", "UploadPart"]},
    }
    assert {"s3:DeleteObject", "s3:DeleteObjectVersion"} <= set(deleting["Action"])


def test_noncurrent_versions_and_abandoned_uploads_expire(stack: StackRun) -> None:
    (rule,) = bucket_children(stack, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")["rules"]
    assert rule["noncurrentVersionExpiration"]["noncurrentDays"] > 0
    assert rule["abortIncompleteMultipartUpload"]["daysAfterInitiation"] > 0


def test_only_dev_may_destroy_a_bucket_with_weights(dev: StackRun, prod: StackRun) -> None:
    assert dev.of_type("aws:s3/bucket:Bucket")[0].inputs["forceDestroy"] is True
    assert prod.of_type("aws:s3/bucket:Bucket")[0].inputs["forceDestroy"] is False


def test_each_model_gets_a_read_only_volume_of_its_own_prefix(stack: StackRun) -> None:
    settings = load_stack(stack.stack, ROOT)
    volumes = {
        r.inputs["metadata"]["name"]: r.inputs["spec"] for r in stack.of_type("kubernetes:core/v1:PersistentVolume")
    }
    claims = {
        r.inputs["metadata"]["name"]: r.inputs["spec"]
        for r in stack.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    }
    assert len(volumes) == len(claims) == len(settings.models)
    for model in settings.models:
        volume = volumes[f"{model.name}-weights"]
        assert volume["accessModes"] == ["ReadOnlyMany"]
        assert volume["csi"]["driver"] == "s3.csi.aws.com"
        assert f"prefix {model.store_prefix}/" in volume["mountOptions"]
        assert "read-only" in volume["mountOptions"]
        assert claims[f"{model.name}-weights"]["volumeName"] == f"{model.name}-weights"


def test_mountpoint_reads_only_the_model_prefixes(stack: StackRun) -> None:
    settings = load_stack(stack.stack, ROOT)
    (read,) = [r for r in stack.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("mountpoint-read")]
    statements = {s["Sid"]: s for s in json.loads(read.inputs["policy"])["Statement"]}
    assert statements["ReadModelObjects"]["Action"] == "s3:GetObject"
    assert sorted(statements["ReadModelObjects"]["Resource"]) == sorted(
        f"arn:aws:s3:us-west-2:123456789012:llm-{stack.stack}-models-weights/{m.store_prefix}/*"
        for m in settings.models
    )
    assert not any("s3:PutObject" in str(s["Action"]) for s in statements.values())


def test_outputs_expose_what_operators_need_with_kubeconfig_secret(stack: StackRun) -> None:
    assert set(stack.outputs) >= {"vpcId", "clusterName", "kubeconfig", "modelBucket", "gpuNodePools"}
    assert stack.secret_outputs >= {"kubeconfig"}
    assert stack.outputs["gpuNodePools"] == ["gpu-spot", "gpu-on-demand"]


def test_invalid_config_stops_the_program_before_any_resource() -> None:
    config = stack_config("dev")
    config["inference-platform:network"] = json.dumps({"cidr": "10.0.0.0/8"})
    with pytest.raises(ProgramFailed) as failed:
        run_program("dev", config)
    assert "inference-platform:network.cidr" in str(failed.value)
    assert failed.value.registered == []


def karpenter_config(stack: str = "dev") -> dict[str, str]:
    """The stack with self-managed Karpenter instead of Auto Mode (and a RAID0 instance store)."""
    config = stack_config(stack)
    cluster = json.loads(config["inference-platform:cluster"])
    config["inference-platform:cluster"] = json.dumps({**cluster, "autoMode": False})
    gpu = json.loads(config["inference-platform:gpuCapacity"])
    gpu["provisioner"] = "karpenter"
    gpu["nodeClass"]["instanceStoreRaid0"] = True
    config["inference-platform:gpuCapacity"] = json.dumps(gpu)
    return config


@pytest.fixture(scope="module")
def karpenter() -> StackRun:
    return run_program("dev", karpenter_config())


def test_karpenter_provisioner_installs_the_pinned_chart(karpenter: StackRun) -> None:
    (release,) = [r for r in karpenter.of_type("kubernetes:helm.sh/v3:Release") if "karpenter" in r.inputs["chart"]]
    assert release.inputs["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert release.inputs["version"] == "1.14.1"
    assert release.inputs["values"]["settings"]["interruptionQueue"]


def test_karpenter_gets_interruption_events_through_sqs(karpenter: StackRun) -> None:
    patterns = [
        json.loads(r.inputs["eventPattern"])["detail-type"][0]
        for r in karpenter.of_type("aws:cloudwatch/eventRule:EventRule")
    ]
    assert sorted(patterns) == sorted(
        [
            "AWS Health Event",
            "EC2 Spot Instance Interruption Warning",
            "EC2 Instance Rebalance Recommendation",
            "EC2 Instance State-change Notification",
            "EC2 Capacity Reservation Instance Interruption Warning",
        ]
    )
    assert len(karpenter.of_type("aws:cloudwatch/eventTarget:EventTarget")) == 5


def test_karpenter_controller_uses_pod_identity_and_nodes_join_by_access_entry(karpenter: StackRun) -> None:
    associations = {
        r.inputs["serviceAccount"] for r in karpenter.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    }
    assert "karpenter" in associations
    (entry,) = karpenter.of_type("aws:eks/accessEntry:AccessEntry")
    assert entry.inputs["type"] == "EC2_LINUX"


def test_karpenter_node_class_pins_the_ami_and_raids_instance_store(karpenter: StackRun) -> None:
    (node_class,) = [
        n
        for n in karpenter.of_type("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
        if n.inputs["metadata"]["name"] == "gpu"
    ]
    spec = node_class.inputs["spec"]
    assert spec["amiSelectorTerms"] == [{"alias": "al2023@v20251117"}]
    assert spec["instanceStorePolicy"] == "RAID0"
    assert spec["blockDeviceMappings"][0]["ebs"]["volumeType"] == "gp3"
    assert spec["metadataOptions"]["httpTokens"] == "required"
    for pool in node_pools(karpenter).values():
        assert pool["template"]["spec"]["nodeClassRef"]["kind"] == "EC2NodeClass"


def test_karpenter_mode_adds_system_nodes_for_controllers(karpenter: StackRun) -> None:
    (group,) = karpenter.of_type("aws:eks/nodeGroup:NodeGroup")
    assert group.inputs["capacityType"] == "ON_DEMAND"
    assert group.inputs["labels"] == {"node-role": "system"}


def test_without_auto_mode_the_ebs_driver_and_pod_identity_agent_are_added(karpenter: StackRun) -> None:
    addons = {a.inputs["addonName"]: a.inputs for a in karpenter.of_type("aws:eks/addon:Addon")}
    assert {"eks-pod-identity-agent", "aws-ebs-csi-driver", "aws-mountpoint-s3-csi-driver"} <= set(addons)
    (association,) = addons["aws-ebs-csi-driver"]["podIdentityAssociations"]
    assert association["serviceAccount"] == "ebs-csi-controller-sa"


def test_auto_mode_relies_on_its_built_in_block_storage(dev: StackRun) -> None:
    addons = {a.inputs["addonName"] for a in dev.of_type("aws:eks/addon:Addon")}
    assert "aws-ebs-csi-driver" not in addons


def test_each_model_gets_a_sync_job_before_its_predictor(stack: StackRun) -> None:
    settings = load_stack(stack.stack, ROOT)
    jobs = stack.of_kind("batch/v1", "Job")
    assert len(jobs) == len(settings.models)
    assert len(stack.of_type("inference-platform:models:ModelSync")) == 1


def test_model_sync_may_delete_nothing_and_write_only_keys_that_do_not_exist(stack: StackRun) -> None:
    (write,) = [r for r in stack.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("-models-model-sync")]
    statements = {s["Sid"]: s for s in json.loads(write.inputs["policy"])["Statement"]}
    assert not [s for s in statements.values() if "Delete" in str(s["Action"])]
    putting = [s for s in statements.values() if "s3:PutObject" in str(s["Action"])]
    assert putting == [statements["CreateModelObjectsOnly"], statements["UploadPartsOfNewObjects"]]
    assert statements["CreateModelObjectsOnly"]["Condition"] == {"Null": {"s3:if-none-match": "false"}}
    assert statements["UploadPartsOfNewObjects"]["Condition"] == {
        "StringEquals": {"s3:ObjectCreationOperation": ["CreateMultipartUpload", "UploadPart"]}
    }
