"""Progress: a live bar for the commands that drive load (`load`, `sweep`, `lab`), and a counter
for the simulations (`simulate`, `compare`, `tune`, `plan`, `explain`, `schedule`, `profile`) that,
piped or in CI, prints a line every few seconds to stderr instead of nothing until done, also
while a step reports nothing (loading a trace, the oracle)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

LINE_EVERY_S = 5.0  # without a TTY: one progress line at most this often


def fraction_done(state: dict) -> float:
    """How far a run is, 0..1: within one load run, or (with the sweep's `level_index` of
    `levels`) across the whole sweep, advancing within each level."""
    within = min(1.0, max(0.0, state["now_s"] / state["end_s"])) if state["end_s"] > 0 else 0.0
    if "levels" not in state:
        return within
    return (state["level_index"] + within) / state["levels"]


def describe(state: dict) -> str:
    """The bar's text: the level (in a sweep), the phase, the requests done, the recent p99."""
    p99 = state["recent_p99_s"]
    where = (
        f"concurrency {state['concurrency']} ({state['level_index'] + 1}/{state['levels']})  "
        if "levels" in state
        else ""
    )
    info = f"{where}{state['phase']}  done {state['completed']}  measured {state['measured_ok']}"
    return info + (f"  p99 {p99:.2f}s" if p99 is not None else "")


@contextmanager
def progress_bar(enabled: bool, label: str) -> Iterator[Callable[[dict], None] | None]:
    """A rich progress bar fed by the load generator's ticks (none when disabled or not a TTY)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=1.0, info="")

        def update(state: dict) -> None:
            bar.update(task, completed=fraction_done(state), info=describe(state))

        yield update


# done so far, and the total when known
Counted = Callable[[int, "int | None"], None]


@contextmanager
def counted(
    label: str, enabled: bool, unit: str, every_s: float = LINE_EVERY_S, stream: TextIO | None = None
) -> Iterator[Counted | None]:
    """Progress of `label` in `unit`s: a rich bar on a terminal, else a plain line to stderr at
    most every `every_s` seconds and one when done; None when disabled (`--json`)."""
    out = stream or sys.stderr
    if not enabled:
        yield None
        return
    if out.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        with Progress(
            label, BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), transient=True, console=Console(stderr=True)
        ) as bar:
            task = bar.add_task(label, total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)
        return
    start = last = time.monotonic()
    latest: list[tuple[int, int | None]] = []

    def line(done: int, total: int | None) -> None:
        nonlocal last
        last = time.monotonic()
        of = f"/{total}" if total is not None else ""
        print(f"{label}: {done}{of} {unit}, {time.monotonic() - start:.0f} s", file=out, flush=True)

    def update(done: int, total: int | None) -> None:
        latest[:] = [(done, total)]
        if time.monotonic() - last >= every_s:
            line(done, total)

    def heartbeat() -> None:
        """A line every `every_s` seconds in which no update printed one (a long first step)."""
        while not finished.wait(every_s):
            if time.monotonic() - last >= every_s:
                line(*(latest[0] if latest else (0, None)))

    finished = threading.Event()
    beating = threading.Thread(target=heartbeat, daemon=True) if every_s > 0 else None
    if beating is not None:
        beating.start()
    try:
        yield update
    finally:
        finished.set()
        if beating is not None:
            beating.join(every_s + 1)
    if latest:
        line(*latest[0])
