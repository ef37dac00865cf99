"""Run a real Prometheus (the OS package) on loopback, scraping given targets; always stopped."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from capacity.lab.processes import stop, wait_until_ready

PROMETHEUS = "/usr/bin/prometheus"
# Where `make prometheus-tools` unpacks it in a checkout (the package unpacked, never installed as a service)
CHECKOUT_TOOLS = Path(__file__).resolve().parents[2] / ".tools" / "bin"


def find_prometheus() -> str | None:
    for found in (shutil.which("prometheus"), shutil.which("prometheus", path=str(CHECKOUT_TOOLS)), PROMETHEUS):
        if found and Path(found).is_file():
            return found
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(targets: list[str], scrape_interval_s: float) -> str:
    listed = ", ".join(f"'{t}'" for t in targets)
    interval = f"{scrape_interval_s:g}s"
    scrapes = (
        f"scrape_configs:\n  - job_name: vllm\n    scrape_interval: {interval}\n"
        f"    static_configs:\n      - targets: [{listed}]\n"
    )
    return f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n" + (scrapes if targets else "")


@contextmanager
def run_prometheus(
    targets: list[str],
    scrape_interval_s: float = 1.0,
    binary: str | None = None,
    ready_timeout_s: float = 30.0,
    data_dir: Path | None = None,
    retention: str = "1h",
) -> Iterator[str]:
    """Start Prometheus on 127.0.0.1 (temp config; a temp TSDB unless `data_dir` holds one, e.g.
    backfilled blocks, kept for `retention`); yield its base URL; terminate it."""
    binary = binary or find_prometheus()
    if binary is None:
        raise ValueError(
            "prometheus is not installed (in a checkout: make prometheus-tools; macOS: brew install prometheus)"
        )
    workdir = Path(tempfile.mkdtemp(prefix="capacity-prometheus-"))
    (workdir / "prometheus.yml").write_text(_config(targets, scrape_interval_s))
    port = free_port()
    log = (workdir / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={data_dir or workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.retention.time={retention}",
            "--log.level=warn",
        ],
        # its own session: a terminal's Ctrl-C reaches our process only, which stops Prometheus itself
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(
            url + "/-/ready",
            process,
            time.monotonic() + ready_timeout_s,
            lambda: f"prometheus exited with {process.returncode}: {(workdir / 'prometheus.log').read_text()[-500:]}",
        )
        yield url
    finally:
        stop(process)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)


def wait_for_targets(url: str, count: int, timeout_s: float = 20.0) -> None:
    """Block until Prometheus has scraped `count` healthy targets."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        # Until the first scrapes land the API may answer without the targets' data.
        with contextlib.suppress(httpx.HTTPError, KeyError, ValueError):
            active = httpx.get(url + "/api/v1/targets", timeout=2).json()["data"]["activeTargets"]
            if sum(t["health"] == "up" for t in active) >= count:
                return
        time.sleep(0.2)
    raise RuntimeError(f"prometheus at {url} did not see {count} healthy targets within {timeout_s}s")
