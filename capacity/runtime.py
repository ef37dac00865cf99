"""Event-loop process tuning shared by the load generator and the mock replicas: fewer garbage
collection pauses while measuring, uvloop when it is installed, and a Ctrl-C that never lands
inside the loop's own construction."""

from __future__ import annotations

import asyncio
import gc
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


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


def run_main(main: Callable[[], Coroutine[Any, Any, T]],
             loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> T:
    """`asyncio.run(main())`, with a Ctrl-C that lands while the event loop is being built held
    back until it is built.

    A KeyboardInterrupt raised inside the loop's constructor leaves a half-built loop that prints
    "Exception ignored in BaseEventLoop.__del__ ... AttributeError" when collected, and a
    coroutine "never awaited". Blocking SIGINT with pthread_sigmask is not enough: the kernel then
    hands the signal to another thread (a progress bar's), and CPython still runs the handler in
    the main thread. So the Python-level handler only records the Ctrl-C while the loop is
    built; then the default handler is back and asyncio.Runner installs its own (CPython 3.11
    asyncio/runners.py `Runner.run`, `_on_sigint`: cancel the main task, let it clean up, raise
    KeyboardInterrupt)."""
    held = []
    holding = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if holding:
        signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        try:
            runner.get_loop()  # builds the loop now, not inside run()
        finally:
            if holding:
                signal.signal(signal.SIGINT, signal.default_int_handler)
        if held:
            raise KeyboardInterrupt
        coro = None
        try:
            coro = main()
            return runner.run(coro)
        finally:
            if coro is not None:
                coro.close()  # no-op once it ran; a Ctrl-C before it started leaves no warning
