"""Cluster: EKS (Auto Mode by default), API auth with access entries, encrypted secrets,
control-plane logs, the add-ons the platform needs, and the one Kubernetes provider."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from contract.settings.cluster import ClusterSettings

from . import iam, isolation
from .load_balancer_controller import load_balancer_controller
from .naming import type_token

ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
# The Mountpoint CSI driver's node service account (the EKS add-on creates it).
MOUNTPOINT_SERVICE_ACCOUNT = "s3-csi-driver-sa"
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
# Both add-ons run their controllers' service accounts in kube-system.
ADDON_NAMESPACE = "kube-system"


# What the cluster role may do with the secrets key: encrypt and decrypt the Secrets' data keys and
# read the key (Encrypt, Decrypt, DescribeKey), and create grants on it (CreateGrant; the EKS User
# Guide, "Encrypt Kubernetes secrets with KMS on existing clusters", says a scoped-down key policy
# must permit DescribeKey and CreateGrant, and that CreateGrant is required for KMS envelope
# encryption). terraform-aws-eks v21.19.0 main.tf writes the same: the cluster role is the
# key's user (module "kms" key_users = [local.role_arn]) and its ClusterEncryption policy allows
# kms:Encrypt, kms:Decrypt, kms:ListGrants, kms:DescribeKey on the key (ListGrants stays available
# through account IAM, kms:List* of the administration statement).
CLUSTER_ROLE_KEY_ACTIONS = ["kms:Encrypt", "kms:Decrypt", "kms:DescribeKey", "kms:CreateGrant"]


def secrets_key_policy(partition: str, account_id: str, *, cluster_role_arn: str) -> str:
    """The EKS secrets key's own policy, in the model store key's shape: the account's IAM administers
    it without using it (so an identity policy granting kms:Decrypt on "*" cannot read Secrets), the
    cluster role uses it. Repairable: the administration statement keeps kms:PutKeyPolicy with the
    account, so a principal EKS turns out to need can be added without the key becoming unmanageable."""
    return iam.document(
        iam.administer_key_through_account_iam(partition, account_id),
        {
            "Sid": "ClusterRoleUsesKey",
            "Effect": "Allow",
            "Principal": {"AWS": cluster_role_arn},
            "Action": CLUSTER_ROLE_KEY_ACTIONS,
            "Resource": "*",
        },
    )


@dataclass(frozen=True)
class ClusterArgs:
    settings: ClusterSettings
    cluster_name: str
    vpc_id: pulumi.Input[str]
    private_subnet_ids: list[pulumi.Input[str]]
    public_subnet_ids: list[pulumi.Input[str]]
    region: str
    tags: dict[str, str]


class Cluster(pulumi.ComponentResource):
    name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    node_role_name: pulumi.Output[str]
    node_security_group_id: pulumi.Output[str]
    mountpoint_role: aws.iam.Role
    # The role EKS (and Auto Mode's controllers) act as; it carries the custom-tags policy.
    service_role: aws.iam.Role
    # Without Auto Mode: the controller behind `service.k8s.aws/nlb` (Auto Mode has its own).
    load_balancer_controller: k8s.helm.v3.Release | None

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("cluster", "Cluster"), name, None, opts)
        s, tags = args.settings, args.tags
        child = pulumi.ResourceOptions(parent=self)

        self.service_role, role_ready = self._service_role(name, s.auto_mode, tags)
        # Envelope encryption of Kubernetes Secrets (API keys, Grafana admin) at rest, under a key
        # whose own policy names its user: the cluster role (secrets_key_policy).
        key_policy = pulumi.Output.all(
            aws.get_partition_output().partition,
            aws.get_caller_identity_output().account_id,
            self.service_role.arn,
        ).apply(lambda a: secrets_key_policy(a[0], a[1], cluster_role_arn=a[2]))
        secrets_key = aws.kms.Key(
            f"{name}-secrets",
            description=f"EKS secrets envelope encryption for {args.cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            policy=key_policy,
            tags=tags,
            opts=child,
        )

        access_entries = {
            f"admin-{i}": eks.AccessEntryArgs(
                principal_arn=arn,
                access_policies={
                    "cluster-admin": eks.AccessPolicyAssociationArgs(
                        policy_arn=ADMIN_POLICY,
                        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    )
                },
            )
            for i, arn in enumerate(s.admin_principal_arns)
        }
        cluster = eks.Cluster(
            f"{name}-eks",
            name=args.cluster_name,
            version=s.kubernetes_version,
            vpc_id=args.vpc_id,
            private_subnet_ids=args.private_subnet_ids,
            public_subnet_ids=args.public_subnet_ids,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries=access_entries,
            endpoint_private_access=True,
            endpoint_public_access=s.endpoint_access == "public-allowlist",
            public_access_cidrs=s.public_access_cidrs or None,
            enabled_cluster_log_types=s.control_plane_logs,
            encryption_config_key_arn=secrets_key.arn,
            skip_default_node_group=True,
            create_oidc_provider=False,  # workloads use EKS Pod Identity
            deletion_protection=s.deletion_protection,
            service_role=self.service_role,
            # Without Auto Mode the VPC CNI add-on enforces NetworkPolicies (see components/isolation.py).
            vpc_cni_options=None if s.auto_mode else eks.VpcCniOptionsArgs(enable_network_policy=True),
            auto_mode=eks.AutoModeOptionsArgs(
                enabled=True,
                create_node_role=True,
                compute_config=eks.ClusterComputeConfigArgs(node_pools=["system", "general-purpose"]),
            )
            if s.auto_mode
            else None,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=role_ready),
        )
        self.name = cluster.eks_cluster.name
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json)
        # Auto Mode nodes carry the EKS-managed cluster security group.
        self.node_security_group_id = cluster.eks_cluster.vpc_config.cluster_security_group_id
        self.node_role_name = cluster.auto_mode_node_role_name
        cluster_opts = pulumi.ResourceOptions(parent=cluster)
        deploy_path = self._deployer_ingress(name, s.deployer_cidrs, tags, cluster_opts)

        if not s.auto_mode:
            # Without Auto Mode the platform's own controllers need nodes and the agent for Pod Identity.
            self.node_role_name, system_nodes = self._system_nodes(name, cluster, args)
            aws.eks.Addon(
                f"{name}-pod-identity-agent",
                cluster_name=self.name,
                addon_name="eks-pod-identity-agent",
                resolve_conflicts_on_update="OVERWRITE",
                tags=tags,
                opts=cluster_opts,
            )
            self._ebs_csi_driver(name, args.cluster_name, tags, cluster_opts)

        # Mountpoint for S3 serves model weights to predictors read-only. Its role starts with
        # no permissions; the ModelStore grants read access to exactly its bucket.
        self.mountpoint_role = aws.iam.Role(
            f"{name}-mountpoint-s3",
            assume_role_policy=iam.pod_identity_trust(
                cluster_name=args.cluster_name, namespace=ADDON_NAMESPACE, service_account=MOUNTPOINT_SERVICE_ACCOUNT
            ),
            description="Mountpoint S3 CSI driver: read-only access to the model store",
            tags=tags,
            opts=cluster_opts,
        )
        aws.eks.Addon(
            f"{name}-mountpoint-s3-csi",
            cluster_name=self.name,
            addon_name="aws-mountpoint-s3-csi-driver",
            resolve_conflicts_on_update="OVERWRITE",
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(
                    role_arn=self.mountpoint_role.arn, service_account=MOUNTPOINT_SERVICE_ACCOUNT
                )
            ],
            tags=tags,
            opts=cluster_opts,
        )

        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=cluster.kubeconfig_json,
            enable_server_side_apply=True,
            # Every Kubernetes object goes through the deploy path: the runner's way in comes first.
            opts=pulumi.ResourceOptions(parent=self, depends_on=deploy_path),
        )
        if s.auto_mode:
            # Auto Mode enforces NetworkPolicies only once this controller switch is on.
            switch = isolation.network_policy_controller_config_map()
            k8s.core.v1.ConfigMap(
                f"{name}-network-policy-controller",
                metadata=switch["metadata"],
                data=switch["data"],
                opts=pulumi.ResourceOptions(parent=self, provider=self.provider),
            )
        self.load_balancer_controller = None
        if not s.auto_mode:
            self.load_balancer_controller = load_balancer_controller(
                name,
                cluster_name=self.name,
                vpc_id=args.vpc_id,
                region=args.region,
                provider=self.provider,
                tags=tags,
                parent=self,
                after=[system_nodes],
            )
        self.register_outputs({"name": self.name, "kubeconfig": self.kubeconfig})

    def _deployer_ingress(
        self, name: str, cidrs: list[str], tags: dict[str, str], opts: pulumi.ResourceOptions
    ) -> list[pulumi.Resource]:
        """The deploy path into the VPC: the private endpoint's network interfaces carry the cluster
        security group, which admits only its own members; a runner elsewhere in the VPC needs 443
        (EKS user guide, "Cluster API server endpoint": "ensure that your Amazon EKS control plane
        security group contains rules to allow ingress traffic on port 443 from your bastion host")."""
        return [
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-deployer-{i}",
                security_group_id=self.node_security_group_id,
                cidr_ipv4=cidr,
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                description="pulumi and kubectl from the deploy runner's subnet to the private API endpoint",
                tags=tags,
                opts=opts,
            )
            for i, cidr in enumerate(cidrs)
        ]

    def _service_role(
        self, name: str, auto_mode: bool, tags: dict[str, str]
    ) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
        """The cluster role with the policies pulumi_eks would attach, plus (Auto Mode) the custom-tags
        policy the GPU NodeClass's `spec.tags` needs; the cluster waits for all of them."""
        opts = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-service-role",
            # Auto Mode tags its sessions (eks:eks-cluster-name), so it needs sts:TagSession too.
            assume_role_policy=iam.document(
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                }
            ),
            description="EKS cluster role",
            tags=tags,
            opts=opts,
        )
        role_opts = pulumi.ResourceOptions(parent=role)
        policies = iam.CLUSTER_POLICIES + (iam.AUTO_MODE_POLICIES if auto_mode else ())
        ready: list[pulumi.Resource] = [
            aws.iam.RolePolicyAttachment(
                f"{name}-service-role-{policy}",
                role=role.name,
                policy_arn=f"arn:aws:iam::aws:policy/{policy}",
                opts=role_opts,
            )
            for policy in policies
        ]
        if auto_mode:
            ready.append(
                aws.iam.RolePolicy(
                    f"{name}-custom-tags", role=role.id, policy=iam.auto_mode_custom_tags_policy(), opts=role_opts
                )
            )
        return role, ready

    def _ebs_csi_driver(self, name: str, cluster_name: str, tags: dict[str, str], opts: pulumi.ResourceOptions) -> None:
        """Persistent volumes (Prometheus, Alertmanager) need an EBS driver; Auto Mode has its own."""
        trust = iam.pod_identity_trust(
            cluster_name=cluster_name, namespace=ADDON_NAMESPACE, service_account=EBS_CSI_SERVICE_ACCOUNT
        )
        role = aws.iam.Role(f"{name}-ebs-csi", assume_role_policy=trust, tags=tags, opts=opts)
        aws.iam.RolePolicyAttachment(
            f"{name}-ebs-csi",
            role=role.name,
            policy_arn="arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy",
            opts=pulumi.ResourceOptions(parent=role),
        )
        aws.eks.Addon(
            f"{name}-ebs-csi",
            cluster_name=self.name,
            addon_name="aws-ebs-csi-driver",
            resolve_conflicts_on_update="OVERWRITE",
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(role_arn=role.arn, service_account=EBS_CSI_SERVICE_ACCOUNT)
            ],
            tags=tags,
            opts=opts,
        )

    def _system_nodes(
        self, name: str, cluster: eks.Cluster, args: ClusterArgs
    ) -> tuple[pulumi.Output[str], aws.eks.NodeGroup]:
        """A small on-demand managed node group for controllers (Karpenter, operators).
        EKS creates its access entry itself when the cluster uses API authentication."""
        opts = pulumi.ResourceOptions(parent=cluster)
        role = aws.iam.Role(
            f"{name}-system-nodes",
            assume_role_policy=iam.service_trust("ec2.amazonaws.com"),
            tags=args.tags,
            opts=opts,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-system-nodes-{policy}",
                role=role.name,
                policy_arn=f"arn:aws:iam::aws:policy/{policy}",
                opts=pulumi.ResourceOptions(parent=role),
            )
            for policy in (
                "AmazonEKSWorkerNodePolicy",
                "AmazonEKS_CNI_Policy",
                "AmazonEC2ContainerRegistryReadOnly",
                "AmazonSSMManagedInstanceCore",
            )
        ]
        group = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=self.name,
            node_role_arn=role.arn,
            subnet_ids=args.private_subnet_ids,
            instance_types=["m7i.large", "m6i.large"],
            capacity_type="ON_DEMAND",
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(min_size=2, desired_size=2, max_size=4),
            labels={"node-role": "system"},
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=cluster, depends_on=attachments),
        )
        return role.name, group
