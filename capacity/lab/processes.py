"""Child processes the capacity tools start on loopback (mock replicas, Prometheus): wait until
they answer, and always stop them."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable

import httpx


def wait_until_ready(url: str, process: subprocess.Popen, deadline: float, exit_reason: Callable[[], str]) -> None:
    """Poll `url` until it answers 200 or the monotonic `deadline` passes; fail at once, with
    `exit_reason()`, if the process died (no point waiting out the deadline)."""
    while True:
        if process.poll() is not None:
            raise RuntimeError(exit_reason())
        # Refused connections are expected until the server has bound its port.
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not become ready in time")
        time.sleep(0.1)


def stop(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Terminate, then kill if it ignores SIGTERM for `grace_s`."""
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
