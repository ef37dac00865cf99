"""GPU capacity settings: which provisioner, the GPU node class and the NodePools."""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ..gpu import GPU_FAMILIES
from .base import RuleViolation, Section

_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
# EKS Auto Mode replaces every node after at most 21 days, and a NodePool can only lower that
# (EKS user guide, "EKS Auto Mode" features: "maximum lifetime of 21 days, which you can
# reduce"); a longer expireAfter is silently ineffective there, and the forced replacement
# evicts GPU pods despite karpenter.sh/do-not-disrupt.
AUTO_MODE_MAX_NODE_LIFETIME_S = 21 * 24 * 3600


def duration_seconds(text: str) -> float:
    """A Karpenter duration ("15m", "1h30m", "30s", "Never") in seconds."""
    if text == "Never":
        return math.inf
    match = _DURATION.fullmatch(text)
    if not match or not text:
        raise ValueError(f'must be a duration like "30m", "720h" or "Never", got {text!r}')
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


def _duration(value: str, key: str) -> str:
    try:
        duration_seconds(value)
    except ValueError:
        raise ValueError(f'must be a duration like "30m", "720h" or "Never" ({key})') from None
    return value


class DisruptionBudget(Section):
    nodes: str = "10%"
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] | None = None
    schedule: str | None = None
    duration: str | None = None

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, value: str) -> str:
        if not re.match(r"^((100|[0-9]{1,2})%|[0-9]+)$", value):
            raise ValueError('must be a node count like "1" or a percentage like "10%"')
        return value


def gpu_families(families: list[str], unset: str) -> list[str]:
    """A non-empty list of known GPU instance families (`unset`: what leaving the key out means)."""
    if not families:
        raise ValueError(f"must list at least one GPU instance family{unset}")
    unknown = [f for f in families if f not in GPU_FAMILIES]
    if unknown:
        raise ValueError(f"has non-GPU or unknown families {unknown}; known: {list(GPU_FAMILIES)}")
    return families


class NodePoolSettings(Section):
    name: str
    capacity_type: Literal["spot", "on-demand"]
    # Higher weight is tried first: spot (100) before the on-demand fallback (10).
    weight: int = Field(ge=1, le=100)
    instance_families: list[str] = Field(default_factory=lambda: ["g5", "g6"])
    # Cap on GPUs this pool may run at once: the budget guard for autoscaling.
    gpu_limit: int = Field(gt=0)
    consolidation_policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized"] = "WhenEmpty"
    consolidate_after: str = "10m"
    # 14 days, as the EKS user guide's Auto Mode NodePool example: within Auto Mode's 21-day limit.
    expire_after: str = "336h"
    disruption_budgets: list[DisruptionBudget] = Field(default_factory=lambda: [DisruptionBudget(nodes="1")])

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("must be a DNS label (lowercase letters, digits, '-')")
        return value

    @field_validator("instance_families")
    @classmethod
    def _families(cls, families: list[str]) -> list[str]:
        return gpu_families(families, "")

    @field_validator("consolidate_after", "expire_after")
    @classmethod
    def _durations(cls, value: str) -> str:
        return _duration(value, "Karpenter duration")


class NodeClassSettings(Section):
    # Root/ephemeral volume for image layers and, without instance store, the model cache.
    ephemeral_storage_gib: int = Field(default=200, alias="ephemeralStorageGiB", ge=50, le=16384)
    # Karpenter only: pinned AMI alias (Karpenter picks the NVIDIA variant for GPU instances). The
    # AL2023 NVIDIA AMIs lack the NVIDIA device plugin, so the program installs it; Bottlerocket's
    # NVIDIA variants ship it (EKS user guide, "Install Kubernetes device plugin for GPUs").
    ami_alias: str = "al2023@v20251117"
    # Karpenter only: RAID0 the NVMe instance store (g5/g6 have it) as a local model cache.
    instance_store_raid0: bool = False
    # SOCI parallel pull/unpack (the image downloads in concurrent chunks and layers unpack in
    # parallel; aws-samples/karpenter-blueprints@529b88c blueprints/soci-snapshotter: a ~10 GB vLLM
    # image in 23-60 s instead of 112-131 s). Karpenter: the EC2NodeClass userData turns it on (an
    # AL2023 nodeadm NodeConfig feature gate, or Bottlerocket's settings). EKS Auto Mode has no userData
    # (its NodeClass schema has none) and turns it on itself on its Bottlerocket G/P instances with
    # local NVMe since its November 19, 2025 change (same blueprint, "EKS Auto Mode"), with no way
    # to turn it off. Unset: what the provisioner does (Auto Mode: on; Karpenter: off).
    soci_parallel_pull: bool | None = None

    @field_validator("ami_alias")
    @classmethod
    def _alias(cls, value: str) -> str:
        if not re.match(r"^(al2023|bottlerocket)@v[\d.]+$", value):
            raise ValueError('must be a pinned alias like "al2023@v20251117" (never @latest)')
        return value

    @model_validator(mode="after")
    def _soci_ami(self) -> NodeClassSettings:
        if self.soci_parallel_pull and _version(self.ami_alias) < SOCI_MIN_AMI[self.ami_family]:
            oldest = ".".join(map(str, SOCI_MIN_AMI[self.ami_family]))
            raise RuleViolation(
                "sociParallelPull",
                True,
                f"needs an AMI with SOCI parallel mode: {self.ami_family} at v{oldest} or later (amiAlias is "
                f"{self.ami_alias!r})",
            )
        return self

    @property
    def ami_family(self) -> str:
        """al2023 or bottlerocket (Karpenter picks the NVIDIA variant of it for GPU instances)."""
        return self.ami_alias.split("@", 1)[0]

    @property
    def needs_device_plugin(self) -> bool:
        """Whether nodes of this AMI advertise `nvidia.com/gpu` only once the NVIDIA device plugin runs."""
        return self.ami_family == "al2023"


# The first AMIs with SOCI parallel mode (karpenter-blueprints blueprints/soci-snapshotter README:
# "Amazon Linux 2023 (AL2023) > v20250821" and "Bottlerocket > v1.44.0").
SOCI_MIN_AMI = {"al2023": (20250821,), "bottlerocket": (1, 44, 0)}


def _version(alias: str) -> tuple[int, ...]:
    return tuple(int(part) for part in alias.split("@v", 1)[1].split("."))


class HeadroomSettings(Section):
    """Warm GPU headroom: placeholder pods of the lowest priority, each shaped like one replica of
    `model` (its image, GPUs, CPU and memory requests, pools and instance families), so Karpenter
    keeps that many GPU nodes launched with the serving image pulled; any predictor preempts one
    and starts with weight load and engine start only (components/headroom.py)."""

    placeholders: int = Field(default=0, ge=0, le=64)
    # The model whose replica the placeholders hold a node for; unset: the first model.
    model: str | None = None


class GeneralPurposePoolSettings(Section):
    """Karpenter only: the untainted NodePool for platform pods (Redis one per node, Prometheus,
    operators), as Auto Mode's built-in `general-purpose` pool; the system node group keeps
    Karpenter itself off the nodes it manages."""

    # The spend guard of the pool, in vCPUs.
    cpu_limit: int = Field(default=64, ge=8)
    consolidate_after: str = "5m"

    @field_validator("consolidate_after")
    @classmethod
    def _durations(cls, value: str) -> str:
        return _duration(value, "Karpenter duration")


def _default_pools() -> list[NodePoolSettings]:
    return [
        NodePoolSettings(name="gpu-spot", capacity_type="spot", weight=100, gpu_limit=8),
        NodePoolSettings(name="gpu-on-demand", capacity_type="on-demand", weight=10, gpu_limit=8),
    ]


class GpuCapacitySettings(Section):
    provisioner: Literal["auto-mode", "karpenter"] = "auto-mode"
    node_class: NodeClassSettings = Field(default_factory=NodeClassSettings)
    pools: list[NodePoolSettings] = Field(default_factory=_default_pools)
    general_purpose: GeneralPurposePoolSettings = Field(default_factory=GeneralPurposePoolSettings)
    headroom: HeadroomSettings = Field(default_factory=HeadroomSettings)

    @model_validator(mode="after")
    def _pools(self) -> GpuCapacitySettings:
        if not self.pools:
            raise RuleViolation("pools", [], "must define at least one GPU NodePool")
        names = [p.name for p in self.pools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise RuleViolation("pools", names, f"repeats pool names {dupes}")
        weights = [p.weight for p in self.pools]
        if len(set(weights)) != len(weights):
            raise RuleViolation(
                "pools", weights, "weights must be distinct (equal weights make Karpenter's choice arbitrary)"
            )
        if self.provisioner == "auto-mode":
            for i, pool in enumerate(self.pools):
                if duration_seconds(pool.expire_after) > AUTO_MODE_MAX_NODE_LIFETIME_S:
                    raise RuleViolation(
                        f"pools[{i}].expireAfter",
                        pool.expire_after,
                        "must be at most 504h (21 days) with provisioner auto-mode: Auto Mode replaces "
                        "every node after 21 days, so a longer lifetime is silently ineffective",
                    )
            if self.node_class.soci_parallel_pull is False:
                raise RuleViolation(
                    "nodeClass.sociParallelPull",
                    False,
                    "cannot be turned off with provisioner auto-mode: Auto Mode turns SOCI parallel pull on itself on "
                    "its GPU instances and its NodeClass has no userData to change it",
                )
        return self

    @property
    def soci_parallel_pull(self) -> bool:
        """Whether GPU nodes pull images with SOCI parallel mode (unset: the provisioner's default)."""
        chosen = self.node_class.soci_parallel_pull
        return chosen if chosen is not None else self.provisioner == "auto-mode"

    @property
    def ami_family(self) -> str:
        """The GPU nodes' OS: Auto Mode runs Bottlerocket only; Karpenter the pinned alias's."""
        return "bottlerocket" if self.provisioner == "auto-mode" else self.node_class.ami_family

    def pool(self, name: str) -> NodePoolSettings:
        return next(p for p in self.pools if p.name == name)
