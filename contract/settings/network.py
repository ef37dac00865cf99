"""Network settings: the VPC address space, its zones and NAT layout."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator

from .base import Section

# /16../20: Auto Mode and Karpenter give every pod a VPC address; smaller VPCs run dry.
MIN_PREFIX, MAX_PREFIX = 16, 20
# The subnet plan cuts the VPC into 8 blocks: one private block per zone, one for every public subnet.
MAX_ZONES = 7
_AZ = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$")


class NetworkSettings(Section):
    cidr: str = "10.40.0.0/16"
    availability_zones: list[str] = Field(default_factory=lambda: ["us-west-2a", "us-west-2b", "us-west-2c"])
    # `per-az` survives a zone outage; `single` saves two NAT gateways where that is acceptable (dev).
    nat_gateways: Literal["single", "per-az"] = "per-az"
    flow_logs: bool = True
    flow_log_retention_days: Literal[1, 3, 5, 7, 14, 30, 60, 90, 180, 365] = 30

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            network = ipaddress.IPv4Network(value, strict=True)
        except ValueError as exc:
            raise ValueError(f"must be an IPv4 network in CIDR form like 10.40.0.0/16 ({exc})") from None
        if not MIN_PREFIX <= network.prefixlen <= MAX_PREFIX:
            raise ValueError(f"must be between /{MIN_PREFIX} and /{MAX_PREFIX} (pods take VPC addresses)")
        if not network.is_private:
            raise ValueError("must be a private (RFC 1918) range")
        return value

    @field_validator("availability_zones")
    @classmethod
    def _zones(cls, zones: list[str]) -> list[str]:
        if len(zones) < 2:
            raise ValueError("must list at least 2 availability zones (EKS requires subnets in 2 AZs)")
        if len(zones) > MAX_ZONES:
            raise ValueError(
                f"must list at most {MAX_ZONES} availability zones (the VPC is cut into 8 blocks: "
                "one private block per zone, one for the public subnets)"
            )
        if len(set(zones)) != len(zones):
            raise ValueError("must not repeat a zone")
        for zone in zones:
            if not _AZ.match(zone):
                raise ValueError(f"entry {zone!r} is not an availability zone name like us-west-2a")
        regions = {zone[:-1] for zone in zones}
        if len(regions) != 1:
            raise ValueError(f"must all be in one region, got {sorted(regions)}")
        return zones

    @property
    def region(self) -> str:
        return self.availability_zones[0][:-1]
