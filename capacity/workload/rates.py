"""Traffic over days as data: a per-minute request-rate curve and a length mix, their files, and
the arrivals and token lengths drawn from them (vectorised: a week at a stack's volume is
millions of requests).

A curve file is a CSV with `minute` (0, 1, 2, ... without gaps), `requests_per_minute` and,
optionally, `time` (the minute's start, ISO 8601 UTC): the curve's wall clock when it has one.
A length-mix file is a CSV with `histogram` (prompt or generation), `lower`, `upper` (tokens) and
`requests` (requests whose length is in (lower, upper]): vLLM's `vllm:request_prompt_tokens` and
`vllm:request_generation_tokens` histograms as buckets. Two marginal histograms do not say which
prompt went with which output, so lengths drawn from a mix lose that correlation (long prompts
with short answers and the reverse are paired at random); a request-level trace keeps it.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

MINUTE_S = 60.0
CURVE_COLUMNS = ("minute", "requests_per_minute")
MIX_COLUMNS = ("histogram", "lower", "upper", "requests")
HISTOGRAMS = ("prompt", "generation")


@dataclass(frozen=True)
class RateCurve:
    per_minute: np.ndarray  # float64 requests in minute i (from i * 60 s to (i + 1) * 60 s)
    start: datetime | None = None  # wall-clock start of minute 0, UTC, when the curve records it

    @property
    def duration_s(self) -> float:
        return len(self.per_minute) * MINUTE_S

    @property
    def mean_per_second(self) -> float:
        return float(self.per_minute.sum()) / self.duration_s


@dataclass(frozen=True)
class Buckets:
    """One token-length histogram as buckets (lower, upper], with the requests in each."""

    lower: np.ndarray  # int64, exclusive
    upper: np.ndarray  # int64, inclusive
    requests: np.ndarray  # float64 (Prometheus' increase() is not a whole number)


@dataclass(frozen=True)
class LengthMix:
    prompt: Buckets
    generation: Buckets


def utc_time(text: str, what: str) -> datetime:
    """An ISO 8601 date-time as an aware UTC datetime; one without an offset is read as UTC."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{what} {text!r} is not an ISO 8601 date-time (e.g. 2024-05-12T00:00:00Z)") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _number(path: Path, line: int, column: str, text: str, rule: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"{path}: line {line}: {column} must be {rule}, got {text!r}")
    return value


def _rows(path: Path, columns: tuple[str, ...], what: str) -> tuple[list[str], list[dict[str, str]]]:
    if not path.is_file():
        raise ValueError(f"{what} {path} does not exist" if not path.exists() else f"{what} {path} is not a file")
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        names = list(reader.fieldnames or ())
        missing = [c for c in columns if c not in names]
        if missing:
            raise ValueError(f"{path}: missing columns {missing} (expected {', '.join(columns)})")
        rows = list(reader)
    if not rows:
        raise ValueError(f"{path}: no rows after the header")
    return names, rows


# --- the rate curve -------------------------------------------------------------------


def read_curve(path: Path) -> RateCurve:
    """A curve file; errors name the file, the line and the rule."""
    names, rows = _rows(path, CURVE_COLUMNS, "rate curve")
    rates = np.empty(len(rows))
    for i, row in enumerate(rows):
        line = i + 2
        if row["minute"] is None or row["minute"].strip() != str(i):
            raise ValueError(f"{path}: line {line}: minute must be {i} (minutes run 0, 1, 2, ... without gaps)")
        rates[i] = _number(path, line, "requests_per_minute", row["requests_per_minute"], "a number >= 0")
        if rates[i] < 0:
            raise ValueError(f"{path}: line {line}: requests_per_minute must be >= 0, got {rates[i]:g}")
    return RateCurve(rates, _curve_start(path, rows) if "time" in names else None)


def _curve_start(path: Path, rows: list[dict[str, str]]) -> datetime:
    """Minute 0's wall-clock start; every row's `time` must be 60 s after the one before."""
    start = utc_time(rows[0]["time"] or "", f"{path}: line 2: time")
    for i, row in enumerate(rows[1:], start=1):
        if utc_time(row["time"] or "", f"{path}: line {i + 2}: time") != start + timedelta(minutes=i):
            raise ValueError(
                f"{path}: line {i + 2}: time must be {iso(start + timedelta(minutes=i))} (one minute a row)"
            )
    return start


def write_curve(path: Path, curve: RateCurve) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*CURVE_COLUMNS, *(("time",) if curve.start else ())])
        for minute, rate in enumerate(curve.per_minute.tolist()):
            at = (iso(curve.start + timedelta(minutes=minute)),) if curve.start else ()
            writer.writerow([minute, f"{rate:.10g}", *at])


def poisson_arrivals(per_minute: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sorted arrival seconds of a Poisson process whose rate is constant within each minute:
    a Poisson count per minute, placed uniformly inside it (that is the process, exactly)."""
    counts = rng.poisson(per_minute)
    minutes = np.repeat(np.arange(len(per_minute), dtype=np.float64), counts)
    return np.sort((minutes + rng.uniform(0.0, 1.0, len(minutes))) * MINUTE_S)


# --- token lengths ----------------------------------------------------------------------


def draw_pairs(
    prompt: np.ndarray, output: np.ndarray, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """`n` (prompt, output) pairs drawn with replacement from a trace's requests: each pair stays a pair."""
    pick = rng.integers(0, len(prompt), n)
    return prompt[pick], output[pick]


def draw_from_mix(mix: LengthMix, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`n` prompt and output lengths drawn independently from the two histograms (the
    prompt/output correlation is lost), uniform over the whole token counts of each bucket."""
    return _draw(mix.prompt, n, rng), _draw(mix.generation, n, rng)


def _draw(buckets: Buckets, n: int, rng: np.random.Generator) -> np.ndarray:
    chosen = rng.choice(len(buckets.requests), size=n, p=buckets.requests / buckets.requests.sum())
    low, width = buckets.lower[chosen] + 1, buckets.upper[chosen] - buckets.lower[chosen]
    drawn: np.ndarray = low + np.floor(rng.uniform(0.0, 1.0, n) * width).astype(np.int64)
    return drawn


def is_length_mix(path: Path) -> bool:
    """A length-mix file (its header starts `histogram,`), not a request-level trace."""
    if path.suffix != ".csv" or not path.is_file():
        return False
    with open(path, newline="") as handle:
        return next(csv.reader(handle), [None])[0] == MIX_COLUMNS[0]


def read_length_mix(path: Path) -> LengthMix:
    """A length-mix file; errors name the file, the line and the rule."""
    _, rows = _rows(path, MIX_COLUMNS, "length mix")
    parts: dict[str, list[tuple[int, int, float]]] = {name: [] for name in HISTOGRAMS}
    for i, row in enumerate(rows):
        line = i + 2
        name = (row["histogram"] or "").strip()
        if name not in parts:
            raise ValueError(f"{path}: line {line}: histogram must be one of {', '.join(HISTOGRAMS)}, got {name!r}")
        lower = _number(path, line, "lower", row["lower"], "a whole number of tokens >= 0")
        upper = _number(path, line, "upper", row["upper"], "a whole number of tokens > lower")
        requests = _number(path, line, "requests", row["requests"], "a number >= 0")
        if lower < 0 or not lower.is_integer() or not upper.is_integer() or upper <= lower:
            raise ValueError(f"{path}: line {line}: lower and upper must be whole token counts, 0 <= lower < upper")
        if requests < 0:
            raise ValueError(f"{path}: line {line}: requests must be >= 0, got {requests:g}")
        parts[name].append((int(lower), int(upper), requests))
    for name, buckets in parts.items():
        if sum(r for _, _, r in buckets) <= 0:
            raise ValueError(f"{path}: the {name} histogram holds no requests")
    return LengthMix(*(_buckets(parts[name]) for name in HISTOGRAMS))


def _buckets(rows: list[tuple[int, int, float]]) -> Buckets:
    lower, upper, requests = zip(*rows)
    return Buckets(np.array(lower, dtype=np.int64), np.array(upper, dtype=np.int64), np.array(requests, dtype=float))


def write_length_mix(path: Path, mix: LengthMix) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(MIX_COLUMNS)
        for name, buckets in zip(HISTOGRAMS, (mix.prompt, mix.generation)):
            for lower, upper, requests in zip(
                buckets.lower.tolist(), buckets.upper.tolist(), buckets.requests.tolist()
            ):
                writer.writerow([name, lower, upper, f"{requests:.10g}"])
