"""What a first `pulumi up` on a real account needs beyond a valid graph: a way to the private API
endpoint, a controller behind each load balancer class, and a device plugin on GPU nodes whose AMI
lacks one. Each passes under mocks and fails on a real cluster, so the pack checks it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from . import k8s
from .base import Subject, of_kind, stack_policy, subject_of
from .cluster import AWS_EKS_CLUSTER, EKS_COMPONENT
from .gpu import NODE_POOL, is_gpu_pool
from .supply_chain import HELM_CHART, HELM_RELEASE

SERVICE = ("", "Service")
EC2_NODE_CLASS = ("karpenter.k8s.aws", "EC2NodeClass")
INGRESS_RULES = {
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    "aws:ec2/securityGroupRule:SecurityGroupRule",
}
HTTPS = 443
LBC_CLASS, AUTO_MODE_CLASS = "service.k8s.aws/nlb", "eks.amazonaws.com/nlb"
LBC_CHART = "aws-load-balancer-controller"
# Charts that run the NVIDIA device plugin: the plugin's own, or NVIDIA's GPU operator, which deploys it.
DEVICE_PLUGIN_CHARTS = ("nvidia-device-plugin", "gpu-operator")
# Bottlerocket's NVIDIA variants include the plugin; the AL2023 NVIDIA AMIs do not (EKS user guide,
# "Install Kubernetes device plugin for GPUs").
AMI_FAMILIES_WITH_PLUGIN = ("bottlerocket@",)


def _charts(subjects: list[Subject]) -> set[str]:
    """Base names of the Helm charts the stack installs (`oci://.../karpenter` -> `karpenter`)."""
    return {
        str(k8s.get(s.props, "chart", default="")).rstrip("/").rsplit("/", 1)[-1]
        for s in subjects
        if s.resource_type in (HELM_RELEASE, HELM_CHART)
    }


def _public_endpoint(subject: Subject) -> bool | None:
    """Whether an EKS cluster's API is public (None: not a cluster). The EKS API defaults to public."""
    if subject.resource_type == EKS_COMPONENT:
        return k8s.get(subject.props, "endpointPublicAccess", default=True, unknown=True) is not False
    if subject.resource_type == AWS_EKS_CLUSTER:
        return k8s.get(subject.props, "vpcConfig", "endpointPublicAccess", default=True, unknown=True) is not False
    return None


def _admits_https(subject: Subject) -> bool:
    props = subject.props
    if subject.resource_type not in INGRESS_RULES:
        return False
    if subject.resource_type.startswith("aws:ec2/") and k8s.get(props, "type", unknown="ingress") != "ingress":
        return False
    protocol = str(k8s.get(props, "ipProtocol", default=k8s.get(props, "protocol", unknown="tcp"), unknown="tcp"))
    if protocol in ("-1", "all"):
        return True
    low, high = k8s.get(props, "fromPort", unknown=HTTPS), k8s.get(props, "toPort", unknown=HTTPS)
    return (
        protocol.lower() in ("tcp", "6")
        and isinstance(low, int | float)
        and isinstance(high, int | float)
        and low <= HTTPS <= high
    )


def _check_deploy_path(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    subjects = [subject_of(r) for r in resources]
    if any(_admits_https(s) for s in subjects):
        return
    for cluster in subjects:
        if _public_endpoint(cluster) is False:
            yield (
                f"{cluster.label}: the API endpoint is private and no security group rule admits 443, so only "
                "nodes reach it; pulumi (and CI) outside the cluster security group cannot create a single "
                "Kubernetes object",
                cluster.urn,
            )


private_endpoint_deploy_path = stack_policy(
    name="private-endpoint-has-a-deploy-path",
    description=(
        "An EKS cluster whose API is private only comes with a way in for the deployer: an ingress rule on 443 "
        "(EKS user guide, 'Cluster API server endpoint': a private endpoint answers only its VPC or a connected "
        "network, through the cluster security group)."
    ),
    remediation=(
        "Set cluster.deployerCidrs to the subnets your runner lives in (components/cluster.py admits them on 443), "
        "or cluster.endpointAccess public-allowlist with cluster.publicAccessCidrs."
    ),
    check=_check_deploy_path,
)


def _auto_mode(subject: Subject) -> bool:
    if subject.resource_type == EKS_COMPONENT:
        return k8s.get(subject.props, "autoMode", "enabled", unknown=True) is True
    if subject.resource_type == AWS_EKS_CLUSTER:
        return k8s.get(subject.props, "computeConfig", "enabled", unknown=True) is True
    return False


def _check_load_balancer_classes(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    subjects = [subject_of(r) for r in resources]
    controller = LBC_CHART in _charts(subjects)
    auto_mode = any(_auto_mode(s) for s in subjects)
    for service in of_kind(resources, *SERVICE):
        wanted = k8s.get(service.props, "spec", "loadBalancerClass", unknown=None)
        if wanted == LBC_CLASS and not controller:
            yield (
                f"{service.label}: loadBalancerClass {LBC_CLASS} but no AWS Load Balancer Controller is installed; "
                "the Service never gets an address and pulumi times out waiting for it",
                service.urn,
            )
        elif wanted == AUTO_MODE_CLASS and not auto_mode:
            yield (
                f"{service.label}: loadBalancerClass {AUTO_MODE_CLASS} is served only by EKS Auto Mode, which this "
                "cluster does not run",
                service.urn,
            )


load_balancer_controller = stack_policy(
    name="load-balancer-class-has-its-controller",
    description=(
        f"A Service with loadBalancerClass {LBC_CLASS} comes with the AWS Load Balancer Controller chart, one with "
        f"{AUTO_MODE_CLASS} with an Auto Mode cluster."
    ),
    remediation=(
        "Keep components/load_balancer_controller.py installed whenever cluster.autoMode is false, and let "
        "components/gateway/objects.py pick the class from the cluster mode."
    ),
    check=_check_load_balancer_classes,
)


def _check_device_plugin(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    if set(DEVICE_PLUGIN_CHARTS) & _charts([subject_of(r) for r in resources]):
        return
    node_classes = {n.k8s_name: n for n in of_kind(resources, *EC2_NODE_CLASS)}
    for pool in of_kind(resources, *NODE_POOL):
        if not is_gpu_pool(pool):
            continue
        ref = k8s.get(pool.props, "spec", "template", "spec", "nodeClassRef", default={}, unknown={})
        if (k8s.get(ref, "group", unknown=None), k8s.get(ref, "kind", unknown=None)) != EC2_NODE_CLASS:
            continue  # Auto Mode's NodeClass brings the plugin
        node_class = node_classes.get(str(k8s.get(ref, "name", unknown="")))
        if node_class is None:
            continue
        terms = k8s.items(node_class.props, "spec", "amiSelectorTerms")
        aliases = [str(k8s.get(t, "alias", default="", unknown="")) for t in terms]
        if aliases and all(a.startswith(AMI_FAMILIES_WITH_PLUGIN) for a in aliases):
            continue
        yield (
            f"{pool.label}: GPU nodes from EC2NodeClass {node_class.k8s_name} (AMI {aliases or 'by id or name'}) "
            "need the NVIDIA device plugin, and the stack installs none: no node advertises nvidia.com/gpu and "
            "every GPU pod stays Pending",
            pool.urn,
        )


gpu_device_plugin = stack_policy(
    name="gpu-node-pools-advertise-gpus",
    description=(
        "GPU NodePools on an AMI without the NVIDIA device plugin (AL2023 NVIDIA, or an AMI picked by id) come with "
        "the device plugin chart; Bottlerocket and Auto Mode ship it (EKS user guide, 'Install Kubernetes device "
        "plugin for GPUs')."
    ),
    remediation=(
        "Keep gpuCapacity.nodeClass.amiAlias on al2023@ with the device plugin release of components/gpu_capacity.py, "
        "or use a bottlerocket@ alias."
    ),
    check=_check_device_plugin,
)

POLICIES = [private_endpoint_deploy_path, load_balancer_controller, gpu_device_plugin]
