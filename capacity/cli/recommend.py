"""Recommend scaling thresholds from a capacity envelope, as `pulumi config set` commands the stack accepts."""

from __future__ import annotations

import argparse
from pathlib import Path

from capacity.measure.envelope import read_envelope
from capacity.measure.recommend import Setting, commands, recommend, report_lines
from capacity.sim.from_stack import apply_config_set, load_stack_model
from capacity.sim.plan import budget_replicas

# The repository's root: its stack files are the fallback when none is found where the tool runs.
REPO = Path(__file__).resolve().parents[2]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--envelope", type=Path, required=True, help="envelope CSV (sweep output or calibration file)")
    parser.add_argument("--slo-p99", type=float, required=True, help="end-to-end p99 latency SLO, seconds")
    parser.add_argument("--slo-ttft-p95", type=float, default=None, help="TTFT p95 SLO, seconds")
    parser.add_argument("--stack", required=True, help="Pulumi stack the commands target (-s); its file must exist")
    parser.add_argument("--model", default=None, help="served model name (default: the 'default' block)")
    parser.add_argument("--peak-rps", type=float, default=None, help="peak load to size maxReplicas for, req/s")
    parser.add_argument("--stack-file", type=Path, default=None, help="Pulumi.<stack>.yaml (default: ./ or repo root)")


def _stack_source(args: argparse.Namespace) -> str | Path:
    if args.stack_file:
        return args.stack_file
    local = Path(f"Pulumi.{args.stack}.yaml")
    return local if local.is_file() else REPO / local.name


def run(args: argparse.Namespace) -> int:
    rows = read_envelope(args.envelope)
    rec = recommend(rows, args.slo_p99, args.slo_ttft_p95, args.peak_rps)
    # The stack and the model must exist: commands for either that does not would not deploy.
    sm = load_stack_model(_stack_source(args), args.model)
    budget = budget_replicas(sm)
    refused: list[str] = []
    kept: list[Setting] = []
    for s in rec.settings:
        if s.path == "maxReplicas" and isinstance(s.value, int) and s.value > budget:
            pools = ", ".join(f"{p.name} {p.gpu_limit}" for p in sm.pools)
            refused.append(f"# maxReplicas {s.value} refused: the pools of {sm.model.name} hold {budget} replicas' GPUs "
                           f"({pools}); raise gpuCapacity.pools[].gpuLimit first or plan for less peak")  # fmt: skip
            continue
        kept.append(s)
    scope = args.model or "default"
    apply_config_set(sm, [(f"autoscaling.{scope}.{s.path}", s.value) for s in kept])
    print("\n".join(report_lines(rec, args.slo_p99)))
    print("\n".join(refused + commands(rec, sm.stack, args.model, sm.policy, kept)))
    return 0
