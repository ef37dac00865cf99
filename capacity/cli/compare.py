"""Compare scaling policies on one trace: the stack's, each --policy and --scaledobject, the reference ScaledObjects, a static peak fleet, the oracle."""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from capacity.cli.sim_args import add_common_arguments, add_scaledobject_argument, emit, load_inputs
from capacity.sim.from_stack import StackModel, read_policy_file
from capacity.sim.run import RunOptions, run_policy, run_static, summarize, with_oracle
from capacity.sim.scaledobject import Manifest, read_scaled_object, run_scaled_object
from capacity.workload import traces

# The designs this project grew from, as raw ScaledObjects (issue 13).
REFERENCE_POLICIES = Path(__file__).resolve().parents[1] / "policies" / "reference"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument("--policy", type=Path, action="append", default=[], help="autoscaling section file (repeatable)")
    add_scaledobject_argument(parser, repeatable=True)
    parser.add_argument(
        "--no-references", action="store_true", help=f"leave out the reference ScaledObjects ({REFERENCE_POLICIES})"
    )
    parser.add_argument("--static", type=int, help="static fleet size (default: the oracle's peak)")


Job = tuple[str, StackModel, traces.Trace, RunOptions, "int | Manifest | None"]


def _job(job: Job) -> dict[str, Any]:
    name, sm, trace, options, how = job
    if isinstance(how, Manifest):
        return summarize(run_scaled_object(sm, how, trace, options), sm)
    result = run_static(sm, trace, how, options) if how else run_policy(sm, trace, options)
    return summarize(result, sm)


def run(args: argparse.Namespace) -> int:
    references = [] if args.no_references else sorted(REFERENCE_POLICIES.glob("*.yaml"))
    manifests = [read_scaled_object(path) for path in [*args.scaledobject, *references]]
    sm, trace, options, orc = load_inputs(args)
    static = args.static or orc.peak_replicas
    jobs: list[Job] = [(f"stack {sm.stack}", sm, trace, options, None)]
    for path in args.policy:
        jobs.append((str(path), sm.with_policy(read_policy_file(path)), trace, options, None))
    for path, manifest in zip([*args.scaledobject, *references], manifests):
        label = f"reference {manifest.name}" if path in references else str(path)
        jobs.append((label, sm, trace, options, manifest))
    jobs.append((f"static {static}", sm, trace, options, static))
    with ProcessPoolExecutor(max_workers=2) as pool:
        summaries = list(pool.map(_job, jobs))
    rows = [(name, with_oracle(summary, orc.gpu_hours)) for (name, *_), summary in zip(jobs, summaries)]
    oracle_row = {
        "gpu_hours": round(orc.gpu_hours, 3),
        "oracle_ratio": 1.0,
        "max_replicas_used": orc.peak_replicas,
        "infeasible_intervals": orc.infeasible,
    }
    rows.append((f"oracle ({orc.interval_s:.0f} s intervals)", oracle_row))
    title = f"{sm.stack}/{sm.model.name} ({sm.profile.name}) on {trace.name}: {len(trace)} requests"
    emit(args, {name: s for name, s in rows}, rows, title)
    return 0
