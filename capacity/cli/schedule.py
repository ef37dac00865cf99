"""Derive a KEDA cron window that pre-warms for a recurring peak, and judge it against the reactive policy.

The window comes from the first days of a trace of two days or more and is judged on its last day
(a one-day synthetic trace is judged on the same spec with the next seed). Prints the schedule,
the reactive vs reactive + schedule table, and the `pulumi config set --path` lines only when the
schedule is cheaper at equal or better SLO attainment.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from capacity.cli.progress import Counted, counted
from capacity.cli.record import made_by, run_record
from capacity.cli.sim_args import add_common_arguments, emit, load_inputs
from capacity.planning.html_report import HtmlFigure, write_html
from capacity.planning.report import DAILY_NEED_CAPTION, plot_daily_need, summary_html_table
from capacity.planning.run import RunOptions, run_oracle, run_policy, summarize
from capacity.planning.schedule import (
    DAY_S,
    EVERY_DAY,
    Schedule,
    daily_needs,
    derive,
    later_part,
    origin_utc,
    whole_days,
)
from capacity.planning.stack import StackModel, apply_config_set, config_command
from capacity.sim.oracle import OracleResult
from capacity.workload import traces


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser)
    parser.add_argument(
        "--png",
        type=Path,
        help="daily-need PNG path, in an existing directory (default: out/schedule-<stack>-<model>.png)",
    )
    parser.add_argument(
        "--html",
        type=Path,
        help="self-contained HTML report (table, window, commands, chart) path, in an existing directory "
        "(default: next to the PNG, <png name>.html)",
    )


def cron_hour(cron: str) -> float:
    """The hour of day a 5-field cron line fires at (its minute and hour fields)."""
    minute, hour = cron.split()[:2]
    return int(hour) + int(minute) / 60


@dataclass(frozen=True)
class Judged:
    """The day a schedule is judged on, and what the oracle knows of it."""

    trace: traces.Trace
    derive_s: float  # the schedule is derived from the trace's first `derive_s` seconds
    how: str
    feasible: np.ndarray
    oracle_gpu_hours: float


def judged_day(
    args: argparse.Namespace, sm: StackModel, trace: traces.Trace, orc: OracleResult, options: RunOptions
) -> Judged:
    """The trace's last day (derive on the days before), or for a one-day synthetic trace the same
    spec with the next seed (derive on the whole trace)."""
    span_s = trace.duration
    if args.trace.startswith("synthetic:"):  # its last request may come well before the end it was drawn to
        span_s = traces.parse_synthetic(args.trace)[1]["duration"] * args.time_scale
    days = whole_days(span_s)
    if days >= 2:
        derive_s = (days - 1) * DAY_S
        lo, hi = np.searchsorted(trace.arrivals, [derive_s, derive_s + DAY_S])
        first = round(derive_s / orc.interval_s)
        needed = orc.replicas[first : first + round(DAY_S / orc.interval_s)]
        how = f"derived on day{'s 1-' if days > 2 else ' '}{days - 1}, judged on day {days}"
        gpu_hours = float(needed.sum()) * orc.interval_s / 3600 * sm.model.gpus_per_replica
        return Judged(later_part(trace, derive_s, DAY_S), derive_s, how, orc.feasible[lo:hi], gpu_hours)
    if days < 1:
        raise ValueError(f"--trace {args.trace}: spans {span_s / 3600:.1f} h; a schedule needs a day or more")
    if not args.trace.startswith("synthetic:"):
        raise ValueError(
            f"--trace {args.trace}: one day only; two days or more are needed to judge the schedule "
            "on a day it was not derived on"
        )
    seed = int(traces.parse_synthetic(args.trace)[1]["seed"]) + 1
    judge = traces.load(args.trace + ("," if args.trace.count(":") == 2 else ":") + f"seed={seed}")
    if args.time_scale != 1.0:
        judge = traces.time_scale(judge, args.time_scale)
    judge = traces.rate_scale(judge, args.rate_scale, seed=args.seed)
    judged = run_oracle(sm, judge, options)
    how = f"one-day synthetic trace: derived on seed {seed - 1}, judged on seed {seed}"
    return Judged(judge, DAY_S, how, judged.feasible, judged.gpu_hours)


def config_set_lines(schedule: Schedule, sm: StackModel) -> list[str]:
    return [config_command(edit, sm.stack) for edit in schedule.config_edits(sm.model.name)]


def run(args: argparse.Namespace) -> int:
    for flag, path in (("--png", args.png), ("--html", args.html)):
        if path is not None and not path.parent.is_dir():
            raise ValueError(f"{flag} {path}: directory {path.parent} does not exist")
    with counted("schedule", not args.json, "steps (oracle, judged day, reactive, with the window)") as step:
        return _run(args, step or (lambda done, total: None))


def _run(args: argparse.Namespace, step: Counted) -> int:
    sm, trace, options, orc = load_inputs(args)
    step(1, 4)
    day = judged_day(args, sm, trace, orc, options)
    step(2, 4)
    judge, split, feasible = day.trace, day.how, day.feasible
    derive_intervals = round(day.derive_s / orc.interval_s)
    schedule = derive(sm, orc.replicas[:derive_intervals], orc.interval_s, origin_utc(trace))
    # Warm start on the judged day: the recurring need at its first time of day.
    needs = daily_needs(orc.replicas[:derive_intervals], orc.interval_s, origin_utc(trace), EVERY_DAY)
    first_slot = int(
        (origin_utc(judge) - origin_utc(judge).replace(hour=0, minute=0, second=0, microsecond=0)).total_seconds()
        // orc.interval_s
    )
    judge_options: RunOptions = replace(options, warm_start=int(needs[first_slot]))
    reactive = summarize(run_policy(sm, judge, judge_options), sm, feasible).with_oracle(day.oracle_gpu_hours)
    step(3, 4)
    payload: dict[str, Any] = {
        "split": split,
        "schedule": None,
        "reactive": reactive.as_dict(),
        "reactive_schedule": None,
        "recommended": False,
        "reason": None,
        "pulumi_config_set": [],
    }
    rows = [("reactive (stack)", payload["reactive"])]
    if schedule is None:
        payload["reason"] = (
            f"no time of day needs more than minReplicas {sm.policy.min_replicas} often enough to be worth a window"
        )
    else:
        scheduled_sm = apply_config_set(sm, schedule.config_edits(sm.model.name))
        scheduled_run = run_policy(scheduled_sm, judge, judge_options)
        scheduled = summarize(scheduled_run, sm, feasible).with_oracle(day.oracle_gpu_hours)
        step(4, 4)
        rows.append(("reactive + schedule", scheduled.as_dict()))
        cheaper = scheduled.cost_usd < reactive.cost_usd
        as_good = scheduled.slo_attainment >= reactive.slo_attainment
        payload.update(
            schedule={
                "start": schedule.start,
                "end": schedule.end,
                "timezone": schedule.timezone,
                "desiredReplicas": schedule.desired_replicas,
                "lead_s": schedule.lead_s,
                "other_windows_wanted": schedule.other_windows,
            },
            reactive_schedule=scheduled.as_dict(),
            recommended=cheaper and as_good,
        )
        if not as_good:
            payload["reason"] = (
                f"lower SLO attainment with the schedule ({scheduled.slo_attainment:.2%} vs "
                f"{reactive.slo_attainment:.2%})"
            )
        elif not cheaper:
            payload["reason"] = (
                f"not cheaper with the schedule (${scheduled.cost_usd:.2f} vs "
                f"${reactive.cost_usd:.2f}) at equal or better attainment"
            )
        else:
            payload["pulumi_config_set"] = config_set_lines(schedule, sm)
    title = f"schedule {sm.stack}/{sm.model.name} on {trace.name}: {split}"
    record = run_record(args)
    png = args.png or Path("out") / f"schedule-{sm.stack}-{sm.model.name}.png"
    html = args.html or png.with_suffix(".html")
    window = (cron_hour(schedule.start), cron_hour(schedule.end), schedule.desired_replicas) if schedule else None
    bounds = (sm.policy.min_replicas, sm.policy.max_replicas)
    plot_daily_need(needs, orc.interval_s, bounds, window, png, title, made_by(record))
    payload.update(schedule_png=str(png), html_report=str(html), run=record)
    verdict = verdict_lines(payload)
    write_html(
        html,
        title,
        [*(line for line in verdict if line not in payload["pulumi_config_set"]), made_by(record)],
        [summary_html_table(rows, "the judged day")],
        [HtmlFigure(png, DAILY_NEED_CAPTION)],
        commands=payload["pulumi_config_set"],
    )
    emit(args, payload, rows, title)
    if not args.json:
        for line in verdict:
            print(line)
        print(f"{made_by(record)}\nreport: {html}")
    return 0


def verdict_lines(payload: dict[str, Any]) -> list[str]:
    """The window, any further windows wanted, then the commands or why none."""
    lines = []
    window = payload["schedule"]
    if window is not None:
        lines.append(
            f"window: start {window['start']!r}, end {window['end']!r} ({window['timezone']}), "
            f"desiredReplicas {window['desiredReplicas']}, starting {window['lead_s']:.0f} s before the need "
            "(the slowest replica startup + one polling interval)"
        )
        if window["other_windows_wanted"]:
            lines.append(
                f"the trace wants {window['other_windows_wanted']} more window(s); "
                f"the stack has one cron trigger, so only the best is derived"
            )
    return lines + (payload["pulumi_config_set"] or [f"# not recommended: {payload['reason']}"])
