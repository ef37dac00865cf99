"""The capacity loop on any machine: mock replicas + Prometheus, a short sweep, the recommended commands.

Starts mock vLLM replicas (engine-model timing, sped up) in a child process and, where it is
installed, a real Prometheus scraping them on loopback; sweeps concurrency, prints the
envelope and the `pulumi config set` commands, and stops everything. No GPU, no cloud.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from capacity.engine import get_profile
from capacity.envelope import find_knee
from capacity.loadgen import LoadConfig
from capacity.engine import DEFAULT_PROFILE, PROFILES
from capacity.processes import stop, wait_until_ready
from capacity.promserver import find_prometheus, free_port, run_prometheus, wait_for_targets
from capacity.recommend import commands, current_values, recommend, report_lines
from capacity.report import envelope_table
from capacity.sweep import SweepOptions, parse_levels, run_sweep, write_outputs
from contract.settings.stack_file import load_stack


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help=f"one of: {', '.join(sorted(PROFILES))}")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--speedup", type=float, default=20.0, help="model seconds per wall second")
    # past the profile's max-num-seqs (40), so the sweep reaches the plateau and the knee shows
    parser.add_argument("--concurrency", default="1,5,10,20,40,80", help="levels per replica")
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--warmup", type=float, default=30.0, help="model seconds per level")
    parser.add_argument("--duration", type=float, default=180.0, help="measured model seconds per level")
    parser.add_argument("--slo-p99", type=float, default=30.0, help="end-to-end p99 SLO, seconds")
    parser.add_argument("--slo-ttft-p95", type=float, default=None)
    parser.add_argument("--peak-rps", type=float, default=None, help="size maxReplicas for this peak load")
    parser.add_argument("--stack", default="prod", help="stack whose thresholds the commands retune")
    parser.add_argument("--model", default=None,
                        help="autoscaling block to target (default: the stack's model served with --profile, else 'default')")
    parser.add_argument("--no-prometheus", action="store_true", help="skip Prometheus even if installed")
    parser.add_argument("--out", type=Path, default=Path("out/lab"))


def _start_replicas(stack: ExitStack, args: argparse.Namespace) -> list[str]:
    ports = sorted({free_port() for _ in range(args.replicas * 3)})[: args.replicas]
    process = subprocess.Popen(
        [sys.executable, "-m", "capacity", "serve", "--ports", ",".join(map(str, ports)),
         "--profile", args.profile, "--speedup", str(args.speedup), "--stream-interval", "0.05"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip

    stack.callback(stop, process)
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    deadline = time.monotonic() + 20
    for url in urls:
        wait_until_ready(url + "/health", process, deadline,
                         lambda: f"mock replicas exited: {process.stderr.read().decode()[-500:]}")  # fmt: skip
    return urls


def model_served_with(stack: str, profile_name: str) -> str | None:
    """The stack's model whose `capacityProfile` is this profile: the envelope measured here is its."""
    try:
        settings = load_stack(stack)
    except (OSError, ValueError):  # no such stack file, or one that does not validate
        return None
    return next((m.name for m in settings.models if m.capacity_profile == profile_name), None)


def run(args: argparse.Namespace) -> int:
    if args.replicas < 1:
        raise ValueError(f"--replicas must be >= 1, got {args.replicas}")
    profile = get_profile(args.profile)
    levels = parse_levels(args.concurrency)
    with ExitStack() as stack:
        urls = _start_replicas(stack, args)
        print(f"lab: {args.replicas} mock replica(s) of {profile.name} at {args.speedup:g}x on {', '.join(urls)}")
        prometheus = None
        if not args.no_prometheus and find_prometheus():
            prometheus = stack.enter_context(run_prometheus([u.removeprefix("http://") for u in urls]))
            wait_for_targets(prometheus, len(urls))
            print(f"lab: Prometheus {prometheus} scraping them every 1s")
        elif not args.no_prometheus:
            print("lab: prometheus not installed; reading queue and KV from the replicas' /metrics")
        base = LoadConfig(urls=tuple(urls), concurrency=levels[0], prompt_tokens=args.prompt_tokens,
                          output_tokens=args.output_tokens, warmup_s=args.warmup, duration_s=args.duration,
                          stream=True, time_scale=args.speedup, client="raw")  # fmt: skip
        # Prometheus windows are wall time: the KEDA windows (60 s, 120 s model) shrunk by the speedup
        options = SweepOptions(levels, sample_interval_s=0.5, prometheus=prometheus,
                               queue_window_s=max(2, round(60 / args.speedup)),
                               latency_window_s=max(2, round(120 / args.speedup)))  # fmt: skip

        def show(point) -> None:  # noqa: ANN001
            r = point.row
            print(f"  concurrency {r.concurrency:4d}/replica: {r.successful_rps:6.2f} req/s  p99 {r.p99_latency_s:6.2f}s",
                  flush=True)  # fmt: skip

        wall = len(levels) * (args.warmup + args.duration) / args.speedup
        print(f"lab: sweeping {levels} (about {wall:.0f}s)")
        points = asyncio.run(run_sweep(base, options, show))
    rows = [p.row for p in points]
    knee = find_knee(rows)
    print()
    print("\n".join(envelope_table(rows, knee)))
    print()
    rec = recommend(rows, args.slo_p99, args.slo_ttft_p95, args.peak_rps)
    model = args.model or model_served_with(args.stack, profile.name)
    current, why_not = current_values(args.stack, model or "default")
    lines = [*report_lines(rec, args.slo_p99), *commands(rec, args.stack, model, current)]
    if model is None and not args.model:
        lines.insert(0, f"# no model in stack {args.stack!r} names capacityProfile {profile.name!r}: commands target 'default'")
    if why_not:
        lines.insert(0, f"# current values not shown: {why_not}")
    print("\n".join(lines))
    paths = write_outputs(points, args.out, f"Capacity lab: {profile.name} (mock, {args.speedup:g}x)", args.slo_p99, lines)
    print("\nwrote " + ", ".join(str(p) for p in paths.values()))
    return 0
