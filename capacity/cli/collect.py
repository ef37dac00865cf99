"""Read the KEDA triggers' queries (and the load behind them) from Prometheus over the last window."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict

from capacity.cli.stack_args import add_stack_arguments, stack_file
from capacity.measure.collector import collect, scaling_queries
from capacity.measure.prometheus import PrometheusClient
from capacity.measure.recommend import current_values
from capacity.tables import cell
from contract import signals


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prometheus", required=True, help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    parser.add_argument("--model", required=True, help="served model name (the model_name label)")
    parser.add_argument("--namespace", default=None, help="namespace label inside a cluster (default: any namespace)")
    parser.add_argument("--last", type=float, default=300.0, help="window: the last N seconds")
    parser.add_argument("--step", type=float, default=15.0, help="range step, seconds (KEDA polls every 15 s)")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="model seconds per wall second (a mock's --speedup): windows shrink by it",
    )
    add_stack_arguments(
        parser, None, what="take windows and quantiles from its autoscaling policy for --model", profiles=False
    )
    parser.add_argument("--json", action="store_true", help="print the readings (with their samples) as JSON")


def run(args: argparse.Namespace) -> int:
    policy = None
    if args.stack:
        policy, why_not = current_values(stack_file(args), args.model)
        if policy is None:
            raise ValueError(f"--stack {args.stack}: {why_not}")
    queries = scaling_queries(signals.Scope(args.model, args.namespace), policy, time_scale=args.time_scale)
    client = PrometheusClient(args.prometheus)
    end = time.time()
    try:
        client.require_ready()
        readings = collect(client, queries, end - args.last, end, args.step, args.time_scale)
    finally:
        client.close()
    if args.json:
        print(json.dumps({k: asdict(v) for k, v in readings.items()}, indent=2))
        return 0
    for r in readings.values():
        print(
            f"{r.name:30s} now {cell(r.instant, '.3g'):>8s}  mean {cell(r.mean, '.3g'):>8s}  "
            f"max {cell(r.max, '.3g'):>8s}   {r.query}"
        )
    return 0
