"""Observability settings: scrape cadence, Prometheus retention and storage, alert
thresholds, Alertmanager receivers and the optional Amazon Managed Service for Prometheus.

Webhook URLs are credentials: set them with
`pulumi config set --secret --path 'observability.alertmanager.receivers[0].webhookUrl' https://...`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import RuleViolation, Section
from .errors import NAMESPACE

Severity = Literal["critical", "warning"]
SEVERITIES: tuple[Severity, ...] = ("critical", "warning")

# Prometheus' duration syntax, largest unit first (e.g. "15d", "1w2d", "12h").
_DURATION = re.compile(r"^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?$")
_RECEIVER = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
# What a `secure:` (encrypted) webhook URL reads as outside the Pulumi engine, e.g. when the
# capacity tooling loads a stack file: only the engine can decrypt it, and only it needs to.
ENCRYPTED_URL = "https://encrypted.invalid/"


class PrometheusStorage(Section):
    retention: str = "15d"
    # The PersistentVolume; retentionSize is 85% of it, so the oldest blocks go before the disk fills.
    volume_gib: int = Field(default=50, alias="volumeGiB", ge=5, le=16384)

    @field_validator("retention")
    @classmethod
    def _retention(cls, value: str) -> str:
        if not value or not _DURATION.match(value):
            raise ValueError('must be a Prometheus duration like "15d" or "12h"')
        return value


class AlertThresholds(Section):
    """When each alert fires; durations are how long the condition must hold."""

    ttft_breach_for_minutes: int = Field(default=10, gt=0)
    tpot_breach_for_minutes: int = Field(default=10, gt=0)
    capacity_exhausted_for_minutes: int = Field(default=10, gt=0)
    kv_cache_near_full_fraction: float = Field(default=0.95, gt=0, le=1)
    kv_cache_near_full_for_minutes: int = Field(default=5, gt=0)
    signal_absent_for_minutes: int = Field(default=5, gt=0)
    # Longer than a GPU replica takes to start (node launch, image pull, weight load).
    replicas_not_ready_for_minutes: int = Field(default=20, gt=0)
    exporter_down_for_minutes: int = Field(default=10, gt=0)
    # vLLM pre-allocates gpuMemoryUtilization (about 0.9) of the framebuffer by design.
    gpu_memory_used_fraction: float = Field(default=0.98, gt=0, le=1)
    gpu_temperature_celsius: float = Field(default=85, gt=0)
    gpu_for_minutes: int = Field(default=10, gt=0)


class Receiver(Section):
    name: str
    webhook_url: str
    severities: list[Severity] = Field(default_factory=lambda: list(SEVERITIES), min_length=1)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _RECEIVER.match(value):
            raise ValueError("must be a lowercase DNS label")
        return value

    @field_validator("webhook_url", mode="before")
    @classmethod
    def _encrypted(cls, value: object) -> object:
        if isinstance(value, dict) and set(value) == {"secure"}:
            return ENCRYPTED_URL
        return value

    @field_validator("webhook_url")
    @classmethod
    def _https(cls, value: str) -> str:
        if not value.startswith("https://"):
            raise ValueError("must be an https:// URL (set it with `pulumi config set --secret --path ...`)")
        return value


class AlertmanagerSettings(Section):
    receivers: list[Receiver] = Field(default_factory=list)


class ManagedPrometheus(Section):
    """Amazon Managed Service for Prometheus: long-term storage by remote write.
    KEDA keeps querying the in-cluster Prometheus, so scaling never waits on a remote store."""

    enabled: bool = False


class ObservabilitySettings(Section):
    namespace: str = "monitoring"
    # node-exporter (host network, PID and paths) and the DCGM exporter (the kubelet's pod-resources
    # socket, as root) run here, the only namespace that enforces the privileged Pod Security level;
    # Prometheus, Grafana and Alertmanager stay in `namespace`, which enforces baseline.
    exporters_namespace: str = "monitoring-exporters"
    # At most 30 s, so the 1-minute recording rules still span two scrapes.
    scrape_interval_seconds: int = Field(default=15, ge=5, le=30)
    # Window of the latency quantiles in recording rules, alerts and dashboards.
    latency_window_seconds: int = Field(default=300, gt=0)
    prometheus: PrometheusStorage = Field(default_factory=PrometheusStorage)
    alerts: AlertThresholds = Field(default_factory=AlertThresholds)
    alertmanager: AlertmanagerSettings = Field(default_factory=AlertmanagerSettings)
    managed_prometheus: ManagedPrometheus = Field(default_factory=ManagedPrometheus)

    @field_validator("namespace", "exporters_namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not re.match(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", value):
            raise ValueError("must be a Kubernetes namespace name (DNS label)")
        return value

    @model_validator(mode="after")
    def _exporters_apart(self) -> ObservabilitySettings:
        if self.exporters_namespace == self.namespace:
            raise RuleViolation(
                "exportersNamespace",
                self.exporters_namespace,
                "must differ from observability.namespace: the host-level exporters need the privileged Pod "
                "Security level, which Prometheus, Grafana and Alertmanager must not share",
            )
        return self

    def windows(self) -> dict[str, int]:
        """Every PromQL window this section sets, by key path, for the scrape-interval rule."""
        return {"latencyWindowSeconds": self.latency_window_seconds}


def plaintext_webhook_problems(obs: ObservabilitySettings, is_secret: Callable[[str], bool]) -> list[str]:
    """Webhook URLs carry credentials: refuse them unless the config value is a Pulumi secret
    (`is_secret` answers for a full config key; only the engine knows)."""
    if not obs.alertmanager.receivers or is_secret(f"{NAMESPACE}:observability"):
        return []
    return [
        f"{NAMESPACE}:observability.alertmanager.receivers[{i}].webhookUrl must be set with "
        f"`pulumi config set --secret --path 'observability.alertmanager.receivers[{i}].webhookUrl' ...`"
        for i in range(len(obs.alertmanager.receivers))
    ]
