"""`python -m capacity simulate | compare | tune`: argument parsing and printing only."""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console

from capacity import traces
from capacity.sim.report import plot_timeline, print_table
from capacity.sim.run import RunOptions, run_oracle, run_policy, run_static, summarize
from capacity.sim.stack import StackModel, load_stack_model, read_policy_file
from capacity.tune import config_set_lines, tune


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", "-s", required=True, help="stack name (reads Pulumi.<stack>.yaml) or a stack file path")
    p.add_argument("--model", help="served model name (default: the stack's first model)")
    p.add_argument("--profile", help="engine profile (default: the model's capacityProfile)")
    p.add_argument("--trace", required=True, help="Azure CSV, JSONL, or synthetic:KIND[:k=v,...]")
    p.add_argument("--rate-scale", type=float, default=1.0, help="x times the requests over the same duration")
    p.add_argument("--time-scale", type=float, default=1.0, help="stretch the trace's time by this factor")
    p.add_argument("--router", choices=["least-outstanding", "round-robin"], default="least-outstanding")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--initial-replicas", type=int, help="warm replicas at t=0 (default: minReplicas)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the three simulator commands to the `capacity` CLI."""
    sim = subparsers.add_parser("simulate", help="replay a trace through a stack's scaling policy")
    _common(sim)
    sim.add_argument("--policy", type=Path, help="autoscaling section (stack shape) replacing the stack's")
    sim.add_argument("--png", type=Path, help="timeline PNG path (default: out/simulate-<stack>-<model>.png)")
    sim.set_defaults(func=cmd_simulate)

    cmp = subparsers.add_parser("compare", help="several policies, a static peak fleet and the oracle on one trace")
    _common(cmp)
    cmp.add_argument("--policy", type=Path, action="append", default=[], help="repeatable")
    cmp.add_argument("--static", type=int, help="static fleet size (default: the oracle's peak)")
    cmp.set_defaults(func=cmd_compare)

    tun = subparsers.add_parser("tune", help="cheapest thresholds meeting an SLO-attainment target")
    _common(tun)
    tun.add_argument("--slo-attainment", type=float, default=0.99)
    tun.add_argument("--workers", type=int, default=2)
    tun.set_defaults(func=cmd_tune)


def _load(args: argparse.Namespace, policy: Path | None = None) -> tuple[StackModel, traces.Trace, RunOptions]:
    sm = load_stack_model(args.stack, args.model, args.profile, policy)
    trace = traces.load(args.trace)
    if args.time_scale != 1.0:
        trace = traces.time_scale(trace, args.time_scale)
    if args.rate_scale != 1.0:
        trace = traces.rate_scale(trace, args.rate_scale, seed=args.seed)
    options = RunOptions(router=args.router, seed=args.seed, initial_replicas=args.initial_replicas)
    return sm, trace, options


def _emit(args: argparse.Namespace, payload: Any, rows: list[tuple[str, dict]], title: str) -> None:
    if args.json:
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_table(rows, title)


def cmd_simulate(args: argparse.Namespace) -> int:
    sm, trace, options = _load(args, args.policy)
    result = run_policy(sm, trace, options)
    orc = run_oracle(sm, trace, options)
    summary = summarize(result, sm, orc.gpu_hours)
    png = args.png or Path("out") / f"simulate-{sm.stack}-{sm.model.name}.png"
    title = f"{sm.stack}/{sm.model.name} ({sm.profile.name}) on {trace.name}"
    summary["timeline_png"] = str(plot_timeline(result, png, title, summary["slo"]))
    summary["policy"] = str(args.policy) if args.policy else f"stack {sm.stack}"
    _emit(args, summary, [(summary["policy"], summary)], title)
    if not args.json:
        Console().print(f"timeline: {png}")
    return 0


def _job(job: tuple[str, StackModel, traces.Trace, RunOptions, int | None]) -> dict[str, Any]:
    name, sm, trace, options, static = job
    result = run_static(sm, trace, static, options) if static else run_policy(sm, trace, options)
    return summarize(result, sm, None)


def cmd_compare(args: argparse.Namespace) -> int:
    sm, trace, options = _load(args)
    orc = run_oracle(sm, trace, options)
    static = args.static or orc.peak_replicas
    jobs = [(f"stack {sm.stack}", sm, trace, options, None)]
    for path in args.policy:
        jobs.append((str(path), sm.with_policy(read_policy_file(path)), trace, options, None))
    jobs.append((f"static {static}", sm, trace, options, static))
    with ProcessPoolExecutor(max_workers=2) as pool:
        summaries = list(pool.map(_job, jobs))
    rows = []
    for (name, *_), summary in zip(jobs, summaries):
        summary["oracle_gpu_hours"] = round(orc.gpu_hours, 3)
        summary["oracle_ratio"] = round(summary["gpu_hours"] / orc.gpu_hours, 3) if orc.gpu_hours else None
        rows.append((name, summary))
    oracle_row = {"gpu_hours": round(orc.gpu_hours, 3), "oracle_ratio": 1.0, "max_replicas_used": orc.peak_replicas}
    rows.append((f"oracle ({orc.interval_s:.0f} s intervals)", oracle_row))
    title = f"{sm.stack}/{sm.model.name} ({sm.profile.name}) on {trace.name}: {len(trace)} requests"
    _emit(args, {name: s for name, s in rows}, rows, title)
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    if not 0 < args.slo_attainment <= 1:
        raise ValueError(f"--slo-attainment must be in (0, 1], got {args.slo_attainment}")
    sm, trace, options = _load(args)
    result = tune(sm, trace, args.slo_attainment, options, workers=args.workers)
    lines = config_set_lines(result, sm.model.name, sm.stack)
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
    _emit(args, payload, [("before (stack)", result.baseline.summary), ("after (tuned)", result.best.summary)], title)
    if not args.json:
        console = Console()
        if not payload["meets_target"]:
            console.print("[yellow]no policy in the search space meets the target; the closest one is shown[/]")
        for p, b, a in result.changes:
            console.print(f"{p}: {b} -> {a}")
        for line in lines or ["# the stack's policy is already the cheapest that meets the target"]:
            console.print(line, soft_wrap=True, highlight=False)
    return 0
