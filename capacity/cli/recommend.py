"""Recommend scaling thresholds from a capacity envelope, as `pulumi config set` commands.

Reads the envelope against the stack's SLO (--slo-p99 and --slo-ttft-p95 override it) and
refuses an envelope whose throughput had not reached its plateau (extend the sweep).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from capacity.cli import DEFAULT_STACK
from capacity.measure.envelope import read_envelope
from capacity.measure.recommend import commands, current_values, recommend, report_lines, slo_to_defend


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--envelope", type=Path, required=True, help="envelope CSV (sweep output or calibration file)")
    parser.add_argument("--slo-p99", type=float, default=None,
                        help="end-to-end p99 latency SLO, seconds (default: the stack's slo.e2eP99Seconds for --model)")  # fmt: skip
    parser.add_argument("--slo-ttft-p95", type=float, default=None,
                        help="TTFT p95 SLO, seconds (default: the stack's slo.ttftP95Seconds for --model)")  # fmt: skip
    parser.add_argument("--stack", default=DEFAULT_STACK, help="Pulumi stack the commands target (-s)")
    parser.add_argument("--model", default=None, help="served model name (default: the 'default' block)")
    parser.add_argument("--peak-rps", type=float, default=None, help="peak load to size maxReplicas for, req/s (default: not sized)")
    parser.add_argument("--stack-file", type=Path, default=None,
                        help="stack file with the current values (default: Pulumi.<stack>.yaml here, else in the repository)")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    if args.stack_file is not None and not args.stack_file.is_file():
        raise ValueError(f"--stack-file {args.stack_file} does not exist")
    rows = read_envelope(args.envelope)
    current, why_not = current_values(args.stack, args.model or "default", args.stack_file)
    slo_p99, slo_ttft = slo_to_defend(current, why_not, args.stack, args.slo_p99, args.slo_ttft_p95)
    rec = recommend(rows, slo_p99, slo_ttft, args.peak_rps)
    print("\n".join(report_lines(rec, slo_p99, slo_ttft)))
    if why_not:
        print(f"# current values not shown: {why_not}")
    print("\n".join(commands(rec, args.stack, args.model, current)))
    return 0
