"""Cluster settings: Kubernetes version, who administers it, how its API is reached."""

from __future__ import annotations

import ipaddress
import re

from pydantic import Field, field_validator

from .base import Section

_VERSION = re.compile(r"^1\.(\d{2})$")
MIN_MINOR = 30  # oldest minor in EKS standard support with Auto Mode
_PRINCIPAL = re.compile(r"^arn:aws[a-z-]*:(iam|sts)::\d{12}:(role|user|assumed-role)/[\w+=,.@/-]+$")
REQUIRED_LOGS = ("api", "audit", "authenticator")
ALL_LOGS = ("api", "audit", "authenticator", "controllerManager", "scheduler")


class ClusterSettings(Section):
    kubernetes_version: str = "1.34"
    auto_mode: bool = True
    # Principals that get AmazonEKSClusterAdminPolicy through an access entry.
    admin_principal_arns: list[str] = Field(default_factory=list)
    # Empty = the API endpoint is private only. Public access needs an explicit allowlist.
    public_access_cidrs: list[str] = Field(default_factory=list)
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
        return cidrs

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
