"""The VPC keeps a record of who talked to whom: flow logs of all traffic, so an incident (a pod
calling out, a scan from inside) can be traced after the fact."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from typing import Any

from . import k8s
from .base import Subject, resource_policy, stack_policy
from .links import refers_to

VPC = "aws:ec2/vpc:Vpc"
FLOW_LOG = "aws:ec2/flowLog:FlowLog"


def _check_flow_logs(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    logs = [r for r in resources if r.resource_type == FLOW_LOG]
    for vpc in (r for r in resources if r.resource_type == VPC):
        mine = [log for log in logs if refers_to(log, "vpcId", vpc)]
        # ACCEPT or REJECT alone records half the story (VPC User Guide, "Flow log records": traffic type).
        kinds = {k8s.get(log.props, "trafficType", unknown="ALL") for log in mine}
        if "ALL" not in kinds:
            shown = sorted(str(k) for k in kinds) or "no flow log"
            yield f"VPC '{vpc.name}': traffic is not logged in full ({shown}; trafficType ALL wanted)", vpc.urn


vpc_flow_logs = stack_policy(
    name="vpc-flow-logs-capture-all-traffic",
    description=(
        "Every VPC has a flow log with trafficType ALL (accepted and rejected flows), the record an incident "
        "response starts from."
    ),
    remediation=(
        "Keep network.flowLogs true (components/network.py); a throwaway dev stack without flow logs disables "
        "this policy in policies/config/dev.json."
    ),
    check=_check_flow_logs,
)

# --- security groups ---------------------------------------------------------------------------

INGRESS_RULES = {
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    "aws:ec2/securityGroupRule:SecurityGroupRule",
}


def _world(cidr: Any) -> bool:
    try:
        return isinstance(cidr, str) and ipaddress.ip_network(cidr, strict=False).prefixlen == 0
    except ValueError:
        return False


def _check_ingress_ranges(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if subject.resource_type not in INGRESS_RULES:
        return
    if subject.resource_type.startswith("aws:ec2/") and k8s.get(subject.props, "type", unknown="ingress") != "ingress":
        return
    cidrs = [
        k8s.get(subject.props, "cidrIpv4", unknown=None),
        k8s.get(subject.props, "cidrIpv6", unknown=None),
        *k8s.known_items(subject.props, "cidrBlocks"),
        *k8s.known_items(subject.props, "ipv6CidrBlocks"),
    ]
    open_to = [c for c in cidrs if _world(c)]
    if open_to:
        yield f"{subject.label}: admits {open_to} (every address) to port(s) {k8s.get(subject.props, 'fromPort', unknown='?')}"


ingress_from_named_ranges = resource_policy(
    name="security-groups-admit-named-ranges",
    description=(
        "Security group ingress rules (the deployer's path to the private API endpoint) admit named CIDR ranges, "
        "never 0.0.0.0/0 or ::/0: a rule open to every address makes the 'private' endpoint reachable from anything "
        "that routes into the VPC."
    ),
    remediation="List the deploy runners' subnets in cluster.deployerCidrs (components/cluster.py opens 443 to them).",
    check=_check_ingress_ranges,
)

POLICIES = [vpc_flow_logs, ingress_from_named_ranges]
