"""KEDA's cron trigger (`pkg/scalers/cron_scaler.go`, v2.20.2) on robfig/cron v3.0.1.

The schedules parse as `cron.NewParser(Minute | Hour | Dom | Month | Dow)` does (`parser.go`):
exactly 5 fields, no descriptors (`@daily` is refused), `*` or `?`, `a`, `a-b`, `a-b/n`, `*/n`,
`a/n` (= a-max/n), comma lists, month and weekday names in any case (JAN, mon-fri), Sunday is 0
only (7 is out of range). Day of month and day of week both restrict, unless either field has a
star, then both must match (`dayMatches` and its star bit; `*/2` has no star).

`CronSchedule.next` is `SpecSchedule.Next` for a schedule in the trigger's time zone: the first
whole minute strictly after a moment whose wall clock there matches (a local time that a DST jump
skips never fires, a repeated one fires twice), or None when there is none within 5 years.
The scaler is inside its window exactly when the next end comes no later than the next start
(`GetMetricsAndActivity`); it then reports desiredReplicas and is active, outside it reports 0.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_MONTHS = {
    name: i + 1
    for i, name in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"])
}
_WEEKDAYS = {name: i for i, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
# (name, min, max, names) per field, in order (`spec.go` bounds).
_FIELDS = (
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day of month", 1, 31, None),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _WEEKDAYS),
)
_INT = re.compile(r"[+-]?\d+")  # what strconv.Atoi accepts
_MINUTE = timedelta(minutes=1)
_YEARS_AHEAD = 5  # `Next` gives up past this


@dataclass(frozen=True)
class CronWindow:
    """What a KEDA cron trigger reads: its window, and the replicas it asks for inside it."""

    start: str
    end: str
    timezone: str
    desired_replicas: int


def _number(text: str, names: dict[str, int] | None, expr: str) -> int:
    """`parseIntOrName`."""
    if names is not None and text.lower() in names:
        return names[text.lower()]
    if not _INT.fullmatch(text):
        raise ValueError(f"failed to parse int from {text!r} in {expr!r}")
    number = int(text)
    if number < 0:
        raise ValueError(f"negative number ({number}) not allowed: {expr!r}")
    return number


def _range(expr: str, lo: int, hi: int, names: dict[str, int] | None) -> tuple[set[int], bool]:
    """`getRange`: the values of one comma-separated part, and whether it sets the star bit."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    star = low_and_high[0] in ("*", "?")
    if star:  # like robfig, a '-' after a star is ignored
        start, end = lo, hi
    else:
        start = _number(low_and_high[0], names, expr)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _number(low_and_high[1], names, expr)
        else:
            raise ValueError(f"too many hyphens: {expr!r}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _number(range_and_step[1], None, expr)
        if len(low_and_high) == 1:  # "N/step" means "N-max/step"
            end = hi
        if step > 1:
            star = False
    else:
        raise ValueError(f"too many slashes: {expr!r}")
    if start < lo:
        raise ValueError(f"beginning of range ({start}) below minimum ({lo}): {expr!r}")
    if end > hi:
        raise ValueError(f"end of range ({end}) above maximum ({hi}): {expr!r}")
    if start > end:
        raise ValueError(f"beginning of range ({start}) beyond end of range ({end}): {expr!r}")
    if step == 0:
        raise ValueError(f"step of range should be a positive number: {expr!r}")
    return set(range(start, end + 1, step)), star


def _field(text: str, lo: int, hi: int, names: dict[str, int] | None) -> tuple[frozenset[int], bool]:
    """`getField`: the union over the comma-separated parts (empty parts are skipped)."""
    values: set[int] = set()
    star = False
    for part in (p for p in text.split(",") if p):
        found, part_star = _range(part, lo, hi, names)
        values |= found
        star = star or part_star
    return frozenset(values), star


class CronSchedule:
    """A 5-field schedule parsed as KEDA's cron scaler parses it."""

    def __init__(self, expression: str) -> None:
        try:
            self._parse(expression)
        except ValueError as exc:
            raise ValueError(f"cron expression {expression!r}: {exc}") from None

    def _parse(self, expression: str) -> None:
        if not expression:
            raise ValueError("empty spec string")
        if expression.startswith("@"):
            raise ValueError("parser does not accept descriptors: KEDA's cron scaler takes 5 fields")
        fields = expression.split()
        if len(fields) != 5:
            raise ValueError(f'expected exactly 5 fields, found {len(fields)}, like "0 8 * * MON-FRI"')
        parsed = []
        for text, (name, lo, hi, names) in zip(fields, _FIELDS):
            try:
                parsed.append(_field(text, lo, hi, names))
            except ValueError as exc:
                raise ValueError(f"{name} field: {exc}") from None
        (self.minute, _), (self.hour, _), (self.dom, self.dom_star), (self.month, _), (self.dow, self.dow_star) = parsed

    def day_matches(self, t: datetime) -> bool:
        """`dayMatches` on a local wall-clock time."""
        dom, dow = t.day in self.dom, (t.isoweekday() % 7) in self.dow
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow

    def next(self, after: datetime, zone: ZoneInfo) -> datetime | None:
        """`SpecSchedule.Next`: the first whole minute strictly after `after` (aware) whose wall
        clock in `zone` matches, in UTC (aware datetimes of one zone compare by wall clock, which
        a repeated DST hour makes ambiguous); None when none comes within 5 years."""
        t = after.astimezone(UTC).replace(second=0, microsecond=0) + _MINUTE
        year_limit = (after + timedelta(seconds=1)).astimezone(zone).year + _YEARS_AHEAD
        while True:
            local = t.astimezone(zone)
            if local.year > year_limit:
                return None
            if local.month not in self.month:  # to the local start of the next month
                first = datetime(local.year + local.month // 12, local.month % 12 + 1, 1)
                t = first.replace(tzinfo=zone).astimezone(UTC)
            elif not self.day_matches(local):  # to the next local midnight (its first instant)
                midnight = datetime(local.year, local.month, local.day) + timedelta(days=1)
                t = midnight.replace(tzinfo=zone).astimezone(UTC)
            elif local.hour not in self.hour:  # to the next local hour
                t += (60 - local.minute) * _MINUTE
            elif local.minute not in self.minute:
                t += _MINUTE
            else:
                return t


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"cron timezone {name!r} is not an IANA time zone (like 'Europe/Paris')") from None


class CronActivity:
    """When a cron trigger is inside its window over a simulated span: the state can change only
    at a fire time of either schedule, so it is computed there and looked up by bisection."""

    def __init__(self, window: CronWindow, origin: datetime, span_s: float) -> None:
        if window.start == window.end:
            raise ValueError(f"cron start and end can not have exactly same time input ({window.start!r})")
        self._zone = _zone(window.timezone)
        self._start, self._end = CronSchedule(window.start), CronSchedule(window.end)
        self._origin = origin.astimezone(UTC)
        horizon = self._origin + timedelta(seconds=span_s)
        fires = set()
        for schedule in (self._start, self._end):
            fire = schedule.next(self._origin, self._zone)
            while fire is not None and fire <= horizon:
                fires.add(fire)
                fire = schedule.next(fire, self._zone)
        changes = sorted(fires)
        self._times = [0.0] + [(f - self._origin).total_seconds() for f in changes]
        self._inside = [self._inside_at(self._origin)] + [self._inside_at(f) for f in changes]

    def _inside_at(self, now: datetime) -> bool:
        """`GetMetricsAndActivity`: Go's zero time (no next fire) sorts before any time."""
        start, end = self._start.next(now, self._zone), self._end.next(now, self._zone)
        if start is None:
            return True
        return end is not None and end <= start

    def inside(self, t: float) -> bool:
        """Inside the window at t seconds after the origin (t >= 0)."""
        return self._inside[bisect_right(self._times, t) - 1]
