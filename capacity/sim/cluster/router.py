"""Request routing across the ready replicas of one model (the gateway's load balancer).

`least-request` is Envoy's LEAST_REQUEST with equal weights (Envoy Gateway's default): pick
two distinct replicas at random, send to the one with fewer active requests ("power of two
choices"). `least-outstanding` scans every replica; `round-robin` cycles. `endpoint-picker` is the
Gateway API Inference Extension's EPP with the `inferencepool` chart's default scorers
(`capacity.sim.cluster.endpoint_picker`), what `serving.routing: endpoint-picker` deploys.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal, Protocol

from capacity.engine.replica import Request
from capacity.sim.cluster.endpoint_picker import EndpointPicker

RouterName = Literal["least-request", "least-outstanding", "round-robin", "endpoint-picker"]
ROUTERS: tuple[str, ...] = ("least-request", "least-outstanding", "round-robin", "endpoint-picker")


class Backend(Protocol):
    @property
    def outstanding(self) -> int: ...


class RoundRobin:
    def __init__(self) -> None:
        self._next = 0

    def candidates(self, n: int) -> Sequence[int]:
        return (self._next % n,)

    def pick(self, ready: Sequence[Backend], candidates: Sequence[int], request: Request | None = None) -> int:
        self._next = candidates[0] + 1
        return candidates[0]


class LeastOutstanding:
    """Fewest requests in flight; ties go to the first (oldest) replica, deterministically."""

    def candidates(self, n: int) -> Sequence[int]:
        return range(n)

    def pick(self, ready: Sequence[Backend], candidates: Sequence[int], request: Request | None = None) -> int:
        return min(candidates, key=lambda i: ready[i].outstanding)


class LeastRequest(LeastOutstanding):
    """Envoy's power of two choices, seeded."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)

    def candidates(self, n: int) -> Sequence[int]:
        if n <= 2:
            return range(n)
        first = self._rng.randrange(n)
        second = self._rng.randrange(n - 1)
        return (first, second + (second >= first))

    def pick(self, ready: Sequence[Backend], candidates: Sequence[int], request: Request | None = None) -> int:
        """The fewer in flight of the two; a tie goes to the first drawn (as `min` over them)."""
        if len(candidates) != 2:
            return super().pick(ready, candidates, request)
        first, second = candidates
        return second if ready[second].outstanding < ready[first].outstanding else first


def make_router(name: RouterName, seed: int = 0) -> RoundRobin | LeastOutstanding | EndpointPicker:
    if name == "endpoint-picker":
        return EndpointPicker(seed)
    if name == "round-robin":
        return RoundRobin()
    if name == "least-outstanding":
        return LeastOutstanding()
    if name == "least-request":
        return LeastRequest(seed)
    raise ValueError(f"router {name!r} is unknown; use one of {', '.join(ROUTERS)}")
