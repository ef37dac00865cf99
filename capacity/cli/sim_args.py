"""Shared plumbing of the simulator commands (`simulate`, `compare`, `tune`): arguments, loading, printing."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from capacity.cli.stack_args import add_stack_arguments, profile_help, stack_file
from capacity.planning.report import print_table
from capacity.planning.run import RunOptions, RunSummary, initial_replicas, run_oracle
from capacity.planning.stack import StackModel, load_stack_model
from capacity.sim.cluster.router import ROUTERS
from capacity.sim.oracle import OracleResult
from capacity.sim.scaledobject import Manifest
from capacity.workload import traces


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    add_stack_arguments(p)
    p.add_argument("--model", help="served model name (default: the stack's first model)")
    p.add_argument("--profile", help=profile_help() + " (default: the model's capacityProfile)")
    p.add_argument("--trace", required=True, help=traces.SOURCES)
    p.add_argument("--rate-scale", type=float, default=1.0, help="x times the requests over the same duration")
    p.add_argument("--time-scale", type=float, default=1.0, help="stretch the trace's time by this factor")
    p.add_argument(
        "--router",
        choices=ROUTERS,
        help="least-request = Envoy P2C; endpoint-picker = the Inference Extension's EPP with the inferencepool "
        "chart's default scorers (queue, KV-cache utilisation, prefix cache) (default: the model's serving.routing)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the simulation's random draws")
    # A trace is a window of a running day: starting it from minReplicas would measure a cold
    # start the deployed policy meets only after idling, and mix it into the steady attainment.
    p.add_argument(
        "--initial-replicas",
        type=int,
        metavar="N",
        help="warm replicas at t=0, 0..maxReplicas (default: what the oracle needs for the first "
        "--oracle-interval, within minReplicas..maxReplicas, as if the policy had been running "
        "before the trace; the table's title shows it; pass the minReplicas value for a cold start)",
    )
    p.add_argument(
        "--prometheus-outage",
        type=_outage,
        action="append",
        default=[],
        metavar="START:END",
        help="seconds when every trigger query fails (KEDA fallback); repeatable (default: none)",
    )
    p.add_argument(
        "--oracle-interval", type=float, default=300.0, help="seconds per oracle interval (longer = faster, looser)"
    )
    p.add_argument(
        "--oracle-attainment",
        type=float,
        metavar="FRACTION",
        help="share of requests the oracle sizes each interval for, in (0, 1] (default: the SLO's "
        "objective, 0.95; use the planner's --slo-attainment to compare with a plan)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--wide", action="store_true", help="every column (e2e p99, failed, infeasible), ~170 columns wide")


def fleet_ceiling(sm: StackModel) -> tuple[int, str]:
    """The most replicas the policy can run, and what sets it: maxReplicas or the pools' GPU limits."""
    held = sm.pool_replicas
    if held < sm.policy.max_replicas:
        return held, f"the pools' GPU limit, {held} replicas"
    return sm.policy.max_replicas, f"maxReplicas {sm.policy.max_replicas}"


def row_name(name: str, summary: RunSummary, sm: StackModel) -> str:
    """A table row's name, saying so when the fleet was pinned at its ceiling (more demand than
    the policy may serve: its SLO misses are capacity, not reaction)."""
    ceiling, what = fleet_ceiling(sm)
    return f"{name} (pinned at {what})" if summary.max_replicas_used >= ceiling else name


def slo_note(sm: StackModel) -> str:
    """' (SLO ...; the stack's: ...)' when the policy simulated judges requests by another SLO
    than the stack file's own for the model (a policy file that sets `slo`), else ''."""
    own = sm.source.settings().autoscaling_for(sm.model.name).slo
    slo = sm.policy.slo
    if (slo.ttft_p95_seconds, slo.tpot_p95_seconds) == (own.ttft_p95_seconds, own.tpot_p95_seconds):
        return ""
    return (
        f" (SLO TTFT/TPOT {slo.ttft_p95_seconds:g}/{slo.tpot_p95_seconds:g} s; "
        f"stack {own.ttft_p95_seconds:g}/{own.tpot_p95_seconds:g} s)"
    )


def start_note(manifest: Manifest, options: RunOptions) -> str:
    """How many warm replicas a ScaledObject's runs start from, and why (the --initial-replicas default)."""
    n = initial_replicas(manifest, options)
    if options.initial_replicas is not None:
        return f"starts from {n} warm replicas (--initial-replicas)"
    return (
        f"starts from {n} warm replicas: the oracle's fleet for the first {options.oracle_interval_s:g} s "
        f"within minReplicas {manifest.min_replicas}..maxReplicas {manifest.max_replicas}"
    )


def starts_note(stack: Manifest, others: Sequence[tuple[str, Manifest]], options: RunOptions) -> str:
    """`start_note` of the stack's policy, and the warm start of every other ScaledObject that starts
    elsewhere (each within its own minReplicaCount..maxReplicaCount)."""
    own = initial_replicas(stack, options)
    starts: dict[str, set[int]] = {}
    for _, m in others:
        if (n := initial_replicas(m, options)) != own:
            starts.setdefault(m.name, set()).add(n)
    elsewhere = [f"{name} {'/'.join(map(str, sorted(ns)))}" for name, ns in starts.items()]
    note = start_note(stack, options)
    return note + (f"\nother ScaledObjects start within their own bounds: {', '.join(elsewhere)}" if elsewhere else "")


def add_scaledobject_argument(p: argparse.ArgumentParser, repeatable: bool) -> None:
    help_text = "a raw KEDA ScaledObject manifest (prometheus triggers within the simulator's PromQL subset, cron)"
    if repeatable:
        p.add_argument(
            "--scaledobject", type=Path, action="append", default=[], help=help_text + "; repeatable (default: none)"
        )
    else:
        p.add_argument("--scaledobject", type=Path, help=help_text + "; replaces the stack's policy (default: none)")


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
    sm = load_stack_model(stack_file(args), args.model, args.profile, policy)
    for flag, value in (
        ("--oracle-interval", args.oracle_interval),
        ("--rate-scale", args.rate_scale),
        ("--time-scale", args.time_scale),
    ):
        if value <= 0:
            raise ValueError(f"{flag} must be > 0, got {value}")
    if args.oracle_attainment is not None and not 0 < args.oracle_attainment <= 1:
        raise ValueError(f"--oracle-attainment must be in (0, 1], got {args.oracle_attainment}")
    if args.initial_replicas is not None and not 0 <= args.initial_replicas <= sm.policy.max_replicas:
        raise ValueError(
            f"--initial-replicas must be within 0..maxReplicas ({sm.policy.max_replicas}) "
            f"of {sm.stack}/{sm.model.name}, got {args.initial_replicas}"
        )
    trace = traces.load(args.trace)
    if not len(trace):
        raise ValueError(f"--trace {args.trace}: no requests to simulate")
    if args.time_scale != 1.0:
        trace = traces.time_scale(trace, args.time_scale)
    trace = traces.rate_scale(trace, args.rate_scale, seed=args.seed)  # the same trace at 1
    options = RunOptions(
        router=args.router,
        seed=args.seed,
        initial_replicas=args.initial_replicas,
        metrics_outages=tuple(args.prometheus_outage),
        oracle_interval_s=args.oracle_interval,
        oracle_objective=args.oracle_attainment,
    )
    orc = run_oracle(sm, trace, options)
    warm = int(orc.replicas[0]) if len(orc.replicas) else None
    return sm, trace, replace(options, warm_start=warm), orc


def emit(args: argparse.Namespace, payload: Any, rows: Sequence[tuple[str, Mapping[str, Any]]], title: str) -> None:
    """The JSON payload with --json, else the table of `rows` (each a summary as its JSON gives it)."""
    if args.json:
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_table(rows, title, wide=args.wide)
