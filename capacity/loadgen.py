"""Async load generator for any OpenAI-compatible endpoint (real vLLM, the gateway, the mock).

Modes: closed loop (fixed concurrency), open loop (Poisson arrivals at a rate) and trace
replay (arrival offsets with their prompt/output lengths). A warm-up window is followed by a
measurement window; a request belongs to the window in which it completes, as in the
calibration runs. `time_scale` converts wall time to model time for a sped-up mock: windows,
rates and trace offsets are given, and latencies reported, in model seconds.
"""

from __future__ import annotations

import asyncio
import csv
import gc
import itertools
import json
import random
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

import aiohttp
import numpy as np

from capacity.prompts import PromptBuilder


@dataclass(frozen=True)
class LoadConfig:
    urls: tuple[str, ...]  # base URLs, e.g. http://127.0.0.1:8000 (several: round-robin)
    model: str | None = None  # None: the first model the first URL lists
    api: Literal["completions", "chat"] = "completions"
    stream: bool = False
    api_key: str | None = None
    prompt_tokens: int = 1024
    output_tokens: int = 128
    concurrency: int | None = None  # closed loop
    rate: float | None = None  # open loop, requests per (model) second
    trace: Path | None = None  # replay
    trace_speed: float = 1.0
    warmup_s: float = 30.0
    duration_s: float = 120.0
    max_requests: int | None = None
    timeout_s: float = 600.0
    tokenizer: str | None = None
    seed: int = 0
    time_scale: float = 1.0
    max_outstanding: int = 10_000  # open loop: arrivals beyond this many in flight are dropped

    def __post_init__(self) -> None:
        modes = [m for m in ("concurrency", "rate", "trace") if getattr(self, m) is not None]
        if len(modes) != 1:
            raise ValueError(f"exactly one of concurrency, rate, trace must be set (got {modes or 'none'})")
        if not self.urls:
            raise ValueError("at least one URL is required")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.rate is not None and self.rate <= 0:
            raise ValueError(f"rate must be > 0, got {self.rate}")
        for key in ("prompt_tokens", "output_tokens"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        for key in ("duration_s", "time_scale", "trace_speed", "timeout_s"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if self.warmup_s < 0:
            raise ValueError(f"warmup_s must be >= 0, got {self.warmup_s}")

    @property
    def mode(self) -> str:
        return "closed" if self.concurrency is not None else "poisson" if self.rate is not None else "trace"


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
    overhead_ms: float | None = None  # client latency minus the server's own (mock) latency, wall ms


@dataclass
class LoadResult:
    config: LoadConfig
    records: list[RequestRecord]
    window: tuple[float, float]  # model seconds since start
    itl_samples: np.ndarray  # per-token inter-token latencies in the window, model seconds
    loop_lag_ms: np.ndarray
    dropped: int = 0
    summary: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TraceEntry:
    offset_s: float
    prompt_tokens: int
    output_tokens: int


def load_trace(path: Path) -> list[TraceEntry]:
    """CSV or JSONL with an arrival time and token counts per request.

    Columns: `offset_s` (seconds) or `timestamp`/`TIMESTAMP` (ISO datetime or epoch seconds),
    `prompt_tokens`/`ContextTokens`/`input_length`, `output_tokens`/`GeneratedTokens`/`output_length`
    (the Azure LLM trace layout, and the simulator's JSONL).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"trace file {path} does not exist")
    if path.suffix in (".jsonl", ".ndjson"):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    else:
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"trace file {path} has no rows")

    def pick(row: dict, *names: str) -> str:
        for name in names:
            if name in row and row[name] not in (None, ""):
                return row[name]
        raise ValueError(f"trace file {path}: a row lacks a column among {names}: {row}")

    def when(value: str | float) -> float:
        try:
            return float(value)
        except ValueError:
            return datetime.fromisoformat(str(value)).timestamp()

    entries = []
    for row in rows:
        t = when(pick(row, "offset_s", "timestamp", "TIMESTAMP"))
        entries.append(TraceEntry(t, max(1, int(pick(row, "prompt_tokens", "ContextTokens", "input_length"))),
                                  max(1, int(pick(row, "output_tokens", "GeneratedTokens", "output_length")))))  # fmt: skip
    entries.sort(key=lambda e: e.offset_s)
    t0 = entries[0].offset_s
    return [TraceEntry(e.offset_s - t0, e.prompt_tokens, e.output_tokens) for e in entries]


async def discover_model(session: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> str:
    async with session.get(f"{url.rstrip('/')}/v1/models", headers=headers) as response:
        if response.status != 200:
            raise ValueError(f"{url}/v1/models answered HTTP {response.status}; pass --model")
        data = await response.json()
    models = [m["id"] for m in data.get("data", [])]
    if not models:
        raise ValueError(f"{url}/v1/models lists no model; pass --model")
    return models[0]


class LoadGenerator:
    def __init__(self, config: LoadConfig, progress: Callable[[dict], None] | None = None) -> None:
        self.config = config
        self._prompts = PromptBuilder(config.tokenizer, seed=config.seed)
        self._progress = progress
        self._records: list[RequestRecord] = []
        self._itl: list[tuple[float, int]] = []
        self._lags: list[float] = []
        self._counter = itertools.count()
        self._dropped = 0
        self._t0 = 0.0
        self._stop_at = 0.0
        self._window = (config.warmup_s, config.warmup_s + config.duration_s)
        self._recent: list[float] = []  # latencies of the last progress interval

    # --- clock: model seconds since start ---------------------------------------------------
    def _now(self) -> float:
        return (time.perf_counter() - self._t0) * self.config.time_scale

    def _wall(self, model_seconds: float) -> float:
        return model_seconds / self.config.time_scale

    async def run(self) -> LoadResult:
        with quiet_gc():
            return await self._run()

    async def _run(self) -> LoadResult:
        cfg = self.config
        headers = {"Content-Type": "application/json"}
        if cfg.api_key:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        timeout = aiohttp.ClientTimeout(total=self._wall(cfg.timeout_s))
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers) as session:
            model = cfg.model or await discover_model(session, cfg.urls[0], headers)
            self._model = model
            self._session = session
            self._t0 = time.perf_counter()
            self._stop_at = self._window[1]
            lag = asyncio.create_task(self._watch_loop_lag())
            ticker = asyncio.create_task(self._tick()) if self._progress else None
            if cfg.mode == "closed":
                work = self._closed_loop()
            elif cfg.mode == "poisson":
                work = self._open_loop(self._poisson_arrivals())
            else:
                work = self._open_loop(self._trace_arrivals())
            main = asyncio.create_task(work)
            try:
                # Requests still in flight when the window closes would complete after it and
                # never count: cancel them (the server aborts them) so the run ends on time.
                await asyncio.wait({main}, timeout=self._wall(self._stop_at) + 0.05)
                if not main.done():
                    main.cancel()
                await asyncio.gather(main, return_exceptions=True)
                if main.done() and not main.cancelled() and main.exception():
                    raise main.exception()
            finally:
                lag.cancel()
                if ticker:
                    ticker.cancel()
        result = LoadResult(
            config=cfg,
            records=self._records,
            window=self._window,
            itl_samples=_expand(self._itl),
            loop_lag_ms=np.asarray(self._lags),
            dropped=self._dropped,
        )
        result.summary = summarize(result)
        return result

    def _done(self) -> bool:
        cfg = self.config
        if self._now() >= self._stop_at:
            return True
        return cfg.max_requests is not None and len(self._records) >= cfg.max_requests

    async def _closed_loop(self) -> None:
        async def worker() -> None:
            while not self._done():
                await self._one(next(self._counter), self.config.prompt_tokens, self.config.output_tokens)

        await asyncio.gather(*(worker() for _ in range(self.config.concurrency or 1)))

    def _poisson_arrivals(self):  # noqa: ANN202 - generator of (offset, prompt, output)
        rng = random.Random(self.config.seed)
        t = 0.0
        while True:
            t += rng.expovariate(self.config.rate)
            yield t, self.config.prompt_tokens, self.config.output_tokens

    def _trace_arrivals(self):  # noqa: ANN202
        for e in load_trace(self.config.trace):
            yield e.offset_s / self.config.trace_speed, e.prompt_tokens, e.output_tokens

    async def _open_loop(self, arrivals) -> None:  # noqa: ANN001
        tasks: set[asyncio.Task] = set()
        for offset, prompt, output in arrivals:
            if offset >= self._stop_at or self._done():
                break
            delay = self._wall(offset - self._now())
            if delay > 0:
                await asyncio.sleep(delay)
            if len(tasks) >= self.config.max_outstanding:
                self._dropped += 1
                continue
            task = asyncio.create_task(self._one(next(self._counter), prompt, output))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        while not self._done() and self._now() < self._stop_at:
            await asyncio.sleep(min(0.05, self._wall(self._stop_at - self._now())))
        try:
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    def _body(self, index: int, prompt_tokens: int, output_tokens: int) -> bytes:
        prompt = self._prompts.build(index, prompt_tokens)
        body: dict = {"model": self._model, "max_tokens": output_tokens, "ignore_eos": True,
                      "temperature": 0.0, "stream": self.config.stream}  # fmt: skip
        if self.config.stream:
            body["stream_options"] = {"include_usage": True}
        if self.config.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        return json.dumps(body).encode()

    async def _one(self, index: int, prompt_tokens: int, output_tokens: int) -> None:
        cfg = self.config
        url = cfg.urls[index % len(cfg.urls)].rstrip("/")
        path = "/v1/chat/completions" if cfg.api == "chat" else "/v1/completions"
        data = self._body(index, prompt_tokens, output_tokens)
        record = RequestRecord(index=index, url=url, phase="", start_s=self._now())
        start = time.perf_counter()
        engine_latency: float | None = None
        itl: list[tuple[float, int]] = []
        try:
            async with self._session.post(url + path, data=data) as response:
                record.status = response.status
                if response.status != 200:
                    record.error = (await response.text())[:300]
                elif cfg.stream:
                    engine_latency = await self._read_stream(response, record, start, itl)
                else:
                    payload = await response.read()
                    usage = json.loads(payload).get("usage") or {}
                    record.prompt_tokens = usage.get("prompt_tokens", 0)
                    record.output_tokens = usage.get("completion_tokens", 0)
                    header = response.headers.get("x-engine-latency")
                    engine_latency = float(header) if header else None
                    record.ok = True
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
            record.error = f"{type(error).__name__}: {error}"[:300]
        elapsed = time.perf_counter() - start
        scale = cfg.time_scale
        if record.ok:
            record.latency_s = elapsed * scale
            if engine_latency is not None:
                record.overhead_ms = (elapsed - engine_latency) * 1000
            self._recent.append(record.latency_s)
        end = self._now()
        record.phase = "warmup" if end < self._window[0] else "measure" if end <= self._window[1] else "after"
        self._records.append(record)
        if itl and record.phase == "measure":
            self._itl.extend(itl)

    async def _read_stream(
        self, response: aiohttp.ClientResponse, record: RequestRecord, start: float, itl: list[tuple[float, int]]
    ) -> float | None:
        """Parse SSE events as they arrive; every event of one network read shares its arrival time."""
        scale = self.config.time_scale
        count = self._prompts.count
        last: float | None = None
        gaps = 0.0
        gap_tokens = 0
        engine_latency = None
        buffer = b""
        done = False
        async for data in response.content.iter_any():
            now = time.perf_counter()
            buffer += data
            while not done and (cut := buffer.find(b"\n\n")) >= 0:
                event, buffer = buffer[:cut], buffer[cut + 2 :]
                if event.startswith(b": engine-latency="):
                    engine_latency = float(event[17:])
                    continue
                if not event.startswith(b"data: "):
                    continue
                if event.startswith(b"data: [DONE]"):
                    done = True
                    break
                chunk = json.loads(event[6:])
                usage = chunk.get("usage")
                if usage:
                    record.prompt_tokens = usage.get("prompt_tokens", 0)
                    record.output_tokens = usage.get("completion_tokens", 0)
                choices = chunk.get("choices")
                if not choices:
                    continue
                c = choices[0]
                text = c.get("text") if "text" in c else (c.get("delta") or {}).get("content")
                if not text:
                    continue
                record.chunks += 1
                if last is None:
                    record.ttft_s = (now - start) * scale
                else:
                    tokens = max(1, count(text))
                    gap = (now - last) * scale
                    gaps += gap
                    gap_tokens += tokens
                    itl.append((gap / tokens, tokens))
                last = now
            if done:
                break
        if gap_tokens:
            record.itl_mean_s = gaps / gap_tokens
        record.ok = done
        if not done:
            record.error = "stream ended without [DONE]"
        return engine_latency

    async def _watch_loop_lag(self) -> None:
        interval = 0.05
        while True:
            before = time.perf_counter()
            await asyncio.sleep(interval)
            self._lags.append((time.perf_counter() - before - interval) * 1000)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            window = self._window
            done = sum(1 for r in self._records if r.phase == "measure" and r.ok)
            recent, self._recent = self._recent, []
            self._progress(
                {
                    "now_s": self._now(),
                    "end_s": window[1],
                    "phase": "warm-up" if self._now() < window[0] else "measure",
                    "completed": len(self._records),
                    "measured_ok": done,
                    "recent_p99_s": float(np.percentile(recent, 99)) if recent else None,
                }
            )


@contextmanager
def quiet_gc(gen0: int = 50_000):
    """Fewer, cheaper garbage collections while measuring: a full collection of a busy load
    generator's heap stalls its event loop for tens of milliseconds, which would be measured
    as latency. Long-lived objects are frozen out of the collector; thresholds restored after."""
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(gen0, 50, 1000)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _expand(pairs: Sequence[tuple[float, int]]) -> np.ndarray:
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


def summarize(result: LoadResult) -> dict:
    cfg = result.config
    measured = [r for r in result.records if r.phase == "measure"]
    ok = [r for r in measured if r.ok]
    window = result.window[1] - result.window[0]
    errors: dict[str, int] = {}
    for r in measured:
        if not r.ok:
            errors[str(r.status or r.error)] = errors.get(str(r.status or r.error), 0) + 1
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
        "window_s": [result.window[0], result.window[1]],
        "requests": len(result.records),
        "measured": len(measured),
        "successful": len(ok),
        "errors": errors,
        "dropped": result.dropped,
        "successful_rps": len(ok) / window,
        "total_tokens_per_s": (prompt + output) / window,
        "output_tokens_per_s": output / window,
        "latency_s": _pct([r.latency_s for r in ok]),
        "ttft_s": _pct([r.ttft_s for r in ok]),
        "itl_s": _pct(result.itl_samples),
        "client_overhead_ms": _pct([r.overhead_ms for r in ok]),
        "loop_lag_ms": _pct(result.loop_lag_ms),
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


async def run_load(config: LoadConfig, progress: Callable[[dict], None] | None = None) -> LoadResult:
    return await LoadGenerator(config, progress).run()
