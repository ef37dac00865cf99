"""Compare policies on one trace: the stack's, files, reference ScaledObjects, a static fleet, the oracle."""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from capacity.cli.progress import counted
from capacity.cli.record import made_by, run_record
from capacity.cli.sim_args import (
    add_common_arguments,
    add_scaledobject_argument,
    emit,
    load_inputs,
    row_name,
    slo_note,
    starts_note,
)
from capacity.planning.html_report import HtmlFigure, write_html
from capacity.planning.report import COMPARISON_CAPTION, plot_comparison, summary_html_table
from capacity.planning.run import (
    RunOptions,
    RunSummary,
    oracle_targets,
    run_oracle,
    run_policy,
    run_scaled_object,
    run_static,
    since,
    summarize,
)
from capacity.planning.space import REFERENCE_DESIGNS
from capacity.planning.stack import StackModel
from capacity.runtime import worker_pool
from capacity.sim.cluster.router import RouterName
from capacity.sim.scaledobject import Manifest, read_scaled_object
from capacity.workload import traces

# The designs this project grew from, as raw ScaledObjects (issue 13); the planner seeds its studies with them too.
REFERENCE_POLICIES = REFERENCE_DESIGNS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument(
        "--policy",
        type=Path,
        action="append",
        default=[],
        help="autoscaling section file (stack shape) laid over the stack's, key by key; repeatable (default: none)",
    )
    add_scaledobject_argument(parser, repeatable=True)
    parser.add_argument(
        "--no-references",
        action="store_true",
        help="leave out the reference ScaledObjects (capacity/policies/reference/, shipped with the tools)",
    )
    parser.add_argument(
        "--score-after",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help="score and bill only the trace after this fraction of its time, in [0, 1); every policy "
        "still runs from the start (the planner's validation part: 0.7; default: 0, all of it)",
    )
    parser.add_argument("--static", type=int, metavar="N", help="static fleet size, >= 1 (default: the oracle's peak)")
    parser.add_argument(
        "--html",
        type=Path,
        help="self-contained HTML report (table and comparison chart) path, in an existing directory; "
        "the chart's PNG is written next to it (default: out/compare-<stack>-<model>.html)",
    )


# (row name, stack model, trace, options, how: a static size | a raw ScaledObject | None = the stack's
# policy, the oracle's feasibility mask, the second from which it is scored)
Job = tuple[str, StackModel, traces.Trace, RunOptions, "int | Manifest | None", np.ndarray, float]


def _job(job: Job) -> RunSummary:
    _name, sm, trace, options, how, feasible, cut = job
    if isinstance(how, Manifest):
        result = run_scaled_object(sm, how, trace, options)
    else:
        result = run_static(sm, trace, how, options) if how else run_policy(sm, trace, options)
    # A held-out part is billed to the last arrival, like the oracle; a whole run as it ran.
    scored, keep = since(result, cut, trace.duration if cut else math.inf)
    return summarize(scored, sm, feasible[keep])


def run(args: argparse.Namespace) -> int:
    if args.static is not None and args.static < 1:
        raise ValueError(f"--static must be >= 1 replica, got {args.static}")
    if not 0 <= args.score_after < 1:
        raise ValueError(f"--score-after must be in [0, 1), got {args.score_after}")
    if args.html is not None and not args.html.parent.is_dir():
        raise ValueError(f"--html {args.html}: directory {args.html.parent} does not exist")
    references = [] if args.no_references else sorted(REFERENCE_POLICIES.glob("*.yaml"))
    manifests = [read_scaled_object(path) for path in [*args.scaledobject, *references]]
    sm, trace, options, orc = load_inputs(args)
    held = sm.pool_replicas
    if args.static is not None and args.static > held:
        raise ValueError(
            f"--static {args.static} is more replicas than the GPU limits of "
            f"{sm.stack}/{sm.model.name}'s pools hold ({held})"
        )
    # The default static fleet is the oracle's peak, within what the pools hold (a bigger one
    # would run as the pools' limit under a label that says otherwise).
    static = args.static if args.static is not None else min(orc.peak_replicas, held)
    static_label = f"static {static}"
    if args.static is None and orc.peak_replicas > held:
        static_label += f" (the pools' limit; the whole trace's oracle peaks at {orc.peak_replicas})"
    cut = trace.duration * args.score_after
    feasible = orc.feasible  # per request of the whole trace; each run keeps its scored part's
    if cut:  # the oracle of the scored part only
        orc = run_oracle(sm, trace.window(cut, math.inf), options)
    jobs: list[Job] = [(f"stack {sm.stack}", sm, trace, options, None, feasible, cut)]
    if args.router is None and trace.block_ids is not None:
        # prefixes are known: the stack's policy behind the other router too (least-request vs
        # the endpoint picker on the same trace)
        other: RouterName = "endpoint-picker" if sm.routing == "least-request" else "least-request"
        jobs.append(
            (f"stack {sm.stack}, routing {other}", sm, trace, replace(options, router=other), None, feasible, cut)
        )
    for path in args.policy:
        candidate = sm.with_policy_file(path)
        jobs.append((f"{path}{slo_note(candidate)}", candidate, trace, options, None, feasible, cut))
    for path, manifest in zip([*args.scaledobject, *references], manifests):
        label = f"reference {manifest.name}" if path in references else str(path)
        jobs.append((label, sm, trace, options, manifest, feasible, cut))
        if path in references and manifest.max_replicas < held:
            # The reference's signals and behaviour with this stack's fleet limit: a fair match
            # for a design written for a smaller cluster.
            jobs.append(
                (
                    f"{label} at the pools' limit ({held})",
                    sm,
                    trace,
                    options,
                    replace(manifest, max_replicas=held),
                    feasible,
                    cut,
                )
            )
    jobs.append((static_label, sm, trace, options, static, feasible, cut))
    with counted(f"compare {sm.stack}/{sm.model.name}", not args.json, "policies simulated") as progress:
        with worker_pool(2) as pool:
            summaries = []
            for summary in pool.map(_job, jobs):
                summaries.append(summary)
                if progress is not None:
                    progress(len(summaries), len(jobs))
    rows: list[tuple[str, dict[str, Any]]] = [
        (name, summary.with_oracle(orc.gpu_hours).as_dict()) for (name, *_), summary in zip(jobs, summaries)
    ]
    oracle_row = {
        "gpu_hours": round(orc.gpu_hours, 3),
        "oracle_ratio": 1.0,
        "max_replicas_used": orc.peak_replicas,
        "infeasible_requests": orc.infeasible_requests,
        "oracle_infeasible_intervals": orc.infeasible_intervals,
    }
    sized_for = oracle_targets(sm, options).objective
    rows.append((f"oracle ({orc.interval_s:.0f} s intervals, sized for {sized_for * 100:g}%)", oracle_row))
    scored = int((trace.arrivals >= cut).sum())
    part = f", scored after {args.score_after:.0%} of its time ({scored} requests)" if cut else ""
    title = f"{sm.stack}/{sm.model.name} ({sm.profile.name}) on {trace.name}: {len(trace)} requests{part}"
    # the table names a policy pinned at its ceiling; the JSON keys stay the plain names
    table = [
        (row_name(name, summary, model) if how is None else name, row)
        for (name, model, _, _, how, _, _), summary, (_, row) in zip(jobs, summaries, rows)
    ]
    table.append(rows[-1])
    raw = [(name, how) for name, _, _, _, how, _, _ in jobs if isinstance(how, Manifest)]
    note = starts_note(sm.manifest, raw, options)
    emit(args, {name: s for name, s in rows}, table, f"{title}\n{note}")
    html = args.html or Path("out") / f"compare-{sm.stack}-{sm.model.name}.html"
    # The JSON stays a map of policy name -> summary; the reports record how the run was made.
    made = made_by(run_record(args))
    png = plot_comparison(table, html.with_suffix(".png"), title, rows[0][1]["slo"]["objective"], sized_for, made)
    write_html(
        html,
        title,
        [note, made],
        [summary_html_table(table, "policies")],
        [HtmlFigure(png, COMPARISON_CAPTION)],
    )
    if not args.json:
        print(f"report: {html}")
    return 0
