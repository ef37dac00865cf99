"""What a load run measured: one record per request, the run's result, its summary statistics
and the files it writes (requests.jsonl, summary.json)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from capacity.measure.config import LoadConfig
from contract.settings.autoscaling import Slo


@dataclass(slots=True)
class RequestRecord:
    index: int
    url: str
    phase: str  # warmup | measure | after (completed after the window)
    start_s: float  # model seconds since the run started
    ok: bool = False
    status: int = 0
    error: str | None = None
    latency_s: float | None = None
    ttft_s: float | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    chunks: int = 0
    itl_mean_s: float | None = None
    # Harness timings, wall ms, only against a server that reports them (the mock; see Timing).
    # Absolute stamps of the two processes are compared: one host (one CLOCK_MONOTONIC) only.
    overhead_ms: float | None = None  # the load generator's own added latency: send_ms + receive_lag_ms
    send_ms: float | None = None  # start -> the request's last byte handed to the socket (client)
    receive_lag_ms: float | None = None  # server's last write -> client read the end (client + kernel)
    server_queue_ms: float | None = None  # request written -> server handler entry (kernel + server busy)
    round_trip_overhead_ms: float | None = None  # latency minus server handling: overhead_ms + server_queue_ms
    engine_overhead_ms: float | None = None  # client latency minus the engine model's latency (both sides' harness)


@dataclass
class LoadResult:
    config: LoadConfig
    records: list[RequestRecord]
    window: tuple[float, float]  # model seconds since start
    itl_samples: np.ndarray  # per-token inter-token latencies in the window, model seconds
    loop_lag_ms: np.ndarray
    dropped: int = 0
    skipped_over_context: int = 0  # trace requests over the replica's max_model_len, never sent
    cpu_s: float = 0.0  # CPU time of the load generator's process(es) during the run
    cpu_wait_s: float = 0.0  # time they were runnable but had no core (Linux schedstat; 0 elsewhere)
    token_counting: str = ""  # how prompts were sized and streamed text counted (PromptBuilder's counter)
    summary: dict = field(default_factory=dict)


def weighted_samples(pairs: Sequence[tuple[float, int]]) -> np.ndarray:
    """(value, weight) pairs -> each value repeated weight times (per-token inter-token latencies)."""
    if not pairs:
        return np.zeros(0)
    values = np.fromiter((v for v, _ in pairs), float, len(pairs))
    weights = np.fromiter((w for _, w in pairs), int, len(pairs))
    return np.repeat(values, weights)


def _pct(values: Sequence[float] | np.ndarray, qs: tuple[int, ...] = (50, 90, 95, 99)) -> dict[str, float | None]:
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    if arr.size == 0:
        return {f"p{q}": None for q in qs} | {"mean": None, "max": None}
    out: dict[str, float | None] = {f"p{q}": float(np.percentile(arr, q)) for q in qs}
    return out | {"mean": float(arr.mean()), "max": float(arr.max())}


def slo_attainment(records: Sequence[RequestRecord], slo: Slo) -> float | None:
    """The share of measured requests that meet the per-request SLO (`contract...Slo.met_by`: TTFT
    and TPOT; a failed request misses); None without streamed TTFTs to judge."""
    measured = [r for r in records if r.phase == "measure"]
    if not measured or not any(r.ttft_s is not None for r in measured):
        return None
    met = sum(r.ok and slo.met_by(r.ttft_s, r.latency_s, r.output_tokens) for r in measured)
    return met / len(measured)


def summarize(result: LoadResult) -> dict:
    cfg = result.config
    measured = [r for r in result.records if r.phase == "measure"]
    ok = [r for r in measured if r.ok]
    window = result.window[1] - result.window[0]
    per_s = 1 / window if window > 0 else 0.0  # a window of no time (every request ended in warm-up): none
    errors: dict[str, int] = {}
    for r in measured:
        if not r.ok:
            # an HTTP error by its status; a failure after HTTP 200 (mid-stream) or without an answer by its message
            key = str(r.status) if r.status not in (0, 200) else str(r.error)
            errors[key] = errors.get(key, 0) + 1
    prompt = sum(r.prompt_tokens for r in ok)
    output = sum(r.output_tokens for r in ok)
    return {
        "mode": cfg.mode,
        "urls": list(cfg.urls),
        "api": cfg.api,
        "stream": cfg.stream,
        "concurrency": cfg.concurrency,
        "rate": cfg.rate,
        "prompt_tokens": cfg.prompt_tokens,
        "output_tokens": cfg.output_tokens,
        "time_scale": cfg.time_scale,
        "token_counting": result.token_counting,
        "window_s": [result.window[0], result.window[1]],
        "requests": len(result.records),
        "measured": len(measured),
        "successful": len(ok),
        "errors": errors,
        "dropped": result.dropped,
        "skipped_over_context": result.skipped_over_context,
        "successful_rps": len(ok) * per_s,
        "total_tokens_per_s": (prompt + output) * per_s,
        "output_tokens_per_s": output * per_s,
        "latency_s": _pct([r.latency_s for r in ok]),
        "ttft_s": _pct([r.ttft_s for r in ok]),
        "itl_s": _pct(result.itl_samples),
        "client_overhead_ms": _pct([r.overhead_ms for r in ok]),
        "send_ms": _pct([r.send_ms for r in ok]),
        "receive_lag_ms": _pct([r.receive_lag_ms for r in ok]),
        "server_queue_ms": _pct([r.server_queue_ms for r in ok]),
        "round_trip_overhead_ms": _pct([r.round_trip_overhead_ms for r in ok]),
        "engine_overhead_ms": _pct([r.engine_overhead_ms for r in ok]),
        "loop_lag_ms": _pct(result.loop_lag_ms),
        "cpu_s": result.cpu_s,
        "cpu_wait_s": result.cpu_wait_s,
    }


def write_outputs(result: LoadResult, jsonl: Path | None, summary: Path | None) -> None:
    if jsonl:
        jsonl.parent.mkdir(parents=True, exist_ok=True)
        with jsonl.open("w") as f:
            for r in result.records:
                f.write(json.dumps(asdict(r)) + "\n")
    if summary:
        summary.parent.mkdir(parents=True, exist_ok=True)
        summary.write_text(json.dumps(result.summary, indent=2) + "\n")
