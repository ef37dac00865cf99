"""A live progress bar for the commands that drive load (`load`, `sweep`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(enabled: bool, label: str) -> Iterator[Callable[[dict], None] | None]:
    """A rich progress bar fed by the load generator's ticks (none when disabled or not a TTY)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                  TimeElapsedColumn(), transient=True) as bar:  # fmt: skip
        task = bar.add_task(label, total=1.0, info="")

        def update(state: dict) -> None:
            p99 = state["recent_p99_s"]
            info = f"{state['phase']}  done {state['completed']}  measured {state['measured_ok']}"
            info += f"  p99 {p99:.2f}s" if p99 is not None else ""
            bar.update(task, completed=min(1.0, state["now_s"] / state["end_s"]), info=info)

        yield update
