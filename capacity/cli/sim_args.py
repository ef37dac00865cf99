"""Shared plumbing of the simulator commands (`simulate`, `compare`, `tune`): arguments, loading, printing."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from capacity.sim.cluster.router import ROUTERS
from capacity.sim.from_stack import StackModel, load_stack_model
from capacity.sim.oracle import OracleResult
from capacity.sim.report import print_table
from capacity.sim.run import RunOptions, run_oracle
from capacity.workload import traces


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", "-s", required=True, help="stack name (reads Pulumi.<stack>.yaml) or a stack file path")
    p.add_argument("--model", help="served model name (default: the stack's first model)")
    p.add_argument("--profile", help="engine profile (default: the model's capacityProfile)")
    p.add_argument("--trace", required=True, help="Azure CSV, JSONL, or synthetic:KIND[:k=v,...]")
    p.add_argument("--rate-scale", type=float, default=1.0, help="x times the requests over the same duration")
    p.add_argument("--time-scale", type=float, default=1.0, help="stretch the trace's time by this factor")
    p.add_argument("--router", choices=ROUTERS, default="least-request", help="least-request = Envoy P2C (the gateway default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--initial-replicas", type=int, help="warm replicas at t=0 (default: minReplicas)")
    p.add_argument(
        "--prometheus-outage",
        type=_outage,
        action="append",
        default=[],
        metavar="START:END",
        help="seconds when every trigger query fails (KEDA fallback); repeatable",
    )
    p.add_argument(
        "--oracle-interval", type=float, default=300.0, help="seconds per oracle interval (longer = faster, looser)"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def add_scaledobject_argument(p: argparse.ArgumentParser, repeatable: bool) -> None:
    help_text = "a raw KEDA ScaledObject manifest (prometheus triggers within the simulator's PromQL subset, cron)"
    if repeatable:
        p.add_argument("--scaledobject", type=Path, action="append", default=[], help=help_text + "; repeatable")
    else:
        p.add_argument("--scaledobject", type=Path, help=help_text + "; replaces the stack's policy")


def _outage(text: str) -> tuple[float, float]:
    start, sep, end = text.partition(":")
    try:
        window = (float(start), float(end))
    except ValueError:
        window = (0.0, -1.0)
    if not sep or window[1] <= window[0]:
        raise argparse.ArgumentTypeError(f"{text!r} is not START:END seconds with END > START")
    return window


def load_inputs(
    args: argparse.Namespace, policy: Path | None = None
) -> tuple[StackModel, traces.Trace, RunOptions, OracleResult]:
    """Stack model, trace and options; the oracle too, whose first interval warms the fleet."""
    sm = load_stack_model(args.stack, args.model, args.profile, policy)
    trace = traces.load(args.trace)
    if args.time_scale != 1.0:
        trace = traces.time_scale(trace, args.time_scale)
    if args.rate_scale != 1.0:
        trace = traces.rate_scale(trace, args.rate_scale, seed=args.seed)
    options = RunOptions(
        router=args.router,
        seed=args.seed,
        initial_replicas=args.initial_replicas,
        metrics_outages=tuple(args.prometheus_outage),
        oracle_interval_s=args.oracle_interval,
    )
    if args.oracle_interval <= 0:
        raise ValueError(f"--oracle-interval must be > 0 seconds, got {args.oracle_interval}")
    orc = run_oracle(sm, trace, options)
    warm = int(orc.replicas[0]) if len(orc.replicas) else None
    return sm, trace, replace(options, warm_start=warm), orc


def emit(args: argparse.Namespace, payload: Any, rows: list[tuple[str, dict]], title: str) -> None:
    if args.json:
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_table(rows, title)
