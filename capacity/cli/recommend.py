"""Recommend scaling thresholds from a capacity envelope, as `pulumi config set` commands the stack accepts.

Reads the envelope against the stack's SLO (--slo-p99 and --slo-ttft-p95 override it), refuses an
envelope whose throughput had not reached its plateau (extend the sweep), and validates every
printed command through the stack's own settings (a model or stack that does not exist, or a
maxReplicas beyond the pools' GPUs, is refused by name).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from capacity.cli.advice import advice, choose_target, folded
from capacity.cli.stack_args import add_stack_arguments, profile_help, stack_file
from capacity.engine import get_profile
from capacity.measure.envelope import read_envelope
from capacity.measure.recommend import recommend, slo_to_defend


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--envelope", type=Path, required=True, help="envelope CSV (sweep output or calibration file)")
    parser.add_argument(
        "--slo-p99",
        type=float,
        default=None,
        help="end-to-end p99 latency SLO, seconds (default: the stack's slo.e2eP99Seconds for --model)",
    )
    parser.add_argument(
        "--slo-ttft-p95",
        type=float,
        default=None,
        help="TTFT p95 SLO, seconds (default: the stack's slo.ttftP95Seconds for --model)",
    )
    # Required: the quick start deploys dev and the examples retune prod; the commands this prints
    # change a stack, so the stack is named, never guessed.
    add_stack_arguments(parser, what="the stack the commands target", required=True)
    parser.add_argument(
        "--model", default=None, help="the stack model whose autoscaling block to retune (default: its first model)"
    )
    parser.add_argument(
        "--profile",
        default=None,
        help=profile_help("engine profile the envelope was measured with, to compare with the stack's pinned one")
        + " (default: not given)",
    )
    parser.add_argument(
        "--peak-rps", type=float, default=None, help="peak load to size maxReplicas for, req/s (default: not sized)"
    )


def run(args: argparse.Namespace) -> int:
    if args.profile is not None:
        get_profile(args.profile)  # an unknown name is one clear line before anything is read
    rows = read_envelope(args.envelope)
    # The stack and the model must exist: commands for either that does not would not deploy.
    target = choose_target(stack_file(args), args.model)
    slo_p99, slo_ttft = slo_to_defend(target.sm.policy, None, target.sm.stack, args.slo_p99, args.slo_ttft_p95)
    rec = recommend(rows, slo_p99, slo_ttft, args.peak_rps)
    print("\n".join(folded(advice(rec, target, args.profile, slo_p99, slo_ttft))))
    return 0
