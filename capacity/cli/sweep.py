"""Measure a replica's capacity envelope: closed-loop load at each concurrency; CSV, PNG, Markdown.

Recommends thresholds against the stack's SLO (`autoscaling.<model>.slo`; --slo-p99 and
--slo-ttft-p95 override it), and only from an envelope that reached its plateau.

--model names the stack model whose thresholds are retuned and, through a gateway that routes by
it, the name requested. A replica serving another name (`capacity serve` serves the profile's
unless given --served-model-name) is swept with --served-model-name NAME; a name the replica does
not list in /v1/models is refused before any load.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from capacity.cli.advice import advice, choose_target, folded
from capacity.cli.load_args import add_load_arguments, check_urls, config_from_args, parse_levels
from capacity.cli.progress import progress_bar
from capacity.cli.stack_args import add_stack_arguments, profile_help, stack_file
from capacity.engine import get_profile
from capacity.measure.recommend import recommend, slo_to_defend
from capacity.measure.report import write_report
from capacity.measure.sweep import PointResult, SweepOptions, run_sweep
from capacity.runtime import run_main


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_load_arguments(parser, sweep=True)
    parser.add_argument("--concurrency", default="1,5,10,20,40", help="comma-separated concurrency levels")
    parser.add_argument(
        "--prometheus",
        default=None,
        help="also read the KEDA signals from this Prometheus URL (default: the replicas' /metrics only)",
    )
    parser.add_argument("--sample-interval", type=float, default=1.0, help="wall seconds between /metrics samples")
    parser.add_argument("--out", type=Path, default=Path("out/sweep"), help="folder for the CSV, PNG and report")
    parser.add_argument(
        "--slo-p99", type=float, default=None, help="end-to-end p99 SLO, seconds (default: the stack's)"
    )
    parser.add_argument("--slo-ttft-p95", type=float, default=None, help="TTFT p95 SLO, seconds (default: the stack's)")
    add_stack_arguments(parser, what="its SLO is defended and its thresholds retuned")
    parser.add_argument(
        "--profile",
        default=None,
        help=profile_help("engine profile of the swept replica's GPU and model, to compare with the stack's pinned one")
        + " (default: not given)",
    )


def run(args: argparse.Namespace) -> int:
    levels = parse_levels(args.concurrency)
    base = config_from_args(args, concurrency=levels[0])
    if args.profile is not None:
        get_profile(args.profile)  # an unknown name is one clear line before any load
    # --model is the stack model retuned; the name requested too (the gateway routes by it) unless --served-model-name
    target = choose_target(stack_file(args), args.model, args.profile)
    current = target.sm.policy
    slo_p99, slo_ttft = slo_to_defend(current, None, target.sm.stack, args.slo_p99, args.slo_ttft_p95)
    check_urls(args.url)

    def show(point: PointResult) -> None:
        r = point.row
        print(
            f"concurrency {r.concurrency:4d}: {r.successful_rps:7.2f} req/s  p99 {r.p99_latency_s:7.2f}s"
            + (f"  waiting {r.avg_waiting:5.2f}" if r.avg_waiting is not None else ""),
            flush=True,
        )

    options = SweepOptions(levels, args.sample_interval, args.prometheus, policy=current)
    with progress_bar(not args.no_progress, "sweep") as update:
        points = run_main(functools.partial(run_sweep, base, options, show, update))
    title = f"Capacity envelope of {', '.join(args.url)}"
    try:
        rec = recommend([p.row for p in points], slo_p99, slo_ttft)
    except ValueError as no_recommendation:
        paths = write_report(points, args.out, title, slo_p99)
        print("wrote " + ", ".join(str(p) for p in paths.values()))
        raise ValueError(f"{no_recommendation} (envelope in {paths['csv']})") from None
    recs = folded(advice(rec, target, args.profile, slo_p99, slo_ttft))
    print("\n".join(recs))
    paths = write_report(points, args.out, title, slo_p99, recs, current, rec.planning)
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
