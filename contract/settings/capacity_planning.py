"""Capacity-planning settings: what only the scaling simulator needs from a stack.

How long a new GPU replica takes to serve (node launch, image pull, weight load, engine start:
the stack's measured figures here, the rest derived from its start features by
contract/startup.py), how often spot capacity is reclaimed, and what a GPU-hour costs. The
program does not deploy anything from this section; it lives in the stack so that a simulated
policy is priced and timed like the environment it will run in.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from .base import RuleViolation, Section
from .gpu_capacity import gpu_families


class SecondsRange(Section):
    """A duration drawn uniformly from [min, max] seconds for each new replica."""

    min: float = Field(ge=0)
    max: float = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> SecondsRange:
        if self.max < self.min:
            raise RuleViolation("max", self.max, f"must be >= min ({self.min})")
        return self


class StartupSettings(Section):
    """A stack's own measured startup figures. Each key left unset follows from the start features
    the stack deploys (contract/startup.py: provisioner, SOCI, AMI family, weight loader, compile
    cache, model size), each figure with its source; a key set here overrides the derived one."""

    # Karpenter/Auto Mode: EC2 launch, boot, node ready with the NVIDIA device plugin.
    node_provisioning_seconds: SecondsRange | None = None
    # The vLLM image (~10 GB) on a node that has never pulled it.
    image_pull_seconds: SecondsRange | None = None
    # Weights stream from the S3 model store through Mountpoint: sizeGiB / this rate.
    weight_load_gib_per_second: float | None = Field(default=None, alias="weightLoadGiBPerSecond", gt=0)
    # vLLM start after the weights are in memory: torch.compile, profiling, KV allocation, CUDA graphs.
    engine_init_seconds: SecondsRange | None = None


class Prices(Section):
    """USD per GPU-hour by capacity type: the price of the instance size a replica lands on over
    its GPUs (contract/instances.py; a 14Gi predictor lands on a g5/g6 .2xlarge, not the .xlarge)."""

    spot: float = Field(default=0.45, gt=0)
    on_demand: float = Field(default=1.006, gt=0)

    @model_validator(mode="after")
    def _spot_cheaper(self) -> Prices:
        if self.spot > self.on_demand:
            raise RuleViolation("spot", self.spot, f"must be <= onDemand ({self.on_demand})")
        return self


class GpuPrices(Prices):
    """The stack's GPU prices: `spot`/`onDemand` for every model, unless the first instance
    family a model pins (models[].instanceFamilies) has its own entry in `families`, so that a
    stack whose models land on different GPUs (one on g5, one on g6) prices each where it runs."""

    families: dict[str, Prices] = Field(default_factory=dict)

    @field_validator("families")
    @classmethod
    def _known(cls, families: dict[str, Prices]) -> dict[str, Prices]:
        if families:
            gpu_families(list(families), "")
        return families

    def of(self, instance_families: list[str] | None) -> Prices:
        """The prices of a model pinned to `instance_families` (None: not pinned)."""
        return self.families.get(instance_families[0], self) if instance_families else self


class CapacityPlanningSettings(Section):
    startup: StartupSettings = Field(default_factory=StartupSettings)
    # Reclaims per spot node-hour (Poisson); 0.05 = one in 20 node-hours.
    spot_interruptions_per_hour: float = Field(default=0.05, ge=0)
    gpu_hourly_price_usd: GpuPrices = Field(default_factory=GpuPrices)
    # The share of requests within the SLO a plan must reach on traffic it was not searched on
    # (`python -m capacity plan`, the evidence test). Above the SLO's own 95% so that an hour the
    # plan never saw still meets it.
    attainment_target: float = Field(default=0.99, gt=0, le=1)
