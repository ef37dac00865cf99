"""Recommend scaling thresholds from a capacity envelope, as `pulumi config set` commands the stack accepts.

Reads the envelope against the stack's SLO (--slo-p99 and --slo-ttft-p95 override it), refuses an
envelope whose throughput had not reached its plateau (extend the sweep), and validates every
printed command through the stack's own settings (a model or stack that does not exist, or a
maxReplicas beyond the pools' GPUs, is refused by name).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from capacity.cli import DEFAULT_STACK
from capacity.measure.envelope import read_envelope
from capacity.measure.recommend import Setting, commands, recommend, report_lines, slo_to_defend, stack_path
from capacity.planning.stack import apply_config_set, load_stack_model
from contract.settings.autoscaling import DEFAULT_KEY, merged_policy


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
    parser.add_argument(
        "--stack", default=DEFAULT_STACK, help="Pulumi stack the commands target (-s); its file must exist"
    )
    parser.add_argument("--model", default=None, help="served model name (default: the 'default' block)")
    parser.add_argument(
        "--peak-rps", type=float, default=None, help="peak load to size maxReplicas for, req/s (default: not sized)"
    )
    parser.add_argument(
        "--stack-file",
        type=Path,
        default=None,
        help="stack file with the current values (default: Pulumi.<stack>.yaml here, else in the repository)",
    )


def run(args: argparse.Namespace) -> int:
    if args.stack_file is not None and not args.stack_file.is_file():
        raise ValueError(f"--stack-file {args.stack_file} does not exist")
    rows = read_envelope(args.envelope)
    # The stack and the model must exist: commands for either that does not would not deploy.
    sm = load_stack_model(stack_path(args.stack, args.stack_file), args.model)
    settings = sm.source.settings()
    current = sm.policy if args.model else merged_policy(settings.autoscaling.get(DEFAULT_KEY, {}))
    slo_p99, slo_ttft = slo_to_defend(current, None, sm.stack, args.slo_p99, args.slo_ttft_p95)
    rec = recommend(rows, slo_p99, slo_ttft, args.peak_rps)
    budget = sm.pool_replicas
    refused: list[str] = []
    kept: list[Setting] = []
    for s in rec.settings:
        if s.path == "maxReplicas" and isinstance(s.value, int) and s.value > budget:
            pools = ", ".join(f"{p.name} {p.gpu_limit}" for p in sm.pools)
            refused.append(
                f"# maxReplicas {s.value} refused: the pools of {sm.model.name} hold {budget} replicas' GPUs "
                f"({pools}); raise gpuCapacity.pools[].gpuLimit first or plan for less peak"
            )
            continue
        kept.append(s)
    scope = args.model or DEFAULT_KEY
    apply_config_set(sm, [(f"autoscaling.{scope}.{s.path}", s.value) for s in kept])
    print("\n".join(report_lines(rec, slo_p99, slo_ttft)))
    print("\n".join(refused + commands(rec, sm.stack, args.model, current, kept)))
    return 0
