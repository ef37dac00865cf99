"""Measure a replica's capacity envelope: closed-loop load at each concurrency; CSV, PNG, Markdown."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from capacity.cli.load_args import add_load_arguments, config_from_args, parse_levels
from capacity.cli.progress import progress_bar
from capacity.measure.recommend import commands, current_values, recommend, report_lines
from capacity.measure.report import write_report
from capacity.measure.sweep import PointResult, SweepOptions, run_sweep


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_load_arguments(parser, sweep=True)
    parser.add_argument("--concurrency", default="1,5,10,20,40", help="comma-separated concurrency levels")
    parser.add_argument("--no-stream", action="store_true", help="non-streaming requests (no TTFT column)")
    parser.add_argument("--prometheus", default=None, help="also read the KEDA signals from this Prometheus")
    parser.add_argument("--sample-interval", type=float, default=1.0, help="wall seconds between /metrics samples")
    parser.add_argument("--out", type=Path, default=Path("out/sweep"))
    parser.add_argument("--slo-p99", type=float, default=None, help="add threshold recommendations to the report")
    parser.add_argument("--slo-ttft-p95", type=float, default=None)
    parser.add_argument("--stack", default="dev", help="stack for the recommended commands")


def run(args: argparse.Namespace) -> int:
    levels = parse_levels(args.concurrency)
    args.stream = not args.no_stream
    base = config_from_args(args, concurrency=levels[0])

    def show(point: PointResult) -> None:
        r = point.row
        print(f"concurrency {r.concurrency:4d}: {r.successful_rps:7.2f} req/s  p99 {r.p99_latency_s:7.2f}s"
              + (f"  waiting {r.avg_waiting:5.2f}" if r.avg_waiting is not None else ""), flush=True)  # fmt: skip

    options = SweepOptions(levels, args.sample_interval, args.prometheus)
    with progress_bar(not args.no_progress, "sweep") as update:
        points = asyncio.run(run_sweep(base, options, show, update))
    recs = None
    if args.slo_p99:
        rec = recommend([p.row for p in points], args.slo_p99, args.slo_ttft_p95)
        current, _ = current_values(args.stack, args.model or "default")
        recs = [*report_lines(rec, args.slo_p99), *commands(rec, args.stack, args.model, current)]
        print("\n".join(recs))
    paths = write_report(points, args.out, f"Capacity envelope of {', '.join(args.url)}", args.slo_p99, recs)
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
