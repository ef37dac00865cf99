"""The capacity loop on any machine: mock replicas + Prometheus, a short sweep, the recommended commands.

Recommends thresholds against the stack's SLO for the swept model (--slo-p99 and --slo-ttft-p95
override it), and only when the sweep reached the throughput plateau. Ctrl-C stops the mock
replicas and Prometheus it started.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from capacity.cli.advice import advice, choose_target, folded
from capacity.cli.load_args import parse_levels
from capacity.cli.progress import progress_bar
from capacity.cli.stack_args import add_stack_arguments, profile_help, stack_file
from capacity.engine import DEFAULT_PROFILE, get_profile
from capacity.lab.loop import LabOptions, run_lab
from capacity.measure.recommend import slo_to_defend


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help=profile_help())
    parser.add_argument("--replicas", type=int, default=2, help="mock replicas; levels are per replica")
    parser.add_argument("--speedup", type=float, default=20.0, help="model seconds per wall second")
    # past the profile's max-num-seqs (40), so the sweep reaches the plateau and the knee shows
    parser.add_argument("--concurrency", default="1,5,10,20,40,80", help="comma-separated levels per replica")
    parser.add_argument("--prompt-tokens", type=int, default=1024, help="prompt length of each request, tokens")
    parser.add_argument("--output-tokens", type=int, default=128, help="max_tokens of each request")
    parser.add_argument("--warmup", type=float, default=30.0, help="model seconds before measuring, per level")
    parser.add_argument("--duration", type=float, default=180.0, help="measured model seconds per level")
    parser.add_argument(
        "--slo-p99",
        type=float,
        default=None,
        help="end-to-end p99 SLO, seconds (default: the stack's slo.e2eP99Seconds for the model)",
    )
    parser.add_argument(
        "--slo-ttft-p95",
        type=float,
        default=None,
        help="TTFT p95 SLO, seconds (default: the stack's slo.ttftP95Seconds for the model)",
    )
    parser.add_argument(
        "--peak-rps", type=float, default=None, help="size maxReplicas for this peak load, req/s (default: not sized)"
    )
    add_stack_arguments(parser, what="its SLO is defended and its thresholds retuned")
    parser.add_argument(
        "--model",
        default=None,
        help="the stack model whose autoscaling block to retune (default: the one served with --profile, else its first)",
    )
    parser.add_argument("--no-prometheus", action="store_true", help="skip Prometheus even if installed")
    parser.add_argument("--no-progress", action="store_true", help="no live progress bar (shown only on a terminal)")
    parser.add_argument("--out", type=Path, default=Path("out/lab"), help="folder for the envelope CSV, PNG and report")


def run(args: argparse.Namespace) -> int:
    profile = get_profile(args.profile).name  # an unknown name is one clear line before anything starts
    target = choose_target(stack_file(args), args.model, profile)
    slo_p99, slo_ttft = slo_to_defend(target.sm.policy, None, target.sm.stack, args.slo_p99, args.slo_ttft_p95)
    options = LabOptions(
        profile=args.profile,
        replicas=args.replicas,
        speedup=args.speedup,
        levels=parse_levels(args.concurrency),
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        warmup_s=args.warmup,
        duration_s=args.duration,
        slo_p99=slo_p99,
        slo_ttft_p95=slo_ttft,
        peak_rps=args.peak_rps,
        policy=target.sm.policy,
        prometheus=not args.no_prometheus,
        out=args.out,
    )
    try:
        with progress_bar(not args.no_progress, "lab") as update:
            paths = run_lab(
                options, lambda rec: folded(advice(rec, target, profile, slo_p99, slo_ttft)), progress=update
            )
    except KeyboardInterrupt:  # the lab's ExitStack has stopped its child processes by now
        print("lab: interrupted; the mock replicas and Prometheus it started are stopped", file=sys.stderr)
        return 130
    print("\nwrote " + ", ".join(str(p) for p in paths.values()))
    return 0
