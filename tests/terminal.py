"""Start a command the way an interactive terminal does, for the Ctrl-C tests."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def _ctrl_c_at_its_default() -> None:
    # A shell without job control starts background jobs with SIGINT ignored, and an ignored
    # signal stays ignored across exec: Python then never installs its KeyboardInterrupt handler
    # (docs.python.org/3.11/library/signal.html, "SIGINT is translated into a KeyboardInterrupt
    # exception if the parent process has not changed it"). A terminal's foreground job has it
    # at its default, whatever ran this suite.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_in_terminal(command: list[str], **popen: Any) -> subprocess.Popen:
    """`command` in its own session (a terminal's Ctrl-C reaches its process group only) with
    SIGINT at its default."""
    return subprocess.Popen(command, start_new_session=True, preexec_fn=_ctrl_c_at_its_default, **popen)
