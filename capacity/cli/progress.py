"""A live progress bar for the commands that drive load (`load`, `sweep`, `lab`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


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
