"""Gateway settings (`inference-platform:gateway`): how clients reach the models, who they
are, how much each may use, and how long a request may take."""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ..images import REDIS_IMAGE, repository_name
from ..images import parse as parse_image
from .base import RuleViolation, Section
from .errors import NAMESPACE

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_CLIENT = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
_QUANTITY = re.compile(r"^\d+(Ki|Mi)$")
_ACM_ARN = re.compile(r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[0-9a-f-]{36}$")

Unit = Literal["Second", "Minute", "Hour", "Day"]


class Limit(Section):
    """`limit` units (requests or tokens) per `unit` window, counted across every Envoy replica."""

    limit: int = Field(gt=0)
    unit: Unit


class ClientSettings(Section):
    # The client id: names its API key, is forwarded to the backend, keys its budgets.
    name: str
    requests: Limit
    # Total (input + output) tokens; charged after each response from the gateway's token count.
    tokens: Limit

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _CLIENT.match(value):
            raise ValueError("must be a lowercase DNS label of at most 40 characters")
        return value


class TimeoutSettings(Section):
    # The longest a request (including a whole streamed completion) may take end to end.
    request_seconds: int = Field(default=300, ge=10, le=3600)
    # The longest silence on a stream. A non-streamed completion is silent until it is done,
    # so it must finish within this window.
    stream_idle_seconds: int = Field(default=120, ge=5, le=3600)
    # How long an idle client connection stays open.
    connection_idle_seconds: int = Field(default=3600, ge=10, le=86400)

    @model_validator(mode="after")
    def _ordered(self) -> TimeoutSettings:
        if self.stream_idle_seconds > self.request_seconds:
            raise RuleViolation(
                "streamIdleSeconds",
                self.stream_idle_seconds,
                f"must be <= requestSeconds ({self.request_seconds}); the request deadline bounds every stream",
            )
        return self


# The first patched release of each Redis line for CVE-2025-49844 (Lua use-after-free, remote
# code execution; Redis security advisory: 8.2.2, 8.0.4, 7.4.6, 7.2.11, 6.2.20 and later are fixed;
# lines released after the fix, 8.4 on, never had it).
REDIS_PATCHED = {(8, 2): 2, (8, 0): 4, (7, 4): 6, (7, 2): 11, (6, 2): 20}
_REDIS_TAG = re.compile(r"^(\d+)\.(\d+)\.(\d+)(-[\w.]+)?$")


class RateLimitSettings(Section):
    # false: if the rate-limit service or Redis is unreachable, requests pass unlimited
    # (auth still applies). true: they fail with 500 until it is back.
    fail_closed: bool = False
    service_replicas: int = Field(default=2, ge=1, le=10)
    # Redis pods, each with a Sentinel beside it; the Sentinels promote a replica when the
    # master is gone (quorum: a majority). 3 survives the loss of any one pod or zone.
    redis_replicas: int = Field(default=3, ge=1, le=7)
    redis_image: str = REDIS_IMAGE

    @field_validator("redis_image")
    @classmethod
    def _image(cls, value: str) -> str:
        ref = parse_image(value)
        if ref is None or not ref.names_a_release:
            raise ValueError("must be pinned by tag or digest (never latest)")
        version = _REDIS_TAG.match(ref.tag or "") if repository_name(value) == "redis" else None
        if version:
            major, minor, patch = (int(v) for v in version.groups()[:3])
            fixed = REDIS_PATCHED.get((major, minor))
            if fixed is not None and patch < fixed:
                raise ValueError(
                    f"runs Redis {major}.{minor}.{patch}, which has CVE-2025-49844 (remote code "
                    "execution through Lua); use a patched release (7.4.6 or newer in the 7.4 line)"
                )
        return value

    @property
    def sentinel_quorum(self) -> int:
        return self.redis_replicas // 2 + 1


class GatewaySettings(Section):
    namespace: str = "ai-gateway"
    scheme: Literal["internal", "internet-facing"] = "internal"
    # ACM certificate: the NLB terminates TLS on 443. Required when internet-facing.
    tls_certificate_arn: str | None = None
    # Without an ACM certificate: Envoy terminates TLS on 443 with a certificate for the NLB's
    # hostname from the gateway's own CA (cert-manager); clients trust that CA. false is plain
    # HTTP, refused in prod (keys and prompts would cross the VPC in clear).
    cluster_tls: bool = True
    # Client CIDRs the NLB admits; empty admits any address that can route to it (refused in prod).
    source_ranges: list[str] = Field(default_factory=list)
    replicas: int = Field(default=2, ge=1, le=20)
    timeouts: TimeoutSettings = Field(default_factory=TimeoutSettings)
    # Per-connection buffer: the AI gateway buffers whole request bodies (long prompts).
    buffer_limit: str = "8Mi"
    rate_limit: RateLimitSettings = Field(default_factory=RateLimitSettings)
    clients: list[ClientSettings] = Field(min_length=1)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError("must be a Kubernetes namespace name (DNS label)")
        return value

    @field_validator("tls_certificate_arn")
    @classmethod
    def _arn(cls, value: str | None) -> str | None:
        if value is not None and not _ACM_ARN.match(value):
            raise ValueError("must be an ACM certificate ARN")
        return value

    @field_validator("source_ranges")
    @classmethod
    def _ranges(cls, ranges: list[str]) -> list[str]:
        for cidr in ranges:
            try:
                ipaddress.ip_network(cidr, strict=True)
            except ValueError:
                raise ValueError(f"entry {cidr!r} is not a CIDR block") from None
        return ranges

    @field_validator("buffer_limit")
    @classmethod
    def _buffer(cls, value: str) -> str:
        if not _QUANTITY.match(value):
            raise ValueError('must be a size like "512Ki" or "8Mi"')
        return value

    @model_validator(mode="after")
    def _rules(self) -> GatewaySettings:
        names = [c.name for c in self.clients]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise RuleViolation("clients", names, f"repeats client names {dupes}; each client has one key")
        if self.scheme == "internet-facing" and self.tls_certificate_arn is None:
            raise RuleViolation(
                "tlsCertificateArn",
                None,
                "is required when scheme is internet-facing (API keys must not cross the internet in clear)",
            )
        return self

    @property
    def tls_mode(self) -> Literal["acm", "cluster", "none"]:
        """Who terminates TLS: the NLB (ACM), Envoy (the gateway's CA), or nobody."""
        if self.tls_certificate_arn:
            return "acm"
        return "cluster" if self.cluster_tls else "none"

    @property
    def url_scheme(self) -> str:
        return "http" if self.tls_mode == "none" else "https"


def gateway_problems(settings: Any) -> list[str]:
    """Rules between the gateway and the rest of the stack; each names the key to change."""
    gateway, serving = settings.gateway, settings.serving
    problems: list[str] = []
    needed = gateway.timeouts.request_seconds + serving.drain_seconds
    if serving.termination_grace_period_seconds < needed:
        problems.append(
            f"{NAMESPACE}:serving.terminationGracePeriodSeconds ({serving.termination_grace_period_seconds}) must be "
            f">= gateway.timeouts.requestSeconds ({gateway.timeouts.request_seconds}) + serving.drainSeconds "
            f"({serving.drain_seconds}) = {needed}, or scale-in cuts requests the gateway still allows"
        )
    taken = {
        "serving.namespace": serving.namespace,
        "serving.kserveNamespace": serving.kserve_namespace,
        "Envoy Gateway": "envoy-gateway-system",
        "Envoy AI Gateway": "envoy-ai-gateway-system",
    }
    for owner, namespace in taken.items():
        if gateway.namespace == namespace:
            problems.append(
                f"{NAMESPACE}:gateway.namespace ({gateway.namespace!r}) is already the namespace of {owner}; "
                "the gateway's routes, keys and policies need their own"
            )
    if settings.environment == "prod":
        if gateway.replicas < 2:
            problems.append(
                f"{NAMESPACE}:gateway.replicas ({gateway.replicas}) must be >= 2 in a prod stack "
                "(no single Envoy on the request path)"
            )
        if gateway.rate_limit.service_replicas < 2:
            problems.append(
                f"{NAMESPACE}:gateway.rateLimit.serviceReplicas ({gateway.rate_limit.service_replicas}) must be >= 2 "
                "in a prod stack (the rate-limit service is called on every request)"
            )
        if gateway.rate_limit.redis_replicas < 3:
            problems.append(
                f"{NAMESPACE}:gateway.rateLimit.redisReplicas ({gateway.rate_limit.redis_replicas}) must be >= 3 in a "
                "prod stack (Sentinel needs a majority to promote a replica; no single Redis on the request path)"
            )
        if gateway.tls_mode == "none":
            problems.append(
                f"{NAMESPACE}:gateway.clusterTls (False) is not allowed in a prod stack without "
                "gateway.tlsCertificateArn: API keys and prompts would cross the VPC in clear"
            )
        if not gateway.source_ranges:
            problems.append(
                f"{NAMESPACE}:gateway.sourceRanges must list the client CIDRs in a prod stack; empty admits "
                "any address that can route to the load balancer"
            )
        if gateway.rate_limit.fail_closed:
            problems.append(
                f"{NAMESPACE}:gateway.rateLimit.failClosed (True) is not allowed in a prod stack: while Sentinel "
                "promotes a replica (seconds) every request would fail, making the store a single point of failure"
            )
    return problems
