"""Process plumbing shared by the tools: fewer garbage collection pauses while measuring, uvloop
when it is installed, an event loop that a Ctrl-C never catches half-built, and worker pools that
leave Ctrl-C to the command that started them."""

from __future__ import annotations

import asyncio
import gc
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ProcessPoolExecutor
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


@contextmanager
def ctrl_c_held() -> Iterator[None]:
    """A Ctrl-C inside the block is held until the block ends, then raised as KeyboardInterrupt:
    for steps that must not stop half-done. Only the Python-level handler can do this: blocking
    SIGINT with pthread_sigmask in this thread lets the kernel hand it to another thread (a
    progress bar's), and CPython still runs the handler here, wherever this thread is."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield  # not ours to hold: another handler (or none) is in charge
        return
    held: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if held:
        raise KeyboardInterrupt


def run_main(
    main: Callable[[], Coroutine[Any, Any, T]], loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
) -> T:
    """`asyncio.run(main())`, with a Ctrl-C that lands while the event loop is being built held
    until it is built.

    A KeyboardInterrupt inside the loop's constructor leaves a half-built loop that prints
    "Exception ignored in BaseEventLoop.__del__ ... AttributeError" when collected, and a
    coroutine "never awaited". Once the loop is built, asyncio.Runner installs its own handler
    (CPython 3.11 asyncio/runners.py `Runner.run`, `_on_sigint`: cancel the main task, let it
    clean up, raise KeyboardInterrupt)."""
    runner = asyncio.Runner(loop_factory=loop_factory)
    try:
        with ctrl_c_held():
            runner.get_loop()  # builds the loop now (entering the Runner would build it unheld)
    except KeyboardInterrupt:
        runner.close()
        raise
    with runner:
        coro = None
        try:
            coro = main()
            return runner.run(coro)
        finally:
            if coro is not None:
                coro.close()  # no-op once it ran; a Ctrl-C before it started leaves no warning


def _worker_start(initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    # A terminal's Ctrl-C reaches the whole process group; the command stops the pool, so a
    # worker that also raised KeyboardInterrupt would only print its own traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)


@contextmanager
def worker_pool(
    workers: int, initializer: Callable[..., None] | None = None, initargs: tuple[Any, ...] = ()
) -> Iterator[ProcessPoolExecutor]:
    """A process pool whose workers ignore Ctrl-C; when the command is interrupted (or fails), the
    calls not yet started are cancelled and the running ones finish before it returns."""
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_worker_start, initargs=(initializer, initargs))
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
