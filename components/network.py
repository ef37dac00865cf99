"""Network: a VPC with public and private subnets over >= 2 zones, NAT, S3 endpoint, flow logs."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from contract.settings.network import NetworkSettings

from . import iam
from .naming import type_token


@dataclass(frozen=True)
class SubnetPlan:
    zone: str
    public_cidr: str
    private_cidr: str


def plan_subnets(cidr: str, zones: list[str]) -> list[SubnetPlan]:
    """Split the VPC: a large private subnet per zone (pods and nodes live there) and a
    small public one (load balancers and NAT only).

    The VPC is cut into 8 equal blocks; zone i gets private block i, and the last block
    is split into 8 small public subnets. That supports up to 7 zones.
    """
    vpc = ipaddress.IPv4Network(cidr)
    blocks = list(vpc.subnets(prefixlen_diff=3))
    publics = list(blocks[-1].subnets(prefixlen_diff=3))
    if len(zones) > len(blocks) - 1:
        raise ValueError(f"at most {len(blocks) - 1} zones fit this plan, got {len(zones)}")
    return [SubnetPlan(zone, str(publics[i]), str(blocks[i])) for i, zone in enumerate(zones)]


@dataclass(frozen=True)
class NetworkArgs:
    settings: NetworkSettings
    cluster_name: str
    tags: dict[str, str]


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    private_subnet_ids: list[pulumi.Output[str]]
    public_subnet_ids: list[pulumi.Output[str]]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("network", "Network"), name, None, opts)
        s, tags = args.settings, args.tags
        child = pulumi.ResourceOptions(parent=self)

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=s.cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**tags, "Name": f"{name}-vpc"},
            opts=child,
        )
        vpc_opts = pulumi.ResourceOptions(parent=vpc)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={**tags, "Name": f"{name}-igw"}, opts=vpc_opts)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags={**tags, "Name": f"{name}-public"},
            opts=vpc_opts,
        )

        plans = plan_subnets(s.cidr, s.availability_zones)
        discovery = {f"kubernetes.io/cluster/{args.cluster_name}": "shared"}
        public_subnets, private_subnets, nat_ids = [], [], []
        for plan in plans:
            public = aws.ec2.Subnet(
                f"{name}-public-{plan.zone}",
                vpc_id=vpc.id,
                cidr_block=plan.public_cidr,
                availability_zone=plan.zone,
                map_public_ip_on_launch=False,
                tags={**tags, **discovery, "Name": f"{name}-public-{plan.zone}", "kubernetes.io/role/elb": "1"},
                opts=vpc_opts,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{plan.zone}", subnet_id=public.id, route_table_id=public_rt.id, opts=vpc_opts
            )
            public_subnets.append(public)
            if s.nat_gateways == "per-az" or not nat_ids:
                eip = aws.ec2.Eip(
                    f"{name}-nat-{plan.zone}",
                    domain="vpc",
                    tags={**tags, "Name": f"{name}-nat-{plan.zone}"},
                    opts=vpc_opts,
                )
                nat = aws.ec2.NatGateway(
                    f"{name}-nat-{plan.zone}",
                    allocation_id=eip.id,
                    subnet_id=public.id,
                    tags={**tags, "Name": f"{name}-nat-{plan.zone}"},
                    opts=pulumi.ResourceOptions(parent=vpc, depends_on=[igw]),
                )
                nat_ids.append(nat.id)

        private_route_tables = []
        for i, plan in enumerate(plans):
            # Per-AZ NAT keeps a zone's egress inside the zone; `single` shares the first.
            nat_id = nat_ids[i] if s.nat_gateways == "per-az" else nat_ids[0]
            rt = aws.ec2.RouteTable(
                f"{name}-private-{plan.zone}",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat_id)],
                tags={**tags, "Name": f"{name}-private-{plan.zone}"},
                opts=vpc_opts,
            )
            private_route_tables.append(rt)
            private = aws.ec2.Subnet(
                f"{name}-private-{plan.zone}",
                vpc_id=vpc.id,
                cidr_block=plan.private_cidr,
                availability_zone=plan.zone,
                tags={
                    **tags,
                    **discovery,
                    "Name": f"{name}-private-{plan.zone}",
                    "kubernetes.io/role/internal-elb": "1",
                    # Karpenter's EC2NodeClass finds the subnets for GPU nodes by this tag.
                    "karpenter.sh/discovery": args.cluster_name,
                },
                opts=vpc_opts,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{plan.zone}", subnet_id=private.id, route_table_id=rt.id, opts=vpc_opts
            )
            private_subnets.append(private)

        # Model weights come from S3: a gateway endpoint keeps that traffic off the NAT bill.
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{s.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[rt.id for rt in private_route_tables],
            tags={**tags, "Name": f"{name}-s3"},
            opts=vpc_opts,
        )
        if s.flow_logs:
            self._flow_logs(name, vpc, s, tags)

        self.vpc_id = vpc.id
        self.private_subnet_ids = [sn.id for sn in private_subnets]
        self.public_subnet_ids = [sn.id for sn in public_subnets]
        self.nat_gateway_count = len(nat_ids)
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "privateSubnetIds": self.private_subnet_ids,
                "publicSubnetIds": self.public_subnet_ids,
            }
        )

    def _flow_logs(self, name: str, vpc: aws.ec2.Vpc, s: NetworkSettings, tags: dict[str, str]) -> None:
        opts = pulumi.ResourceOptions(parent=vpc)
        group = aws.cloudwatch.LogGroup(
            f"{name}-flow-logs", retention_in_days=s.flow_log_retention_days, tags=tags, opts=opts
        )
        role = aws.iam.Role(
            f"{name}-flow-logs",
            assume_role_policy=iam.flow_logs_trust(),
            tags=tags,
            opts=opts,
        )
        aws.iam.RolePolicy(
            f"{name}-flow-logs",
            role=role.id,
            policy=group.arn.apply(
                lambda arn: iam.document(
                    {
                        "Effect": "Allow",
                        "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                        "Resource": [arn, f"{arn}:*"],
                    }
                )
            ),
            opts=opts,
        )
        aws.ec2.FlowLog(
            f"{name}-flow-logs",
            vpc_id=vpc.id,
            traffic_type="ALL",
            log_destination_type="cloud-watch-logs",
            log_destination=group.arn,
            iam_role_arn=role.arn,
            max_aggregation_interval=60,
            tags=tags,
            opts=opts,
        )
