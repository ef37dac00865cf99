"""Predictive warm capacity: a KEDA cron window that pre-warms replicas for a recurring peak.

From the replicas the oracle needs per interval of a trace (`capacity.planning.run.run_oracle`), the
need of each time of day is the median over the trace's days, rounded up (a peak that recurs, not
one day's spike); with a week or more, weekdays and weekends are profiled apart. A window holds
`desiredReplicas` D from the start of a contiguous run of times of day that need D or more until
its end, started earlier by the warm-up lead (a replica's worst-case startup from
`capacityPlanning.startup`, plus one KEDA polling interval), so the replicas serve when the run
begins. Among every level D above minReplicas (what the reactive policy keeps anyway) and every
run, the window kept is the one whose replicas above minReplicas are most used: it maximises the
replica-intervals it serves above minReplicas minus the ones it holds idle (lead included).

The schedule is written in the stack's cron trigger syntax (5 fields, robfig/cron semantics as
`capacity.sim.control.cron` models them), in UTC, the zone the simulator reads the trace's
wall clock in. The stack has one cron trigger: the best window is derived, and how many more the
trace wants is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from capacity.planning.stack import StackModel
from capacity.sim.simulator import DEFAULT_START
from capacity.workload.traces import Trace

DAY_S = 86400.0
EVERY_DAY = frozenset(range(7))  # cron weekdays, Sunday = 0
WEEKDAYS = frozenset(range(1, 6))
WEEKEND = frozenset({0, 6})
WEEK_S = 7 * DAY_S


@dataclass(frozen=True)
class Schedule:
    start: str  # 5-field cron, e.g. "15 7 * * 1-5"
    end: str
    timezone: str
    desired_replicas: int
    lead_s: float  # how much earlier than the need the window starts
    score: float  # replica-intervals served above minReplicas minus those held idle
    other_windows: int  # further runs of the day (or day type) that would want their own window

    def config_edits(self, model: str) -> list[tuple[str, Any]]:
        """The `pulumi config set --path` edits (keys under the program's namespace) that enable it."""
        base = f"autoscaling.{model}.triggers.cron"
        return [
            (f"{base}.enabled", True),
            (f"{base}.start", self.start),
            (f"{base}.end", self.end),
            (f"{base}.timezone", self.timezone),
            (f"{base}.desiredReplicas", self.desired_replicas),
        ]


def warm_up_lead_s(sm: StackModel) -> float:
    """Worst-case seconds from the window's start to a new replica serving: the slowest startup
    (node, image, weights, engine) plus one polling interval before KEDA sees the window."""
    s = sm.startup
    slowest = s.node_provisioning_s[1] + s.image_pull_s[1] + s.weight_load_s + s.engine_init_s[1]
    return slowest + sm.policy.polling_interval_seconds


def origin_utc(trace: Trace) -> datetime:
    """The trace's t = 0 in UTC, as the simulator's cron trigger reads it."""
    return (trace.start or DEFAULT_START).astimezone(UTC)


def daily_needs(replicas: np.ndarray, interval_s: float, origin: datetime, days: frozenset[int]) -> np.ndarray:
    """Per time-of-day slot (`interval_s` long, from midnight UTC): the median over the trace's
    days whose weekday is in `days` of the replicas needed then, rounded up; 0 for no such day."""
    if DAY_S % interval_s:
        raise ValueError(f"--oracle-interval ({interval_s:g} s) must divide a day (86400 s) to profile times of day")
    slots = int(DAY_S // interval_s)
    midnight = origin.replace(hour=0, minute=0, second=0, microsecond=0)
    first = int((origin - midnight).total_seconds() // interval_s)
    rows: dict[int, np.ndarray] = {}
    for i, need in enumerate(replicas):
        day, slot = divmod(first + i, slots)
        if (midnight + timedelta(days=day)).isoweekday() % 7 in days:
            rows.setdefault(day, np.full(slots, np.nan))[slot] = need
    if not rows:
        return np.zeros(slots)
    with np.errstate(all="ignore"):
        median = np.nanmedian(np.vstack(list(rows.values())), axis=0)
    return np.ceil(np.nan_to_num(median))


def runs(above: np.ndarray) -> list[tuple[int, int]]:
    """The maximal runs of True on a circular day, as (first slot, length)."""
    n = len(above)
    if above.all():
        return [(0, n)]
    out = []
    for i in range(n):
        if above[i] and not above[i - 1]:
            length = 1
            while above[(i + length) % n]:
                length += 1
            out.append((i, length))
    return out


def _cron(seconds_of_day: float, days: frozenset[int]) -> str:
    """The cron `M H * * DOW` at that second of the day (whole minutes, earlier), its days
    shifted when it falls on the day before (negative) or after (a day or more)."""
    minutes = math.floor(seconds_of_day / 60)
    shift, minute_of_day = divmod(minutes, 24 * 60)
    shifted = frozenset((d + shift) % 7 for d in days)
    return f"{minute_of_day % 60} {minute_of_day // 60} * * {_weekdays(shifted)}"


def _weekdays(days: frozenset[int]) -> str:
    """A cron day-of-week field: `*`, or runs as ranges (`1-5`, `0,6`)."""
    if days == EVERY_DAY:
        return "*"
    parts, ordered = [], sorted(days)
    first = previous = ordered[0]
    for day in [*ordered[1:], None]:
        if day is not None and day == previous + 1:
            previous = day
            continue
        parts.append(f"{first}-{previous}" if previous - first > 1 else ",".join(map(str, range(first, previous + 1))))
        if day is not None:
            first = previous = day
    return ",".join(parts)


def best_window(
    needs: np.ndarray, interval_s: float, floor: int, ceiling: int, lead_s: float, days: frozenset[int]
) -> Schedule | None:
    """The window of largest score (see the module docstring) for one day type; None when no
    time of day needs more than `floor` replicas or no window is worth its idle replicas. Its
    `other_windows` counts the other runs above `floor` that would be worth a window of their own."""
    found = _best(needs, interval_s, floor, ceiling, lead_s)
    if found is None:
        return None
    score, desired, first, length = found
    n = len(needs)
    covered = {(first + k) % n for k in range(length)}
    others = 0
    for start, size in runs(needs > floor):
        slots = {(start + k) % n for k in range(size)}
        if slots & covered:
            continue
        alone = np.where(np.isin(np.arange(n), list(slots)), needs, floor)
        others += _best(alone, interval_s, floor, ceiling, lead_s) is not None
    start_s, end_s = first * interval_s - lead_s, (first + length) * interval_s
    return Schedule(_cron(start_s, days), _cron(end_s, days), "UTC", desired, lead_s, score, others)


def _best(
    needs: np.ndarray, interval_s: float, floor: int, ceiling: int, lead_s: float
) -> tuple[float, int, int, int] | None:
    """(score, desired replicas, first slot, slots) of the best window, or None."""
    lead_slots = math.ceil(lead_s / interval_s)
    n = len(needs)
    best = None
    for level in sorted({int(x) for x in needs if x > floor}):
        desired = min(level, ceiling)
        for first, length in runs(needs >= level):
            if length == n:  # the whole day: a higher minReplicas, not a window
                continue
            held = [(first + k) % n for k in range(-min(lead_slots, n - length), length)]
            served = sum(min(needs[s], desired) - floor for s in held if needs[s] > floor)
            idle = sum(desired - min(needs[s], desired) for s in held)
            score = float(served - idle)
            if score > 0 and (best is None or score > best[0]):
                best = (score, desired, first, length)
    return best


def derive(sm: StackModel, replicas: np.ndarray, interval_s: float, origin: datetime) -> Schedule | None:
    """The single best cron window for the oracle's per-interval replicas of a trace starting at
    `origin`; with a week or more, weekdays and weekends compete by their score over a week and
    the loser counts as another window wanted."""
    span = len(replicas) * interval_s
    day_types = (WEEKDAYS, WEEKEND) if span >= WEEK_S else (EVERY_DAY,)
    floor, ceiling, lead = sm.policy.min_replicas, sm.policy.max_replicas, warm_up_lead_s(sm)
    found = {
        days: w
        for days in day_types
        if (w := best_window(daily_needs(replicas, interval_s, origin, days), interval_s, floor, ceiling, lead, days))
    }
    if not found:
        return None
    _, chosen = max(found.items(), key=lambda item: item[1].score * len(item[0]))  # a day's score x its days a week
    others = sum(1 + w.other_windows for w in found.values() if w is not chosen)
    return Schedule(
        chosen.start,
        chosen.end,
        chosen.timezone,
        chosen.desired_replicas,
        chosen.lead_s,
        chosen.score,
        chosen.other_windows + others,
    )


def later_part(trace: Trace, offset_s: float, length_s: float) -> Trace:
    """The requests of [offset, offset + length), re-based to 0 with the wall clock moved along
    from the trace's UTC origin (the default start for a trace without one)."""
    return replace(trace, start=origin_utc(trace)).window(offset_s, offset_s + length_s)


def whole_days(span_s: float) -> int:
    """Whole days in a span; one within a minute of a day's end counts the day (a real trace of
    a day ends with its last request, a few seconds short of midnight)."""
    return int((span_s + 60.0) // DAY_S)
