"""Tune thresholds: the cheapest policy whose simulated SLO attainment meets a target.

Prints the before/after table and the `pulumi config set --path ...` lines that deploy it. While
no policy meets the target, maxReplicas is searched too, up to the pools' budget for the model;
when none meets it even so, it says why, prints no lines and exits 1.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from capacity.cli.progress import counted
from capacity.cli.sim_args import add_common_arguments, emit, load_inputs, row_name, start_note
from capacity.planning.stack import apply_config_set, replica_budget
from capacity.planning.tune import config_set_lines, shortfall, tune


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument(
        "--slo-attainment",
        type=float,
        help="target share of feasible requests within the TTFT/TPOT SLO, in (0, 1] (default: the SLO objective, 0.95)",
    )
    parser.add_argument("--workers", type=int, default=2, help="parallel simulations, >= 1")


def run(args: argparse.Namespace) -> int:
    if args.slo_attainment is not None and not 0 < args.slo_attainment <= 1:
        raise ValueError(f"--slo-attainment must be in (0, 1], got {args.slo_attainment}")
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    with counted("tune", not args.json, "policies simulated") as progress:
        sm, trace, options, orc = load_inputs(args)
        ceiling = replica_budget(sm)
        result = tune(sm, trace, args.slo_attainment, options, args.workers, ceiling=ceiling, progress=progress)
    # Every printed command must deploy: the stack file with all of them applied is validated.
    apply_config_set(sm, [(f"autoscaling.{sm.model.name}.{path}", after) for path, _, after in result.changes])
    meets = result.meets_target
    lines = config_set_lines(result, sm.model.name, sm.stack) if meets else []
    before, after = (e.summary.with_oracle(orc.gpu_hours) for e in (result.baseline, result.best))  # type: ignore[union-attr]  # tune always runs its baseline and keeps a best
    payload: dict[str, Any] = {
        "target_slo_attainment": result.target,
        "evaluated_policies": result.evaluated,
        "before": before.as_dict(),
        "after": after.as_dict(),
        "changes": [{"path": p, "before": b, "after": a} for p, b, a in result.changes],
        "pulumi_config_set": lines,
        "meets_target": meets,
        "why_not": None if meets else shortfall(result, sm),
        "oracle_infeasible_intervals": orc.infeasible_intervals,
    }
    title = f"tune {sm.stack}/{sm.model.name}: cheapest policy with SLO attainment >= {result.target:.1%}"
    tuned = apply_config_set(sm, result.best.candidate.edits)
    rows = [
        (row_name("before (stack)", before, sm), payload["before"]),
        (row_name("after (tuned)", after, tuned), payload["after"]),
    ]
    emit(args, payload, rows, f"{title}\n{start_note(sm.manifest, options)}")
    if not args.json:
        console = Console()
        if not meets:
            console.print(
                f"[yellow]no policy in the search space (maxReplicas up to {result.ceiling}, the pools' budget) "
                f"meets the target: {payload['why_not']}. The closest is shown; nothing to apply.[/]",
                soft_wrap=True,
            )
        for p, b, a in result.changes:
            console.print(f"{'closest: ' if not meets else ''}{p}: {b} -> {a}")
        if meets:
            for line in lines or ["# the stack's policy is already the cheapest that meets the target"]:
                console.print(line, soft_wrap=True, highlight=False)
    return 0 if meets else 1
