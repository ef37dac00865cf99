"""Where a new replica lands (NodePools by weight under GPU limits) and how long it takes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Pool:
    name: str
    capacity_type: str  # "spot" | "on-demand"
    weight: int
    gpu_limit: int
    price_per_gpu_hour: float
    # Karpenter `consolidateAfter` (WhenEmpty): an empty node stays, billed and reusable, this long.
    consolidate_after_s: float = 0.0


@dataclass(frozen=True)
class Startup:
    """Seconds from pod creation to serving, as ranges drawn uniformly per replica."""

    node_provisioning_s: tuple[float, float]
    image_pull_s: tuple[float, float]
    weight_load_s: float  # model size / store throughput: the same for every replica
    engine_init_s: tuple[float, float]

    def sample(self, rng: np.random.Generator) -> float:
        return (
            rng.uniform(*self.node_provisioning_s)
            + rng.uniform(*self.image_pull_s)
            + self.weight_load_s
            + rng.uniform(*self.engine_init_s)
        )

    def sample_on_node(self, rng: np.random.Generator) -> float:
        """On a node that already ran this image: weights and engine start only."""
        return self.weight_load_s + float(rng.uniform(*self.engine_init_s))

    def sample_node_warm(self, rng: np.random.Generator) -> float:
        """A node launched for a headroom placeholder: launch and image pull, until it is warm."""
        return float(rng.uniform(*self.node_provisioning_s) + rng.uniform(*self.image_pull_s))

    @property
    def mean_s(self) -> float:
        return _mid(self.node_provisioning_s) + _mid(self.image_pull_s) + self.weight_load_s + _mid(self.engine_init_s)


def _mid(bounds: tuple[float, float]) -> float:
    return (bounds[0] + bounds[1]) / 2


def place(pools: Sequence[Pool], used_gpus: dict[str, int], gpus: int) -> Pool | None:
    """The highest-weight pool with `gpus` left under its limit (Karpenter's weight order)."""
    for pool in sorted(pools, key=lambda p: -p.weight):
        if used_gpus.get(pool.name, 0) + gpus <= pool.gpu_limit:
            return pool
    return None


def replica_capacity(pools: Sequence[Pool], gpus: int) -> int:
    """How many replicas of `gpus` GPUs the pools hold at once: each replica's node lives in one
    pool, so each pool holds its GPU limit // gpus (what `place` fills, pool by pool)."""
    return sum(pool.gpu_limit // gpus for pool in pools)


def interruption_delay(rng: np.random.Generator, per_hour: float) -> float:
    """Seconds until a spot node is reclaimed (Poisson process); inf when the rate is 0."""
    return float(rng.exponential(3600.0 / per_hour)) if per_hour > 0 else float("inf")
