"""KEDA's cron trigger: is a moment inside a [start, end) cron window, in a time zone.

KEDA's cron scaler reports `desiredReplicas` inside the window and 1 outside, against an
AverageValue target of 1; "inside" means the next end comes no later than the next start.
Standard 5-field cron (minute hour day-of-month month day-of-week; `*`, `a-b`, `a,b`, `*/n`,
`a-b/n`; Sunday is 0 or 7; a day matches if day-of-month or day-of-week does when both are set).
The window state is computed once per minute of the simulated span.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import numpy as np

_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_LOOKAHEAD_MIN = 8 * 24 * 60  # a weekly schedule always recurs within 8 days


@dataclass(frozen=True)
class CronWindow:
    """What a KEDA cron trigger reads: its window, and the replicas it asks for inside it."""

    start: str
    end: str
    timezone: str
    desired_replicas: int


def _field(text: str, lo: int, hi: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if base == "*":
            start, end = lo, hi
        elif "-" in base:
            start, end = (int(x) for x in base.split("-", 1))
        else:
            start = end = int(base)
        if not (lo <= start <= end <= hi) or step < 1:
            raise ValueError(f"cron field {text!r} is outside {lo}-{hi}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


class CronSchedule:
    def __init__(self, expression: str) -> None:
        fields = expression.split()
        if len(fields) != 5:
            raise ValueError(f'cron expression {expression!r} must have 5 fields, like "0 8 * * 1-5"')
        self.minute, self.hour, self.dom, self.month, dow = (
            _field(f, lo, hi) for f, (lo, hi) in zip(fields, _RANGES)
        )
        self.dow = frozenset(d % 7 for d in dow)
        self.dom_any, self.dow_any = fields[2] == "*", fields[4] == "*"

    def matches(self, t: datetime) -> bool:
        if t.minute not in self.minute or t.hour not in self.hour or t.month not in self.month:
            return False
        dom, dow = t.day in self.dom, (t.isoweekday() % 7) in self.dow
        if self.dom_any or self.dow_any:
            return dom and dow
        return dom or dow


def window_mask(start: str, end: str, tz: str, origin: datetime, minutes: int) -> np.ndarray:
    """active[m] for each minute m after `origin` (UTC): inside the cron window or not."""
    zone = ZoneInfo(tz)
    starts, ends = CronSchedule(start), CronSchedule(end)
    base = origin.replace(second=0, microsecond=0, tzinfo=origin.tzinfo or timezone.utc)
    total = minutes + _LOOKAHEAD_MIN
    local = [(base + timedelta(minutes=m)).astimezone(zone) for m in range(total)]
    is_start = np.array([starts.matches(t) for t in local])
    is_end = np.array([ends.matches(t) for t in local])
    # KEDA compares the next start and end strictly after now: inside the window exactly when
    # the end comes first.
    next_start = np.append(_next_index(is_start)[1:], total)
    next_end = np.append(_next_index(is_end)[1:], total)
    return (next_end < next_start)[:minutes]


def _next_index(flags: np.ndarray) -> np.ndarray:
    """For each index, the first index >= it where flags is set (len(flags) if none)."""
    out = np.full(len(flags), len(flags))
    nxt = len(flags)
    for i in range(len(flags) - 1, -1, -1):
        if flags[i]:
            nxt = i
        out[i] = nxt
    return out
