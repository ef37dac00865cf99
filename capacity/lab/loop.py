"""The lab's capacity loop: mock replicas + Prometheus, a short sweep, the recommended commands.

Starts mock vLLM replicas (engine-model timing, sped up) in a child process and, where it is
installed, a real Prometheus scraping them on loopback; sweeps concurrency, prints the
envelope and the `pulumi config set` commands, and stops everything. No GPU, no cloud.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from capacity.engine import EngineProfile, get_profile
from capacity.lab.processes import stop, wait_until_ready
from capacity.lab.prometheus import find_prometheus, free_port, run_prometheus, wait_for_targets
from capacity.measure.config import LoadConfig
from capacity.measure.envelope import find_knee
from capacity.measure.recommend import Recommendation, recommend
from capacity.measure.report import envelope_table, write_report
from capacity.measure.sweep import PointResult, SweepOptions, run_sweep
from capacity.runtime import run_main
from contract.settings.autoscaling import ModelAutoscaling


@dataclass(frozen=True)
class LabOptions:
    profile: str
    replicas: int
    speedup: float  # model seconds per wall second
    levels: list[int]  # concurrency per replica
    prompt_tokens: int
    output_tokens: int
    warmup_s: float  # model seconds per level
    duration_s: float  # measured model seconds per level
    slo_p99: float | None  # the SLO the envelope is read against (the stack's for the model, or a flag's)
    slo_ttft_p95: float | None
    peak_rps: float | None
    policy: ModelAutoscaling  # the retuned model's policy in force: the KEDA queries' targets
    prometheus: bool  # use Prometheus when installed
    out: Path


def _start_replicas(stack: ExitStack, options: LabOptions) -> list[str]:
    ports = sorted({free_port() for _ in range(options.replicas * 3)})[: options.replicas]
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "capacity",
            "serve",
            "--ports",
            ",".join(map(str, ports)),
            "--profile",
            options.profile,
            "--speedup",
            str(options.speedup),
        ],
        # its own session: a terminal's Ctrl-C reaches the lab only, which stops the replicas itself
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )

    stack.enter_context(process)  # closes its stderr pipe and reaps it, after `stop`
    stack.callback(stop, process)
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    deadline = time.monotonic() + 20
    for url in urls:
        wait_until_ready(
            url + "/health", process, deadline, lambda: f"mock replicas exited: {process.stderr.read().decode()[-500:]}"
        )
    return urls


def _measure(
    options: LabOptions,
    profile: EngineProfile,
    say: Callable[[str], None],
    progress: Callable[[dict], None] | None,
) -> list[PointResult]:
    """Replicas (and Prometheus) up, the sweep, everything stopped."""
    with ExitStack() as stack:
        urls = _start_replicas(stack, options)
        say(f"lab: {options.replicas} mock replica(s) of {profile.name} at {options.speedup:g}x on {', '.join(urls)}")
        prometheus = None
        if options.prometheus and find_prometheus():
            prometheus = stack.enter_context(run_prometheus([u.removeprefix("http://") for u in urls]))
            wait_for_targets(prometheus, len(urls))
            say(f"lab: Prometheus {prometheus} scraping them every 1s")
        elif options.prometheus:
            say("lab: prometheus not installed; reading queue and KV from the replicas' /metrics")
        base = LoadConfig(
            urls=tuple(urls),
            concurrency=options.levels[0],
            prompt_tokens=options.prompt_tokens,
            output_tokens=options.output_tokens,
            warmup_s=options.warmup_s,
            duration_s=options.duration_s,
            stream=True,
            time_scale=options.speedup,
            client="raw",
        )
        sweep = SweepOptions(options.levels, sample_interval_s=0.5, prometheus=prometheus, policy=options.policy)

        def show(point: PointResult) -> None:
            r, attained = point.row, point.summary.get("slo_attainment")
            say(
                f"  concurrency {r.concurrency:4d}/replica: {r.successful_rps:6.2f} req/s  p99 {r.p99_latency_s:6.2f}s"
                + (f"  SLO attained {attained:.1%}" if attained is not None else "")
            )

        wall = len(options.levels) * (options.warmup_s + options.duration_s) / options.speedup
        say(f"lab: sweeping {options.levels} (about {wall:.0f}s)")
        return run_main(functools.partial(run_sweep, base, sweep, show, progress))


def run_lab(
    options: LabOptions,
    advise: Callable[[Recommendation], list[str]],
    say: Callable[[str], None] = functools.partial(print, flush=True),
    progress: Callable[[dict], None] | None = None,
) -> dict[str, Path]:
    """Measure, print the envelope and what `advise` makes of its recommendation (the commands),
    write the report; its paths. No thresholds come from an envelope without a plateau (the
    report is written, then ValueError says why)."""
    if options.replicas < 1:
        raise ValueError(f"--replicas must be >= 1, got {options.replicas}")
    profile = get_profile(options.profile)
    points = _measure(options, profile, say, progress)
    rows = [p.row for p in points]
    say("\n" + "\n".join(envelope_table(rows, find_knee(rows))) + "\n")
    title = f"Capacity lab: {profile.name} (mock, {options.speedup:g}x)"
    try:
        rec = recommend(rows, options.slo_p99, options.slo_ttft_p95, options.peak_rps)
    except ValueError as no_recommendation:
        paths = write_report(points, options.out, title, options.slo_p99)
        raise ValueError(f"{no_recommendation} (envelope in {paths['csv']})") from None
    lines = advise(rec)
    say("\n".join(lines))
    return write_report(points, options.out, title, options.slo_p99, lines, options.policy, rec.planning)
