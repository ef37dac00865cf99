"""Compare scaling policies on one trace: the stack's, each --policy, a static peak fleet, the oracle."""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from capacity.cli.sim_args import add_common_arguments, emit, load_inputs
from capacity.sim.from_stack import StackModel, read_policy_file
from capacity.sim.run import RunOptions, run_policy, run_static, summarize, with_oracle
from capacity.workload import traces


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument("--policy", type=Path, action="append", default=[], help="autoscaling section file (repeatable)")
    parser.add_argument("--static", type=int, help="static fleet size (default: the oracle's peak)")


def _job(job: tuple[str, StackModel, traces.Trace, RunOptions, int | None, np.ndarray]) -> dict[str, Any]:
    name, sm, trace, options, static, feasible = job
    result = run_static(sm, trace, static, options) if static else run_policy(sm, trace, options)
    return summarize(result, sm, feasible)


def run(args: argparse.Namespace) -> int:
    sm, trace, options, orc = load_inputs(args)
    static = args.static or orc.peak_replicas
    jobs = [(f"stack {sm.stack}", sm, trace, options, None, orc.feasible)]
    for path in args.policy:
        jobs.append((str(path), sm.with_policy(read_policy_file(path)), trace, options, None, orc.feasible))
    jobs.append((f"static {static}", sm, trace, options, static, orc.feasible))
    with ProcessPoolExecutor(max_workers=2) as pool:
        summaries = list(pool.map(_job, jobs))
    rows = [(name, with_oracle(summary, orc.gpu_hours)) for (name, *_), summary in zip(jobs, summaries)]
    oracle_row = {
        "gpu_hours": round(orc.gpu_hours, 3),
        "oracle_ratio": 1.0,
        "max_replicas_used": orc.peak_replicas,
        "infeasible_requests": orc.infeasible_requests,
        "oracle_infeasible_intervals": orc.infeasible_intervals,
    }
    rows.append((f"oracle ({orc.interval_s:.0f} s intervals)", oracle_row))
    title = f"{sm.stack}/{sm.model.name} ({sm.profile.name}) on {trace.name}: {len(trace)} requests"
    emit(args, {name: s for name, s in rows}, rows, title)
    return 0
