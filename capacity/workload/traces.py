"""Request traces: load real ones (Azure and BurstGPT CSV, Mooncake JSONL, arrival offsets), generate synthetic ones, rescale them.

A trace is three aligned numpy arrays (arrival seconds from the start, prompt tokens,
output tokens), sorted by arrival: the simulator replays it, and so does the load generator. Every generator is seeded, so a run is reproducible.

Synthetic specs read `synthetic:KIND[:key=value,...]`, e.g. `synthetic:step:base=2,peak=8`:
  step     rate `base` req/s, `peak` from `at` for `length` seconds
  ramp     rate from `start` to `end` req/s linearly over `duration`
  diurnal  `mean` req/s x (1 - `amplitude` cos(2 pi t / `period`)): trough at t = 0, peak at half period
  bursty   rate `base`, every `every` seconds a burst of `burst` req/s for `length` seconds
All take `duration` (s), `prompt`, `output` (mean tokens), `sigma` (lognormal spread of the
lengths, 0 = fixed) and `seed`. Arrivals are a Poisson process with that rate.

A rate curve replayed (traffic over days, `capacity.workload.rates`) reads
`rates:CURVE:lengths=FILE[,scale=F | mean=R][,seed=N][,start=ISO]`:
  lengths  (prompt, output) pairs drawn from a request-level trace (any file `load` reads), or
           from a length-mix file of vLLM's token histograms (`history` writes one)
  scale    the curve's requests times F (0.06: 6% of the source's volume), or
  mean     the curve scaled to R req/s over its whole length (default: scale=1, the curve as is)
  seed     the arrivals' and lengths' seed (default 0)
  start    the wall-clock time of minute 0, ISO 8601 (UTC unless it says otherwise); default: the
           curve's own `time` column; required when the curve has none
Options follow the first `:` that precedes `key=`, and each starts after a `,` that precedes
`key=`, so paths may hold `:`, `,` and `@`; a trailing `@FROM:TO` window (durations only) is
the part of the generated trace from FROM to TO after minute 0.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from capacity.workload import rates as curves

# How far back a trace's window keeps the requests before it (`Trace.history`): a week's look-back
# of a forecast trigger (`offset` of a week, or a day), its window and a day to spare.
HISTORY_S = 8 * 86_400.0


@dataclass(frozen=True)
class History:
    """The requests that arrived before a trace's t = 0, as a forecast's look-back reads them:
    arrival seconds (negative, sorted) and prompt tokens (float: a rate-scaled history weighs
    them by the factor instead of redrawing requests)."""

    arrivals: np.ndarray
    prompt_tokens: np.ndarray

    def shifted(self, by: float, after: float) -> History:
        """Arrivals moved by `by` seconds, keeping those at or after `after`."""
        times = self.arrivals + by
        lo = int(np.searchsorted(times, after))
        return History(times[lo:], self.prompt_tokens[lo:])

    def scaled(self, factor: float) -> History:
        return History(self.arrivals, self.prompt_tokens * factor)


@dataclass(frozen=True)
class Trace:
    name: str
    arrivals: np.ndarray  # float64 seconds from the start, sorted
    prompt_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64
    start: datetime | None = None  # wall-clock time of t = 0, when the source has one
    # Per request, its prompt's prefix block ids (Mooncake `hash_ids`, 512 tokens each), when the
    # source has them; None: the trace says nothing about shared prefixes.
    block_ids: tuple[tuple[int, ...], ...] | None = None
    # The traffic before t = 0 when the trace is a window of a longer one (a day of a week), up to
    # HISTORY_S: what the stack's Prometheus recorded before the window, read by forecast triggers.
    history: History | None = None

    def __post_init__(self) -> None:
        n = len(self.arrivals)
        if len(self.prompt_tokens) != n or len(self.output_tokens) != n:
            raise ValueError(f"trace {self.name!r}: arrivals and token arrays differ in length")
        if self.block_ids is not None and len(self.block_ids) != n:
            raise ValueError(f"trace {self.name!r}: block ids and arrivals differ in length")
        if n and np.any(np.diff(self.arrivals) < 0):
            raise ValueError(f"trace {self.name!r}: arrivals must be sorted")

    def __len__(self) -> int:
        return len(self.arrivals)

    @property
    def duration(self) -> float:
        return float(self.arrivals[-1]) if len(self) else 0.0

    def window(self, start: float, end: float, history: bool = True) -> Trace:
        """The requests arriving in [start, end), re-based to start at 0, the wall clock moved
        along (a cron window replayed on the part stays where it was); the requests before it
        (its own, then its history's) are its history, up to HISTORY_S back, unless `history` is
        False (a slice that no forecast reads: the oracle's intervals)."""
        lo, hi = np.searchsorted(self.arrivals, [start, end])
        return Trace(
            self.name,
            self.arrivals[lo:hi] - start,
            self.prompt_tokens[lo:hi],
            self.output_tokens[lo:hi],
            self.start + timedelta(seconds=start) if self.start else None,
            self.block_ids[lo:hi] if self.block_ids is not None else None,
            self._before(start, lo) if history else None,
        )

    def _before(self, start: float, lo: int) -> History | None:
        """The history of a window starting at `start` (its first request at index `lo`)."""
        first = int(np.searchsorted(self.arrivals, start - HISTORY_S))
        own = History(self.arrivals[first:lo] - start, self.prompt_tokens[first:lo].astype(np.float64))
        earlier = self.history.shifted(-start, -HISTORY_S) if self.history is not None else None
        if earlier is None or not len(earlier.arrivals):
            return own if len(own.arrivals) else None
        return History(
            np.concatenate([earlier.arrivals, own.arrivals]), np.concatenate([earlier.prompt_tokens, own.prompt_tokens])
        )


def _sorted_trace(
    name: str,
    times: np.ndarray,
    prompt: np.ndarray,
    output: np.ndarray,
    start=None,
    block_ids: list[tuple[int, ...]] | None = None,
) -> Trace:
    order = np.argsort(times, kind="stable")
    times = times[order]
    base = times[0] if len(times) else 0.0
    return Trace(
        name,
        (times - base).astype(np.float64),
        prompt[order].astype(np.int64),
        output[order].astype(np.int64),
        start,
        tuple(block_ids[i] for i in order) if block_ids is not None else None,
    )


def _token_count(path: Path, line: int, column: str, value: object, zero_means: str = "") -> int:
    """A whole number of tokens >= 1: vLLM rejects an empty prompt and max_tokens < 1, so a
    zero-token request would only ever be rejected. `zero_means`: what a 0 is in this format."""
    if isinstance(value, int) and not isinstance(value, bool):
        count = value
    elif isinstance(value, float) and value.is_integer():
        count = int(value)
    elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        count = int(value.strip())
    else:
        raise ValueError(f"{path}: line {line}: {column} must be a whole number of tokens, got {value!r}")
    if count < 1:
        why = f" ({zero_means})" if zero_means and count == 0 else ""
        raise ValueError(
            f"{path}: line {line}: {column} must be >= 1 token (vLLM rejects empty requests), got {count}{why}"
        )
    return count


def _seconds(path: Path, line: int, column: str, value: object, unit: str = "seconds") -> float:
    """An arrival offset: a finite number (of `unit`, as the error says; the caller converts)."""
    seconds = math.nan
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        with contextlib.suppress(ValueError):  # not a number: reported below with the line
            seconds = float(value)
    if not math.isfinite(seconds):
        raise ValueError(f"{path}: line {line}: {column} must be a number of {unit}, got {value!r}")
    return seconds


def _no_requests(path: Path) -> ValueError:
    return ValueError(f"{path}: no requests in the trace (nothing after the header)")


@dataclass(frozen=True)
class CsvLayout:
    """One CSV trace format: its arrival, prompt and output columns, and how arrivals are written."""

    name: str
    columns: tuple[str, str, str]
    offsets: bool  # seconds since the first request; else date-times
    zero_output: str = ""  # what a zero-token output means in this format, for the error


# The Azure LLM inference traces (2023 and 2024), BurstGPT (HPMLL/BurstGPT README: `Timestamp` in
# seconds; `Response tokens` 0 is a failed request, left out of its *_without_fails_* files), and
# arrival offsets in seconds (the load generator's own). The first whose arrival column is present.
CSV_LAYOUTS = (
    CsvLayout("offset", ("offset_s", "prompt_tokens", "output_tokens"), offsets=True),
    CsvLayout(
        "BurstGPT",
        ("Timestamp", "Request tokens", "Response tokens"),
        offsets=True,
        zero_output="a failed request in BurstGPT: use its BurstGPT_without_fails_*.csv",
    ),
    CsvLayout("Azure", ("TIMESTAMP", "ContextTokens", "GeneratedTokens"), offsets=False),
)


def _layout(names: set[str]) -> CsvLayout:
    return next((layout for layout in CSV_LAYOUTS if layout.columns[0] in names), CSV_LAYOUTS[-1])


def load_csv(path: Path) -> Trace:
    """An Azure LLM inference trace (TIMESTAMP, ContextTokens, GeneratedTokens), a BurstGPT trace
    (Timestamp, Request tokens, Response tokens), or arrival offsets (offset_s, prompt_tokens,
    output_tokens). Errors name the file and line."""
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        names = set(reader.fieldnames or ())
        layout = _layout(names)
        missing = set(layout.columns) - names
        if missing:
            raise ValueError(f"{path}: missing columns {sorted(missing)} ({layout.name} trace format)")
        rows: list[tuple[int, dict[str, str]]] = []
        for record in reader:
            short = [c for c in layout.columns if record.get(c) is None]
            if short:
                raise ValueError(
                    f"{path}: line {reader.line_num}: {len(layout.columns)} columns expected "
                    f"({', '.join(layout.columns)}), {short[0]} is missing"
                )
            rows.append((reader.line_num, record))
    if not rows:
        raise _no_requests(path)
    arrival, prompt_column, output_column = layout.columns
    prompt = np.array([_token_count(path, n, prompt_column, r[prompt_column]) for n, r in rows], dtype=np.int64)
    output = np.array(
        [_token_count(path, n, output_column, r[output_column], layout.zero_output) for n, r in rows], dtype=np.int64
    )
    if layout.offsets:
        seconds = np.array([_seconds(path, n, arrival, r[arrival]) for n, r in rows], dtype=np.float64)
        return _sorted_trace(path.stem, seconds, prompt, output)
    stamps = _timestamps(path, arrival, rows)
    seconds = (stamps - stamps.min()).astype(np.int64) / 1e9
    return _sorted_trace(path.stem, seconds, prompt, output, stamps.min().astype("datetime64[us]").item())


# A UTC offset at the end of a date-time: the 2024 Azure traces write `2024-05-10 00:00:00.009930+00:00`.
_UTC_OFFSET = re.compile(r"(?:Z|([+-])(\d\d):?(\d\d))$")


def _naive_utc(text: str) -> tuple[str, int]:
    """`text` without its UTC offset, and the offset in seconds (0 if it has none): numpy's
    datetime64 has no time zones and only warns when it meets one."""
    match = _UTC_OFFSET.search(text)
    if not match:
        return text, 0
    sign, hours, minutes = match.groups()
    offset = 0 if sign is None else (1 if sign == "+" else -1) * (int(hours) * 3600 + int(minutes) * 60)
    return text[: match.start()], offset


def _timestamps(path: Path, column: str, rows: list[tuple[int, dict[str, str]]]) -> np.ndarray:
    """The column as UTC datetime64[ns], parsed at once; the first unreadable one named by its line."""
    naive, offsets = zip(*(_naive_utc(r[column].strip()) for _, r in rows))
    try:
        stamps = np.array(naive, dtype="datetime64[ns]")
    except ValueError:
        for (line, r), text in zip(rows, naive):
            try:
                np.datetime64(text, "ns")
            except ValueError:
                raise ValueError(
                    f"{path}: line {line}: {column} {r[column]!r} is not a date-time "
                    "(ISO 8601, e.g. 2023-11-16 18:15:46.6805900)"
                ) from None
        raise
    return stamps - np.array(offsets, dtype="timedelta64[s]")


# JSONL keys per column, the first one named when all are missing: the Mooncake trace format
# (kvcache-ai/Mooncake, its FAST25-release traces), then the load generator's (offsets in seconds).
_JSONL_KEYS = (("timestamp", "offset_s"), ("input_length", "prompt_tokens"), ("output_length", "output_tokens"))
# Mooncake's numeric `timestamp` is milliseconds since the first request (NVIDIA Dynamo
# benchmarks/data_generator/README.md "Timestamp: The arrival time (in milliseconds)"; AIPerf and
# genai-perf replay it so): read as seconds, a one-hour trace would replay over six weeks.
_UNIT_OF = {"timestamp": ("milliseconds", 1e-3), "offset_s": ("seconds", 1.0)}


def load_jsonl(path: Path) -> Trace:
    """One JSON object per line: timestamp (milliseconds, as in the Mooncake traces, or an ISO-8601
    date-time) or offset_s (seconds), input_length or prompt_tokens, output_length or
    output_tokens; Mooncake's hash_ids (prefix block ids) are kept when every line has them, other
    keys are ignored. Errors name the file and line."""
    times, prompt, output = [], [], []
    blocks: list[tuple[int, ...]] | None = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: line {number}: not JSON ({error.msg} at column {error.colno})") from None
        if not isinstance(record, dict):
            raise ValueError(
                f"{path}: line {number}: expected a JSON object like "
                f'{{"timestamp": 500, "input_length": 1024, "output_length": 128}} (timestamp in ms), '
                f"got {type(record).__name__}"
            )
        try:
            (time_key, stamp), (input_key, inputs), (output_key, outputs) = (
                _first(record, keys) for keys in _JSONL_KEYS
            )
        except KeyError as missing:
            raise ValueError(f"{path}: line {number}: missing key {missing}") from None
        times.append(_stamp_seconds(path, number, time_key, stamp))
        prompt.append(_token_count(path, number, input_key, inputs))
        output.append(_token_count(path, number, output_key, outputs))
        if blocks is not None and "hash_ids" in record:
            blocks.append(_block_ids(path, number, record["hash_ids"]))
        else:
            blocks = None  # a line without them: the trace says nothing about prefixes
    if not times:
        raise _no_requests(path)
    p, o = np.array(prompt, dtype=np.int64), np.array(output, dtype=np.int64)
    return _sorted_trace(path.stem, np.array(times, dtype=np.float64), p, o, None, blocks)


def _block_ids(path: Path, line: int, value: object) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise ValueError(f"{path}: line {line}: hash_ids must be a list of whole numbers >= 0 (prefix block ids)")
    return tuple(value)


def _stamp_seconds(path: Path, line: int, key: str, value: object) -> float:
    unit, seconds_per = _UNIT_OF[key]
    if not isinstance(value, str):
        return _seconds(path, line, key, value, unit) * seconds_per
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise ValueError(f"{path}: line {line}: {key} {value!r} is neither {unit} nor an ISO-8601 date-time") from None


def _first(record: dict, keys: tuple[str, ...]) -> tuple[str, object]:
    """The first of `keys` present and its value; KeyError naming the first otherwise."""
    for key in keys:
        if key in record:
            return key, record[key]
    raise KeyError(keys[0])


# --- synthetic ------------------------------------------------------------------------

RateFn = Callable[[np.ndarray], np.ndarray]

_DEFAULTS = {"duration": 3600.0, "prompt": 1024.0, "output": 128.0, "sigma": 0.0, "seed": 0.0}
_KINDS: dict[str, dict[str, float]] = {
    "step": {"base": 1.0, "peak": 4.0, "at": 600.0, "length": 1200.0},
    "ramp": {"start": 0.5, "end": 5.0},
    "diurnal": {"mean": 2.0, "amplitude": 0.8, "period": 86400.0},
    "bursty": {"base": 1.0, "burst": 8.0, "every": 900.0, "length": 120.0},
}


def _rate_fn(kind: str, p: dict[str, float]) -> tuple[RateFn, float]:
    """The rate function of a kind and its maximum (for thinning)."""
    if kind == "step":
        return (lambda t: np.where((t >= p["at"]) & (t < p["at"] + p["length"]), p["peak"], p["base"])), max(
            p["peak"], p["base"]
        )
    if kind == "ramp":
        return (lambda t: p["start"] + (p["end"] - p["start"]) * t / p["duration"]), max(p["start"], p["end"])
    if kind == "diurnal":
        # Trough at midnight, peak at noon of a `period`-long day.
        return (lambda t: p["mean"] * (1 - p["amplitude"] * np.cos(2 * math.pi * t / p["period"]))), p["mean"] * (
            1 + abs(p["amplitude"])
        )
    # bursty
    return (lambda t: np.where((t % p["every"]) < p["length"], p["burst"], p["base"])), max(p["burst"], p["base"])


def parse_synthetic(spec: str) -> tuple[str, dict[str, float]]:
    """`synthetic:step:base=2,peak=8` -> ("step", {...all parameters with defaults...})."""
    parts = spec.split(":", 2)
    if len(parts) < 2 or parts[0] != "synthetic" or parts[1] not in _KINDS:
        raise ValueError(f"synthetic trace {spec!r}: expected synthetic:KIND[:k=v,...] with KIND in {sorted(_KINDS)}")
    kind = parts[1]
    params = {**_DEFAULTS, **_KINDS[kind]}
    for item in parts[2].split(",") if len(parts) == 3 and parts[2] else []:
        key, sep, value = item.partition("=")
        if not sep or key not in params:
            raise ValueError(f"synthetic trace {spec!r}: unknown parameter {key!r}; known: {sorted(params)}")
        try:
            params[key] = float(value)
        except ValueError:
            raise ValueError(f"synthetic trace {spec!r}: {key} must be a number, got {value!r}") from None
    for key in ("duration", "prompt", "output"):
        if params[key] <= 0:
            raise ValueError(f"synthetic trace {spec!r}: {key} must be > 0, got {params[key]}")
    if kind != "diurnal" and any(params[k] < 0 for k in _KINDS[kind]):
        raise ValueError(f"synthetic trace {spec!r}: rates and times must be >= 0")
    return kind, params


def _lengths(rng: np.random.Generator, mean: float, sigma: float, n: int) -> np.ndarray:
    if sigma <= 0:
        return np.full(n, max(1, round(mean)), dtype=np.int64)
    # Lognormal with the requested mean: mu = ln(mean) - sigma^2 / 2.
    values = rng.lognormal(math.log(mean) - sigma * sigma / 2, sigma, n)
    return np.maximum(1, np.rint(values)).astype(np.int64)


def synthetic(spec: str) -> Trace:
    kind, p = parse_synthetic(spec)
    rate, peak = _rate_fn(kind, p)
    rng = np.random.default_rng(int(p["seed"]))
    duration = p["duration"]
    # Thinning (Lewis-Shedler): a Poisson process at the peak rate, kept with rate(t)/peak.
    candidates = np.sort(rng.uniform(0, duration, rng.poisson(peak * duration)))
    keep = rng.uniform(0, peak, len(candidates)) < np.maximum(rate(candidates), 0)
    times = candidates[keep]
    n = len(times)
    return Trace(
        spec,
        times,
        _lengths(rng, p["prompt"], p["sigma"], n),
        _lengths(rng, p["output"], p["sigma"], n),
    )


# What a trace argument may be, for the commands' --help.
SOURCES = (
    "Azure or BurstGPT CSV, Mooncake JSONL (timestamp in ms), offset CSV/JSONL (offset_s), FILE@FROM:TO "
    "for part of one (e.g. @1d:2d, @90m:), synthetic:KIND[:k=v,...] (KIND: step, ramp, diurnal, bursty), "
    "or a rate curve replayed: rates:CURVE:lengths=FILE[,scale=F|mean=R][,seed=N][,start=ISO][@FROM:TO]"
)


# `FILE@FROM:TO`: the part of a trace from FROM to TO after its first request (each a number of
# seconds, or with a unit: 90m, 2h, 1d; either may be left out), so one day of a week-long trace
# can be planned on. Re-based to start at FROM.
_WINDOW = re.compile(r"^(?P<path>.+)@(?P<start>[^:@]*):(?P<end>[^:@]*)$")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration_seconds(text: str) -> float:
    """`3600`, `90m`, `2h`, `1d` -> seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d*)?)([smhd]?)", text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a duration (e.g. 3600, 90m, 2h, 1d)")
    return float(match[1]) * _UNITS[match[2]]


def _duration(text: str, spec: str) -> float:
    try:
        return duration_seconds(text)
    except ValueError as error:
        raise ValueError(f"trace {spec!r}: window bound {error}") from None


def _windowed(text: str) -> tuple[str, float, float]:
    """(path, from, to) of a `FILE@FROM:TO` source; (text, 0, inf) for a plain path."""
    match = _WINDOW.match(text)
    if not match or Path(text).exists():  # a file whose name has an @ is that file
        return text, 0.0, math.inf
    start = _duration(match["start"], text) if match["start"].strip() else 0.0
    end = _duration(match["end"], text) if match["end"].strip() else math.inf
    if end <= start:
        raise ValueError(f"trace {text!r}: the window must end after it starts")
    return match["path"], start, end


def load(source: str | Path) -> Trace:
    """A trace from a file (.csv: Azure, BurstGPT or offsets; .jsonl: Mooncake or offsets),
    optionally one window of it (`FILE@FROM:TO`), or a `synthetic:...` spec."""
    text = str(source)
    if text.startswith("synthetic:"):
        return synthetic(text)
    if text.startswith(RATES_PREFIX):
        spec, start, end = _rates_windowed(text)
        return _part(rate_curve(spec), text, text, start, end)
    name, start, end = _windowed(text)
    path = Path(name)
    if not path.is_file():
        raise ValueError(f"trace file {path} does not exist" if not path.exists() else f"trace {path} is not a file")
    if path.suffix == ".csv":
        whole = load_csv(path)
    elif path.suffix in (".jsonl", ".ndjson", ".json"):
        whole = load_jsonl(path)
    else:
        raise ValueError(f"trace file {path}: unknown format {path.suffix!r}; use .csv (Azure, BurstGPT) or .jsonl")
    return _part(whole, text, path.stem + text[len(name) :], start, end)


def _part(whole: Trace, source: str, name: str, start: float, end: float) -> Trace:
    """The window [start, end) of the trace `source` names, named `name`; the whole trace without one."""
    if (start, end) == (0.0, math.inf):
        return whole
    part = whole.window(start, end)
    if not len(part):
        raise ValueError(f"trace {source!r}: no requests in that window (the trace spans {whole.duration:.0f} s)")
    return replace(part, name=name)


# --- a rate curve replayed ----------------------------------------------------------------

RATES_PREFIX = "rates:"
_RATES_KEYS = ("lengths", "scale", "mean", "seed", "start")
# The curve's path ends at the first `:` before `key=`; each option starts after a `,` before `key=`.
_OPTIONS_START = re.compile(r":(?=[a-z_]+=)")
_NEXT_OPTION = re.compile(r",(?=[a-z_]+=)")
# A trailing window, only when both bounds read as durations (a path or value may hold `@` and `:`).
_RATES_WINDOW = re.compile(r"@(\d+(?:\.\d*)?[smhd]?)?:(\d+(?:\.\d*)?[smhd]?)?$")


@dataclass(frozen=True)
class RatesSpec:
    curve: Path
    lengths: str
    scale: float | None = None
    mean: float | None = None
    seed: int = 0
    start: datetime | None = None


def _rates_windowed(text: str) -> tuple[str, float, float]:
    """(spec, from, to) of a `rates:...@FROM:TO` source; (text, 0, inf) without a window."""
    match = _RATES_WINDOW.search(text)
    if not match:
        return text, 0.0, math.inf
    start = _duration(match[1], text) if match[1] else 0.0
    end = _duration(match[2], text) if match[2] else math.inf
    if end <= start:
        raise ValueError(f"trace {text!r}: the window must end after it starts")
    return text[: match.start()], start, end


def parse_rates(spec: str) -> RatesSpec:
    """`rates:CURVE:lengths=FILE,scale=0.06,seed=0` -> its parts; one line per bad key, naming the rule."""
    body = spec.removeprefix(RATES_PREFIX)
    split = _OPTIONS_START.search(body)
    curve, options = (body[: split.start()], body[split.end() :]) if split else (body, "")
    if not curve:
        raise ValueError(f"rates trace {spec!r}: expected rates:CURVE:lengths=FILE[,scale=F|mean=R,seed=N,start=ISO]")
    given: dict[str, str] = {}
    for item in _NEXT_OPTION.split(options) if options else []:
        key, _, value = item.partition("=")
        if key not in _RATES_KEYS:
            raise ValueError(f"rates trace {curve}: unknown key {key!r}; known: {', '.join(_RATES_KEYS)}")
        if key in given:
            raise ValueError(f"rates trace {curve}: {key} is given twice")
        given[key] = value
    if not given.get("lengths"):
        raise ValueError(
            f"rates trace {curve}: lengths=FILE is required: a request-level trace (e.g. an Azure CSV) "
            "or a length-mix file (`python -m capacity history` writes one)"
        )
    if "scale" in given and "mean" in given:
        raise ValueError(f"rates trace {curve}: scale and mean are mutually exclusive: give one (or neither: scale=1)")
    return RatesSpec(
        Path(curve),
        given["lengths"],
        _positive(curve, "scale", given.get("scale")),
        _positive(curve, "mean", given.get("mean")),
        _seed(curve, given.get("seed", "0")),
        curves.utc_time(given["start"], f"rates trace {curve}: start") if "start" in given else None,
    )


def _positive(curve: str, key: str, text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"rates trace {curve}: {key} must be a number > 0, got {text!r}")
    return value


def _seed(curve: str, text: str) -> int:
    if not text.strip().isdigit():
        raise ValueError(f"rates trace {curve}: seed must be a whole number >= 0, got {text!r}")
    return int(text)


def rate_curve(spec: str) -> Trace:
    """A Poisson replay of a per-minute rate curve (seeded) with token lengths from `lengths=`;
    arrivals count from minute 0, whose wall-clock time is the trace's start."""
    parsed = parse_rates(spec)
    curve = curves.read_curve(parsed.curve)
    start = parsed.start or curve.start
    if start is None:
        raise ValueError(
            f"rates trace {parsed.curve}: the curve records no start time (no time column): give start=ISO "
            "(the shared Azure 2024 curve starts at 2024-05-12T00:00:00Z, its README says)"
        )
    if parsed.mean is not None and curve.mean_per_second == 0:
        raise ValueError(f"rates trace {parsed.curve}: mean cannot scale a curve without requests")
    factor = parsed.scale or (parsed.mean / curve.mean_per_second if parsed.mean else 1.0)
    try:
        draw_lengths = _length_source(parsed.lengths)  # before any drawing: a bad file fails first
    except ValueError as error:
        raise ValueError(f"rates trace {parsed.curve}: lengths={parsed.lengths}: {error}") from None
    rng = np.random.default_rng(parsed.seed)
    arrivals = curves.poisson_arrivals(curve.per_minute * factor, rng)
    prompt, output = draw_lengths(len(arrivals), rng)
    return Trace(spec, arrivals, prompt.astype(np.int64), output.astype(np.int64), start)


def rebased(source: str, root: Path) -> str:
    """`source` with each relative file path it names taken from `root` (a command recorded at
    the project root, replayed from elsewhere); a synthetic spec names none."""

    def under(path: str) -> str:
        return path if path.startswith("synthetic:") or Path(path).is_absolute() else str(root / path)

    if source.startswith("synthetic:"):
        return source
    if not source.startswith(RATES_PREFIX):
        return under(source)
    body = source.removeprefix(RATES_PREFIX)
    split = _OPTIONS_START.search(body)
    if not split:
        return RATES_PREFIX + under(body)
    options = [
        f"lengths={under(item.partition('=')[2])}" if item.startswith("lengths=") else item
        for item in _NEXT_OPTION.split(body[split.end() :])
    ]
    return f"{RATES_PREFIX}{under(body[: split.start()])}:{','.join(options)}"


LengthDraw = Callable[[int, np.random.Generator], tuple[np.ndarray, np.ndarray]]


def _length_source(text: str) -> LengthDraw:
    """How to draw `n` (prompt, output) lengths: from a length mix (the pairing lost) or a trace's pairs."""
    if curves.is_length_mix(Path(text)):
        mix = curves.read_length_mix(Path(text))
        return lambda n, rng: curves.draw_from_mix(mix, n, rng)
    source = load(text)
    return lambda n, rng: curves.draw_pairs(source.prompt_tokens, source.output_tokens, n, rng)


# --- rescaling ------------------------------------------------------------------------


def time_scale(trace: Trace, factor: float) -> Trace:
    """Stretch time by `factor` (2 = half the rate over twice the duration)."""
    if factor <= 0:
        raise ValueError(f"time scale must be > 0, got {factor}")
    history = trace.history
    if history is not None:
        history = History(history.arrivals * factor, history.prompt_tokens)
    return replace(trace, arrivals=trace.arrivals * factor, history=history)


def rate_scale(trace: Trace, factor: float, seed: int = 0) -> Trace:
    """`factor` times the requests over the same duration, keeping the burst shape.

    Each request is kept floor(factor) times plus once more with probability frac(factor);
    copies are shifted by up to one mean inter-arrival gap so they do not coincide. A copy keeps
    its request's prefix block ids (the same conversation asked again).
    """
    if factor <= 0:
        raise ValueError(f"rate scale must be > 0, got {factor}")
    if factor == 1 or not len(trace):
        return trace
    rng = np.random.default_rng(seed)
    whole, frac = int(factor), factor - int(factor)
    copies = np.full(len(trace), whole) + (rng.uniform(size=len(trace)) < frac)
    index = np.repeat(np.arange(len(trace)), copies)
    gap = trace.duration / max(len(trace), 1)
    first_copy = np.r_[True, index[1:] != index[:-1]]
    jitter = np.where(first_copy, 0.0, rng.uniform(0, gap, len(index)))
    times = np.minimum(trace.arrivals[index] + jitter, trace.duration)
    blocks = [trace.block_ids[i] for i in index.tolist()] if trace.block_ids is not None else None
    scaled = _sorted_trace(
        trace.name, times, trace.prompt_tokens[index], trace.output_tokens[index], trace.start, blocks
    )
    return replace(scaled, history=trace.history.scaled(factor) if trace.history is not None else None)
