"""The parts of the traffic a plan searches and validates on: whole days, or a time split.

A trace spanning two days or more is split by whole days: the planner searches on its first days
and validates on its last `holdout_days`, as an operator plans on last week and runs this week;
one hour cannot tell a fleet that follows the day from a static one. Days are the 24-hour periods
from the trace's first request (t = 0), not from midnight of its wall clock: every trace splits
the same whether or not it has a wall clock, and no day is a partial one at the start (a trace
that starts at midnight, like the shared five-day curve, is split at its midnights). A trace's
last request arrives a little before its end, so a day counts as whole when the trace reaches
within `DAY_SLACK_S` of its end; what runs past the last whole day belongs to the last day.

Each day is one run of its own, starting from the fleet the oracle needs for its first interval
(`run.warmed`): days are independent units, which is what lets Optuna's pruners stop a candidate
after its first days. Each carries the days before it as its history (`Trace.history`: what the
stack's Prometheus held), which the forecast triggers read; the first day has none, so a trace of
three days or more keeps it as history only (`HISTORY_DAYS`): searched on it, a policy that
forecasts would be judged as a new cluster on its first day, not as it runs. A trace shorter than two days keeps the time split: its first
`search_fraction` searched, the rest held out (scored after the cut of one continuous run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from capacity.workload.traces import Trace

DAY_S = 86_400.0
# A day counts as whole when the trace reaches this close to its end: the last request of a quiet
# night arrives minutes before midnight (the shared curve's last minute is its own bin).
DAY_SLACK_S = 3_600.0
HOLDOUT_DAYS = 1  # days held out at the end of a multi-day trace
HISTORY_DAYS = 1  # days at the start of a trace of three days or more that are history only


@dataclass(frozen=True)
class Part:
    """One unit a plan runs: `trace` run from a warm fleet and scored after its first
    `scored_from` share of time (0: all of it; a time split's held-out part runs the whole trace,
    as a deployed policy would, and scores the rest). `label` names it in every report."""

    label: str
    trace: Trace
    scored_from: float = 0.0

    @property
    def scored(self) -> Trace:
        """The requests the part is scored on: those after its first `scored_from` share of time."""
        return self.trace.window(self.trace.duration * self.scored_from, math.inf)


def short_name(trace: Trace) -> str:
    """A trace's name as a report's label shows it: a file's stem (a loaded file is named so
    already), a rate curve's file stem, a synthetic spec's kind (its parameters are in the command)."""
    name = trace.name
    if name.startswith("rates:"):
        return Path(name.removeprefix("rates:").split(":", 1)[0]).stem
    if name.startswith("synthetic:"):
        return ":".join(name.split(":", 2)[:2])
    return name


def whole_days(trace: Trace) -> int:
    """How many whole days `trace` spans from its first request (0 for less than one)."""
    return int((trace.duration + DAY_SLACK_S) // DAY_S)


def days_of(trace: Trace) -> list[Trace]:
    """The trace's whole days, each re-based to start at 0 (the last one runs to the trace's end)."""
    n = whole_days(trace)
    return [trace.window(i * DAY_S, (i + 1) * DAY_S if i < n - 1 else math.inf) for i in range(n)]


def split_by_days(trace: Trace, holdout_days: int) -> tuple[list[Part], list[Part]] | None:
    """(searched days, held-out days) of a trace of two days or more; None for a shorter one.
    The first HISTORY_DAYS of a trace of three days or more are neither (history only).
    ValueError when the held-out days leave none to search."""
    days = days_of(trace)
    if len(days) < 2:
        return None
    history = HISTORY_DAYS if len(days) >= 3 else 0
    if not 1 <= holdout_days < len(days) - history:
        raise ValueError(
            f"--holdout-days {holdout_days}: trace {trace.name!r} spans {len(days)} whole days"
            + (f" (the first {history} history only)" if history else "")
            + f"; hold out 1 to {len(days) - history - 1} so that at least one day is searched"
        )
    parts = [Part(f"{short_name(trace)} day {i + 1} of {len(days)}", day) for i, day in enumerate(days)]
    cut = len(days) - holdout_days
    return parts[history:cut], parts[cut:]


def split_by_time(trace: Trace, search_fraction: float) -> tuple[list[Part], list[Part]]:
    """The first `search_fraction` of the trace's time searched, the whole trace held out and
    scored after that cut."""
    searched = trace.window(0.0, trace.duration * search_fraction)
    return (
        [Part(f"{short_name(trace)} first {search_fraction:.0%}", searched)],
        [Part(f"{short_name(trace)} last {1 - search_fraction:.0%}", trace, search_fraction)],
    )


def plan_parts(trace: Trace, holdout_days: int, search_fraction: float) -> tuple[list[Part], list[Part]]:
    """What a plan searches and validates on of one trace: its days when it spans two or more,
    else the time split."""
    return split_by_days(trace, holdout_days) or split_by_time(trace, search_fraction)
