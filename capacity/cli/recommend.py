"""Recommend scaling thresholds from a capacity envelope, as `pulumi config set` commands."""

from __future__ import annotations

import argparse
from pathlib import Path

from capacity.measure.envelope import read_envelope
from capacity.measure.recommend import commands, current_values, recommend, report_lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--envelope", type=Path, required=True, help="envelope CSV (sweep output or calibration file)")
    parser.add_argument("--slo-p99", type=float, required=True, help="end-to-end p99 latency SLO, seconds")
    parser.add_argument("--slo-ttft-p95", type=float, default=None, help="TTFT p95 SLO, seconds")
    parser.add_argument("--stack", required=True, help="Pulumi stack the commands target (-s)")
    parser.add_argument("--model", default=None, help="served model name (default: the 'default' block)")
    parser.add_argument("--peak-rps", type=float, default=None, help="peak load to size maxReplicas for, req/s")
    parser.add_argument("--stack-file", type=Path, default=None, help="Pulumi.<stack>.yaml (default: ./ or repo root)")


def run(args: argparse.Namespace) -> int:
    rows = read_envelope(args.envelope)
    rec = recommend(rows, args.slo_p99, args.slo_ttft_p95, args.peak_rps)
    current, why_not = current_values(args.stack, args.model or "default", args.stack_file)
    print("\n".join(report_lines(rec, args.slo_p99)))
    if why_not:
        print(f"# current values not shown: {why_not}")
    print("\n".join(commands(rec, args.stack, args.model, current)))
    return 0
