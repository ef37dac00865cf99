"""Ctrl-C that never cuts a step off half-done: the event loop's construction (run_main), a journal write (ctrl_c_held)."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import warnings

import pytest

from capacity.runtime import ctrl_c_held, run_main


@pytest.fixture
def default_sigint():
    """The handler an interactive `python -m capacity ...` has (a test worker may have another)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


async def _answer() -> int:
    await asyncio.sleep(0)
    return 42


def test_returns_what_main_returns(default_sigint):
    assert run_main(_answer) == 42


def test_ctrl_c_while_the_loop_is_built_is_raised_once_it_is_built(default_sigint):
    unraisable, started = [], []

    class InterruptedWhileBuilt(asyncio.SelectorEventLoop):
        def __init__(self) -> None:
            os.kill(os.getpid(), signal.SIGINT)  # handled at the next bytecode: mid-construction
            super().__init__()

    async def main() -> None:
        started.append(True)

    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a "coroutine was never awaited" would fail here
            with pytest.raises(KeyboardInterrupt):
                run_main(main, InterruptedWhileBuilt)
            gc.collect()  # a half-built loop or an unawaited coroutine reports when collected
    finally:
        sys.unraisablehook = hook
    assert not started and not unraisable


def test_ctrl_c_while_main_runs_cancels_it_and_lets_it_clean_up(default_sigint):
    cleaned = []

    async def main() -> None:
        try:
            asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGINT)
            await asyncio.sleep(30)
        finally:
            cleaned.append(True)

    with pytest.raises(KeyboardInterrupt):
        run_main(main)
    assert cleaned and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_inside_a_held_block_is_raised_when_the_block_has_finished(default_sigint):
    steps = []
    with pytest.raises(KeyboardInterrupt), ctrl_c_held():
        os.kill(os.getpid(), signal.SIGINT)
        steps.append("after the signal")  # still runs: the step is not cut off
    assert steps == ["after the signal"] and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_held_block_leaves_another_sigint_handler_in_charge(default_sigint):
    seen = []
    signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    with ctrl_c_held():
        os.kill(os.getpid(), signal.SIGINT)
    assert seen == [signal.SIGINT]
