"""Request routing across the ready replicas of one model (the gateway's load balancer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

RouterName = Literal["round-robin", "least-outstanding"]


class Backend(Protocol):
    @property
    def outstanding(self) -> int: ...


class RoundRobin:
    def __init__(self) -> None:
        self._next = 0

    def pick(self, ready: Sequence[Backend]) -> int:
        index = self._next % len(ready)
        self._next = index + 1
        return index


class LeastOutstanding:
    """Fewest requests in flight; ties go to the first (oldest) replica, deterministically."""

    def pick(self, ready: Sequence[Backend]) -> int:
        best, best_load = 0, ready[0].outstanding
        for i in range(1, len(ready)):
            load = ready[i].outstanding
            if load < best_load:
                best, best_load = i, load
        return best


def make_router(name: RouterName) -> RoundRobin | LeastOutstanding:
    if name == "round-robin":
        return RoundRobin()
    if name == "least-outstanding":
        return LeastOutstanding()
    raise ValueError(f"router {name!r} is unknown; use 'round-robin' or 'least-outstanding'")
