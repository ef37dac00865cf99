"""How a report was made: the command line, its traffic, seed and date (UTC), recorded in the
JSON, the HTML report and the PNG's footer of `simulate`, `compare`, `plan`, `explain` and
`schedule`, so a shared report says how to make it again."""

from __future__ import annotations

import argparse
import shlex
from datetime import UTC, datetime
from typing import Any

from capacity.planning.journal import shown_url


def run_record(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """The command line as typed (`capacity.__main__` keeps it), the traces, the seed and now;
    `extra` adds keys or replaces them."""
    argv = _without_passwords(getattr(args, "_argv", None) or [getattr(args, "command", "")])
    trace = getattr(args, "trace", None)
    record = {
        "command": "python -m capacity " + shlex.join(argv),
        "traces": list(trace) if isinstance(trace, list) else [trace] if trace else [],
        "seed": getattr(args, "seed", None),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    return record | extra  # a command that takes its traffic from elsewhere says what it used


def made_by(record: dict[str, Any]) -> str:
    """One line naming the record, for text output, HTML notes and PNG footers."""
    return f"made by: {record['command']} (seed {record['seed']}, {record['date']})"


def _without_passwords(argv: list[str]) -> list[str]:
    """`argv` with the password of a `--storage` URL masked: reports are shared, a database's
    password is not."""
    shown = list(argv)
    for i, arg in enumerate(shown):
        if arg.startswith("--storage="):
            shown[i] = "--storage=" + shown_url(arg.removeprefix("--storage="))
        elif arg == "--storage" and i + 1 < len(shown):
            shown[i + 1] = shown_url(shown[i + 1])
    return shown
