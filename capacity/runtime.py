"""Event-loop process tuning shared by the load generator and the mock replicas: fewer garbage
collection pauses while measuring, and uvloop when it is installed."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def quiet_gc(gen0: int = 50_000) -> Iterator[None]:
    """Fewer, cheaper garbage collections while measuring: a full collection of a busy load
    generator's heap stalls its event loop for tens of milliseconds, which would be measured
    as latency. Long-lived objects are frozen out of the collector; thresholds restored after."""
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(gen0, 50, 1000)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def loop_factory(use_uvloop: bool = True) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when asked for and installed (it halves the loop's per-callback cost);
    None, asyncio's default loop, otherwise: uvloop is optional at run time."""
    if not use_uvloop:
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
