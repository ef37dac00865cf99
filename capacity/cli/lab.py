"""The capacity loop on any machine: mock replicas + Prometheus, a short sweep, the recommended commands."""

from __future__ import annotations

import argparse
from pathlib import Path

from capacity.cli.load_args import parse_levels
from capacity.engine import DEFAULT_PROFILE, PROFILES
from capacity.lab.loop import LabOptions, run_lab


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


def run(args: argparse.Namespace) -> int:
    options = LabOptions(
        profile=args.profile,
        replicas=args.replicas,
        speedup=args.speedup,
        levels=parse_levels(args.concurrency),
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        warmup_s=args.warmup,
        duration_s=args.duration,
        slo_p99=args.slo_p99,
        slo_ttft_p95=args.slo_ttft_p95,
        peak_rps=args.peak_rps,
        stack=args.stack,
        model=args.model,
        prometheus=not args.no_prometheus,
        out=args.out,
    )
    paths = run_lab(options)
    print("\nwrote " + ", ".join(str(p) for p in paths.values()))
    return 0
