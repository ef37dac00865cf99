"""Cluster settings: Kubernetes version, who administers it, how its API is reached."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import RuleViolation, Section

_VERSION = re.compile(r"^1\.(\d{2})$")
_PRINCIPAL = re.compile(r"^arn:aws[a-z-]*:(iam|sts)::\d{12}:(role|user|assumed-role)/[\w+=,.@/-]+$")
REQUIRED_LOGS = ("api", "audit", "authenticator")


@dataclass(frozen=True)
class EksVersion:
    released: date
    end_of_standard_support: date
    end_of_extended_support: date


# The EKS release calendar (EKS user guide, "Understand the Kubernetes version lifecycle on EKS":
# 14 months of standard support, then 12 of extended support at an extra cost per cluster hour),
# as published on 2026-12-01. A minor EKS does not offer cannot be created; add a row when EKS
# releases one (Auto Mode and Karpenter 1.14 support every row listed here).
EKS_VERSIONS = {
    "1.30": EksVersion(date(2024, 5, 23), date(2025, 7, 23), date(2026, 7, 23)),
    "1.31": EksVersion(date(2024, 9, 26), date(2025, 11, 26), date(2026, 11, 26)),
    "1.32": EksVersion(date(2025, 1, 23), date(2026, 3, 23), date(2027, 3, 23)),
    "1.33": EksVersion(date(2025, 5, 29), date(2026, 7, 29), date(2027, 7, 29)),
    "1.34": EksVersion(date(2025, 10, 2), date(2026, 12, 2), date(2027, 12, 2)),
    "1.35": EksVersion(date(2026, 1, 27), date(2027, 3, 27), date(2028, 3, 27)),
}
# The oldest minor of the calendar: below it the message says "newer", not "unknown".
MIN_MINOR = min(int(version.split(".")[1]) for version in EKS_VERSIONS)
# How early a stack hears that its version's standard support ends.
SUPPORT_WARNING = timedelta(days=60)
ALL_LOGS = ("api", "audit", "authenticator", "controllerManager", "scheduler")


class ClusterSettings(Section):
    kubernetes_version: str = "1.35"
    # Past standard support EKS charges extended support per cluster hour: only on purpose.
    allow_extended_support: bool = False
    auto_mode: bool = True
    # Principals that get AmazonEKSClusterAdminPolicy through an access entry.
    admin_principal_arns: list[str] = Field(default_factory=list)
    # How whoever runs `pulumi up` (you, CI) reaches the Kubernetes API, decided before anything is
    # created. With public access off, "all traffic to your cluster API server must come from within
    # your cluster's VPC or a connected network" (EKS user guide, "Cluster API server endpoint").
    # `private`: only from `deployerCidrs` inside the VPC (a runner in the private subnets);
    # `public-allowlist`: also from the internet, only from `publicAccessCidrs`.
    endpoint_access: Literal["private", "public-allowlist"] = "private"
    # The deployer's and CI's egress ranges; only with endpointAccess public-allowlist.
    public_access_cidrs: list[str] = Field(default_factory=list)
    # Ranges inside the VPC that pulumi runs from (a self-hosted runner's subnets): the cluster
    # security group lets them reach the private endpoint on 443. Required with endpointAccess private.
    deployer_cidrs: list[str] = Field(default_factory=list)
    control_plane_logs: list[str] = Field(default_factory=lambda: list(REQUIRED_LOGS))
    deletion_protection: bool = True

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, value: str) -> str:
        match = _VERSION.match(value)
        if not match:
            raise ValueError('must be a Kubernetes minor version like "1.34" (quote it in YAML)')
        if int(match.group(1)) < MIN_MINOR:
            raise ValueError(f"must be 1.{MIN_MINOR} or newer")
        if value not in EKS_VERSIONS:
            raise ValueError(f"is not a version EKS offers; known: {list(EKS_VERSIONS)}")
        return value

    @field_validator("admin_principal_arns")
    @classmethod
    def _principals(cls, arns: list[str]) -> list[str]:
        for arn in arns:
            if not _PRINCIPAL.match(arn):
                raise ValueError(f"entry {arn!r} is not an IAM role or user ARN")
        return arns

    @field_validator("public_access_cidrs")
    @classmethod
    def _public(cls, cidrs: list[str]) -> list[str]:
        for cidr in cidrs:
            try:
                network = ipaddress.ip_network(cidr, strict=True)
            except ValueError:
                raise ValueError(f"entry {cidr!r} is not a CIDR") from None
            if network.prefixlen == 0:
                raise ValueError(f"entry {cidr!r} opens the API to the whole internet; list your egress ranges")
        networks = [ipaddress.ip_network(c) for c in cidrs]
        v4 = [n for n in networks if isinstance(n, ipaddress.IPv4Network)]
        v6 = [n for n in networks if isinstance(n, ipaddress.IPv6Network)]
        # collapse_addresses takes one address family at a time.
        for union in (list(ipaddress.collapse_addresses(v4)), list(ipaddress.collapse_addresses(v6))):
            if any(n.prefixlen == 0 for n in union):
                raise ValueError("entries together cover the whole internet; list your egress ranges")
        return cidrs

    @field_validator("deployer_cidrs")
    @classmethod
    def _deployers(cls, cidrs: list[str]) -> list[str]:
        for cidr in cidrs:
            try:
                ipaddress.IPv4Network(cidr, strict=True)
            except ValueError:
                raise ValueError(f"entry {cidr!r} is not an IPv4 CIDR") from None
        return cidrs

    @model_validator(mode="after")
    def _deploy_path(self) -> ClusterSettings:
        if self.endpoint_access == "public-allowlist" and not self.public_access_cidrs:
            raise RuleViolation(
                "publicAccessCidrs",
                [],
                "must list the egress ranges of everyone who runs pulumi (you, CI) with endpointAccess "
                "'public-allowlist', e.g. pulumi config set --path 'cluster.publicAccessCidrs[0]' "
                "\"$(curl -s https://checkip.amazonaws.com)/32\"; or set endpointAccess to 'private'",
            )
        if self.endpoint_access == "private" and self.public_access_cidrs:
            raise RuleViolation(
                "publicAccessCidrs",
                self.public_access_cidrs,
                "must be empty with endpointAccess 'private' (the endpoint has no public side); set "
                "endpointAccess to 'public-allowlist' to use them",
            )
        if self.endpoint_access == "private" and not self.deployer_cidrs:
            raise RuleViolation(
                "deployerCidrs",
                [],
                "must name the ranges inside the VPC that pulumi runs from (a self-hosted runner in the "
                "private subnets, README 'Deploy') with endpointAccess 'private': a private endpoint answers "
                "only the VPC; or set endpointAccess to 'public-allowlist' with publicAccessCidrs",
            )
        return self

    @field_validator("control_plane_logs")
    @classmethod
    def _logs(cls, logs: list[str]) -> list[str]:
        unknown = sorted(set(logs) - set(ALL_LOGS))
        if unknown:
            raise ValueError(f"has unknown log types {unknown}; known: {list(ALL_LOGS)}")
        missing = [log for log in REQUIRED_LOGS if log not in logs]
        if missing:
            raise ValueError(f"must include {list(REQUIRED_LOGS)} (missing {missing})")
        return logs

    def deployer_problems(self, vpc_cidr: str) -> list[str]:
        """Deployer ranges lie inside the VPC: it is the only network this stack creates a route to
        (a VPN, peering or transit gateway would need routes and a network of its own)."""
        vpc = ipaddress.IPv4Network(vpc_cidr)
        return [
            f"cluster.deployerCidrs[{i}] ({cidr!r}) must lie within network.cidr ({vpc_cidr}): pulumi must run "
            "inside the VPC (a runner in its private subnets) to reach a private endpoint"
            for i, cidr in enumerate(self.deployer_cidrs)
            if not ipaddress.IPv4Network(cidr).subnet_of(vpc)
        ]

    def support_problems(self, today: date) -> list[str]:
        """Errors: a version past EKS standard support (unless extended support is allowed), or
        past extended support (EKS upgrades such clusters itself)."""
        v, key = EKS_VERSIONS[self.kubernetes_version], "cluster.kubernetesVersion"
        if today > v.end_of_extended_support:
            return [
                f"{key} ({self.kubernetes_version!r}) left EKS extended support on {v.end_of_extended_support}; "
                f"upgrade to one of {self.supported_versions(today)}"
            ]
        if today > v.end_of_standard_support and not self.allow_extended_support:
            return [
                f"{key} ({self.kubernetes_version!r}) left EKS standard support on {v.end_of_standard_support}; "
                f"upgrade to one of {self.supported_versions(today)}, or set cluster.allowExtendedSupport "
                "to pay for extended support"
            ]
        return []

    def support_warnings(self, today: date) -> list[str]:
        v = EKS_VERSIONS[self.kubernetes_version]
        if today <= v.end_of_standard_support <= today + SUPPORT_WARNING:
            return [
                f"cluster.kubernetesVersion ({self.kubernetes_version!r}) leaves EKS standard support on "
                f"{v.end_of_standard_support}; plan the upgrade to one of {self.supported_versions(today)}"
            ]
        return []

    @staticmethod
    def supported_versions(today: date) -> list[str]:
        return [k for k, v in EKS_VERSIONS.items() if v.released <= today <= v.end_of_standard_support]
