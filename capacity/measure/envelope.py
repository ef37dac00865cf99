"""A replica's capacity envelope (one row per concurrency) and its knee. Pure functions + CSV I/O.

The CSV has the calibration file's columns (../shared/calibration) plus `ttft_p95_s` and
`avg_kv_usage`, which may be empty when a sweep could not measure them.
"""

from __future__ import annotations

import csv
import itertools
import math
from dataclasses import dataclass, fields
from pathlib import Path

CALIBRATION_COLUMNS = (
    "concurrency",
    "successful_rps",
    "total_tokens_per_s",
    "p95_latency_s",
    "p99_latency_s",
    "avg_waiting",
    "max_waiting",
)
COLUMNS = (*CALIBRATION_COLUMNS, "ttft_p95_s", "avg_kv_usage")


@dataclass(frozen=True)
class EnvelopeRow:
    concurrency: int
    successful_rps: float
    total_tokens_per_s: float
    p95_latency_s: float
    p99_latency_s: float
    avg_waiting: float | None = None
    max_waiting: float | None = None
    ttft_p95_s: float | None = None
    avg_kv_usage: float | None = None


def read_envelope(path: Path) -> list[EnvelopeRow]:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"envelope file {path} does not exist")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("concurrency", "successful_rps", "p99_latency_s") if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"envelope {path}: missing column(s) {', '.join(missing)} (expected {', '.join(COLUMNS)})")
        rows = []
        for line, raw in enumerate(reader, start=2):
            values: dict[str, float | int | None] = {}
            for field in fields(EnvelopeRow):
                text = (raw.get(field.name) or "").strip()
                if not text:
                    values[field.name] = None
                    continue
                try:
                    values[field.name] = int(float(text)) if field.name == "concurrency" else float(text)
                except ValueError:
                    raise ValueError(f"envelope {path} line {line}: {field.name}={text!r} is not a number") from None
            for required in ("total_tokens_per_s", "p95_latency_s"):
                values[required] = values[required] if values[required] is not None else math.nan
            rows.append(EnvelopeRow(**values))  # type: ignore[arg-type]  # each column parsed to its field's type above
    return validate(rows, str(path))


def validate(rows: list[EnvelopeRow], source: str = "envelope") -> list[EnvelopeRow]:
    if len(rows) < 2:
        raise ValueError(f"{source}: needs at least 2 concurrency levels, got {len(rows)}")
    rows = sorted(rows, key=lambda r: r.concurrency)
    for a, b in itertools.pairwise(rows):
        if a.concurrency == b.concurrency:
            raise ValueError(f"{source}: concurrency {a.concurrency} appears twice")
    for r in rows:
        if r.concurrency < 1 or r.successful_rps <= 0 or r.p99_latency_s <= 0:
            raise ValueError(
                f"{source}: row concurrency={r.concurrency} needs concurrency >= 1, "
                f"successful_rps > 0 and p99_latency_s > 0"
            )
    return rows


def write_envelope(path: Path, rows: list[EnvelopeRow]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for r in rows:
            writer.writerow([_fmt(getattr(r, c), c) for c in COLUMNS])


def _fmt(value: float | int | None, column: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if column in ("concurrency", "max_waiting"):
        return str(round(value))
    if column == "total_tokens_per_s":
        return f"{value:.0f}"
    if column in ("avg_waiting", "avg_kv_usage"):
        return f"{value:.3f}"
    return f"{value:.3g}" if value < 10 else f"{value:.1f}"


@dataclass(frozen=True)
class Knee:
    index: int  # into the sorted rows
    concurrency: int
    saturated: bool  # False: throughput was still growing at the highest concurrency measured
    reason: str


def per_doubling(ratio: float, c_from: int, c_to: int) -> float:
    """Growth per doubling of concurrency, so steps of different sizes compare (1 -> 5 vs 20 -> 40)."""
    return ratio ** (1 / math.log2(c_to / c_from)) - 1


def find_knee(rows: list[EnvelopeRow], plateau_fraction: float = 0.85, min_gain: float = 0.20) -> Knee:
    """Where added concurrency stops buying throughput while tail latency climbs.

    The envelope is saturated when its last level gains less than `min_gain` throughput per
    doubling of concurrency over the best level before it (not merely the one before it: a level
    that dips, as a mock replica sharing a busy CPU does, must not make the next look like growth).
    The knee is then the first concurrency that reaches
    `plateau_fraction` of the best throughput measured and whose next step costs more p99
    growth than it buys throughput. Per-doubling rates let steps of any size compare."""
    rows = validate(list(rows))
    peak = max(r.successful_rps for r in rows)
    a, b = max(rows[:-1], key=lambda r: r.successful_rps), rows[-1]
    if per_doubling(b.successful_rps / a.successful_rps, a.concurrency, b.concurrency) >= min_gain:
        return Knee(
            len(rows) - 1,
            b.concurrency,
            False,
            f"throughput still grows at concurrency {b.concurrency}: extend the sweep to find the knee",
        )
    for i in range(len(rows) - 1):
        a, b = rows[i], rows[i + 1]
        if a.successful_rps < plateau_fraction * peak:
            continue
        gain = per_doubling(b.successful_rps / a.successful_rps, a.concurrency, b.concurrency)
        tail = per_doubling(b.p99_latency_s / a.p99_latency_s, a.concurrency, b.concurrency)
        if tail > gain:
            return Knee(
                i,
                a.concurrency,
                True,
                f"{a.successful_rps / peak:.0%} of the best {peak:.2f} req/s; {a.concurrency} -> {b.concurrency} "
                f"adds {gain:.1%} throughput per doubling while p99 grows {tail:.0%} per doubling",
            )
    last = rows[-1]
    return Knee(
        len(rows) - 1, last.concurrency, True, f"p99 never grows faster than throughput up to {last.concurrency}"
    )
