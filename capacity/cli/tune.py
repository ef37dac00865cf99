"""Tune thresholds: the cheapest policy whose simulated SLO attainment meets a target.

Prints the before/after table and the `pulumi config set --path ...` lines that deploy it.
"""

from __future__ import annotations

import argparse

from rich.console import Console

from capacity.cli.sim_args import add_common_arguments, emit, load_inputs
from capacity.sim.from_stack import apply_config_set
from capacity.sim.run import with_oracle
from capacity.sim.tune import config_set_lines, tune


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument("--slo-attainment", type=float, default=0.99, help="target fraction of requests within the SLO")
    parser.add_argument("--workers", type=int, default=2, help="parallel simulations")


def run(args: argparse.Namespace) -> int:
    if not 0 < args.slo_attainment <= 1:
        raise ValueError(f"--slo-attainment must be in (0, 1], got {args.slo_attainment}")
    sm, trace, options, orc = load_inputs(args)
    result = tune(sm, trace, args.slo_attainment, options, workers=args.workers)
    # Every printed command must deploy: the stack file with all of them applied is validated.
    apply_config_set(sm, [(f"autoscaling.{sm.model.name}.{path}", after) for path, _, after in result.changes])
    lines = config_set_lines(result, sm.model.name, sm.stack)
    for summary in (result.baseline.summary, result.best.summary):
        with_oracle(summary, orc.gpu_hours)
    payload = {
        "target_slo_attainment": result.target,
        "evaluated_policies": result.evaluated,
        "before": result.baseline.summary,
        "after": result.best.summary,
        "changes": [{"path": p, "before": b, "after": a} for p, b, a in result.changes],
        "pulumi_config_set": lines,
        "meets_target": result.best.summary["slo_attainment"] >= result.target,
    }
    title = f"tune {sm.stack}/{sm.model.name}: cheapest policy with SLO attainment >= {result.target:.1%}"
    emit(args, payload, [("before (stack)", result.baseline.summary), ("after (tuned)", result.best.summary)], title)
    if not args.json:
        console = Console()
        if not payload["meets_target"]:
            console.print("[yellow]no policy in the search space meets the target; the closest one is shown[/]")
        for p, b, a in result.changes:
            console.print(f"{p}: {b} -> {a}")
        for line in lines or ["# the stack's policy is already the cheapest that meets the target"]:
            console.print(line, soft_wrap=True, highlight=False)
    return 0
