"""Replay a trace through one model's scaling policy: the stack's, a --policy file or a raw --scaledobject.

Prints the summary (or JSON with --json) and writes a timeline PNG: load, signals against
their targets, desired and ready replicas, latency against the SLO; and one HTML report of both.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from capacity.cli.progress import counted
from capacity.cli.record import made_by, run_record
from capacity.cli.sim_args import (
    add_common_arguments,
    add_scaledobject_argument,
    emit,
    load_inputs,
    row_name,
    slo_note,
    start_note,
)
from capacity.planning.html_report import HtmlFigure, write_html
from capacity.planning.report import plot_timeline, summary_html_table, timeline_caption
from capacity.planning.run import run_scaled_object, summarize
from capacity.sim.scaledobject import read_scaled_object


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument(
        "--policy",
        type=Path,
        help="autoscaling section file (stack shape: default: and per-model blocks) laid over the stack's, "
        "key by key as the stack file merges (default: the stack's own)",
    )
    add_scaledobject_argument(parser, repeatable=False)
    parser.add_argument(
        "--png",
        type=Path,
        help="timeline PNG path, in an existing directory (default: out/simulate-<stack>-<model>.png)",
    )
    parser.add_argument(
        "--html",
        type=Path,
        help="self-contained HTML report (table and timeline) path, in an existing directory "
        "(default: next to the PNG, <png name>.html)",
    )


def run(args: argparse.Namespace) -> int:
    if args.policy and args.scaledobject:
        raise ValueError("--policy and --scaledobject both replace the stack's policy: pass one")
    if args.png is not None and not args.png.parent.is_dir():
        raise ValueError(f"--png {args.png}: directory {args.png.parent} does not exist")
    if args.html is not None and not args.html.parent.is_dir():
        raise ValueError(f"--html {args.html}: directory {args.html.parent} does not exist")
    given = read_scaled_object(args.scaledobject) if args.scaledobject else None
    with counted("simulate", not args.json, "steps (the oracle, the policy)") as step:
        sm, trace, options, orc = load_inputs(args, args.policy)
        if step is not None:
            step(1, 2)
        manifest = given or sm.manifest
        result = run_scaled_object(sm, manifest, trace, options)
        if step is not None:
            step(2, 2)
    summary = summarize(result, sm, orc.feasible).with_oracle(orc.gpu_hours)
    png = args.png or Path("out") / f"simulate-{sm.stack}-{sm.model.name}.png"
    title = f"{sm.stack}/{sm.model.name} ({sm.profile.name}) on {trace.name}"
    policy = str(args.policy or args.scaledobject or f"stack {sm.stack}")
    slo = slo_note(sm) if args.policy else ""
    html = args.html or png.with_suffix(".html")
    record = run_record(args)
    payload = {
        **summary.as_dict(),
        "oracle_infeasible_intervals": orc.infeasible_intervals,
        "timeline_png": str(
            plot_timeline(
                result,
                png,
                title,
                asdict(summary.slo),
                made_by(record),
                bounds=(manifest.min_replicas, manifest.max_replicas),
            )
        ),
        "policy": policy,
        "html_report": str(html),
        "run": record,
    }
    name = policy if given else row_name(policy + slo, summary, sm)
    emit(args, payload, [(name, payload)], f"{title}\n{start_note(manifest, options)}")
    write_html(
        html,
        title,
        [start_note(manifest, options), made_by(record)],
        [summary_html_table([(name, payload)], "summary")],
        [HtmlFigure(png, timeline_caption(result))],
    )
    if not args.json:
        Console().print(f"timeline: {png}\nreport: {html}")
    return 0
