"""The pod and node events the simulation schedules ahead, in the order they happen.

Arrivals and control ticks are not queued here: the event loop (`capacity.sim.simulator`)
computes those from the trace and the intervals. Events at the same time keep the order in
which they were pushed.
"""

from __future__ import annotations

import heapq
import math
from enum import Enum, auto
from typing import Any


class EventKind(Enum):
    READY = auto()  # a starting pod's engine is up: it serves and exposes metrics
    RECLAIM = auto()  # a spot node receives its interruption notice
    CONSOLIDATE = auto()  # an empty node may have been empty for its pool's consolidateAfter
    KILL = auto()  # a draining pod's deadline: what is still in flight fails


class EventQueue:
    """A time-ordered heap of (time, kind, target); the target is the pod or node concerned."""

    __slots__ = ("_heap", "_pushed")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, EventKind, Any]] = []
        self._pushed = 0  # a tie-breaker that keeps same-time events in push order

    def push(self, t: float, kind: EventKind, target: Any) -> None:
        self._pushed += 1
        heapq.heappush(self._heap, (t, self._pushed, kind, target))

    def next_time(self) -> float:
        """When the earliest event happens (inf when none is scheduled)."""
        return self._heap[0][0] if self._heap else math.inf

    def pop(self) -> tuple[EventKind, Any]:
        """The earliest event's kind and target, removed from the queue."""
        _, _, kind, target = heapq.heappop(self._heap)
        return kind, target
