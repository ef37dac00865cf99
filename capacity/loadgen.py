"""Async load generator for any OpenAI-compatible endpoint (real vLLM, the gateway, the mock).

Modes: closed loop (fixed concurrency), open loop (Poisson arrivals at a rate) and trace
replay (arrival offsets with their prompt/output lengths). A warm-up window is followed by a
measurement window; a request belongs to the window in which it completes, as in the
calibration runs. `time_scale` converts wall time to model time for a sped-up mock: windows,
rates and trace offsets are given, and latencies reported, in model seconds.

Latency runs from a request's start (its scheduled time in the open loop, so a late dispatch
is counted, not hidden) to the arrival of the bytes carrying its end. `client="raw"` (a lean
HTTP/1.1 client, plain http only) takes arrivals from the kernel's receive timestamps on Linux,
so the load generator's own event-loop queueing stays out of TTFT, inter-token gaps and latency
even with hundreds of streams; aiohttp stamps a read when the loop dispatches it.

Against the mock, which reports when its handler started and when it wrote a response's last
bytes, each request also records the load generator's own added latency (`overhead_ms`): the
time from its start to the request being on the socket plus the time from the mock's last write
to the recorded arrival. `run_load_processes` spreads the load over several processes
(optionally on uvloop).
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import gc
import itertools
import json
import multiprocessing
import random
import socket
import struct
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Literal

import aiohttp
import numpy as np

from capacity.workload.prompts import PromptBuilder


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
    # "aiohttp": the general client (https, proxies, any server). "raw": a lean HTTP/1.1 client for
    # http:// URLs that parses responses in the socket's read callback and stamps each read with
    # the kernel's receive time (see _RawConnection)
    client: Literal["aiohttp", "raw"] = "aiohttp"

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
        if self.client not in ("aiohttp", "raw"):
            raise ValueError(f"client must be 'aiohttp' or 'raw', got {self.client!r}")
        if self.client == "raw" and not all(u.startswith("http://") for u in self.urls):
            raise ValueError("the raw client speaks plain http:// only; use client='aiohttp' for other URLs")

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
    # Harness timings, wall ms, only against a server that reports them (the mock; see _Timing).
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
    cpu_s: float = 0.0  # CPU time of the load generator's process(es) during the run
    cpu_wait_s: float = 0.0  # time they were runnable but had no core (Linux schedstat; 0 elsewhere)
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
    def __init__(
        self, config: LoadConfig, progress: Callable[[dict], None] | None = None, *, start_at: float | None = None
    ) -> None:
        """`start_at`: a `time.monotonic()` instant to start at, so worker processes share one window."""
        self.config = config
        self._start_at = start_at
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
        return (time.monotonic() - self._t0) * self.config.time_scale

    def _wall(self, model_seconds: float) -> float:
        return model_seconds / self.config.time_scale

    async def run(self) -> LoadResult:
        cpu, wait = time.process_time(), _runqueue_wait_s()
        with quiet_gc():
            result = await self._run()
        result.cpu_s = time.process_time() - cpu
        result.cpu_wait_s = _runqueue_wait_s() - wait
        return result

    async def _run(self) -> LoadResult:
        cfg = self.config
        headers = {"Content-Type": "application/json"}
        if cfg.api_key:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        timeout = aiohttp.ClientTimeout(total=self._wall(cfg.timeout_s))
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers,
                                         trace_configs=[_stamp_written()]) as session:  # fmt: skip
            model = cfg.model or await discover_model(session, cfg.urls[0], headers)
            self._model = model
            self._session = session
            self._raw_pool = _RawPool()
            self._raw_auth = f"Authorization: Bearer {cfg.api_key}\r\n" if cfg.api_key else ""
            if self._start_at is not None:
                await asyncio.sleep(max(0.0, self._start_at - time.monotonic()))
            self._t0 = self._start_at if self._start_at is not None else time.monotonic()
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
                self._raw_pool.close()
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
            due = self._t0 + self._wall(offset)
            task = asyncio.create_task(self._one(next(self._counter), prompt, output, due))
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

    async def _one(self, index: int, prompt_tokens: int, output_tokens: int, due: float | None = None) -> None:
        """One request. `due`: its scheduled time (open loop), so a late dispatch counts against
        its latency and send lag instead of hiding (no coordinated omission)."""
        cfg = self.config
        url = cfg.urls[index % len(cfg.urls)].rstrip("/")
        path = "/v1/chat/completions" if cfg.api == "chat" else "/v1/completions"
        # one clock for every stamp, and the one the mock stamps with (CLOCK_MONOTONIC), so
        # same-host lags can be taken across the two processes
        start = time.monotonic() if due is None else min(time.monotonic(), due)
        record = RequestRecord(index=index, url=url, phase="", start_s=(start - self._t0) * cfg.time_scale)
        data = self._body(index, prompt_tokens, output_tokens)
        timing = _Timing()
        itl: list[tuple[float, int]] = []
        try:
            if cfg.client == "raw":
                await self._send_raw(url, path, data, record, start, itl, timing)
            else:
                await self._send_aiohttp(url + path, data, record, start, itl, timing)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as error:
            record.error = f"{type(error).__name__}: {error}"[:300]
        if record.ok:
            elapsed = timing.end - start
            record.latency_s = elapsed * cfg.time_scale
            timing.fill(record, start, elapsed)
            self._recent.append(record.latency_s)
        end = self._now()
        record.phase = "warmup" if end < self._window[0] else "measure" if end <= self._window[1] else "after"
        self._records.append(record)
        if itl and record.phase == "measure":
            self._itl.extend(itl)

    async def _send_aiohttp(self, url: str, data: bytes, record: RequestRecord, start: float,
                            itl: list[tuple[float, int]], timing: _Timing) -> None:  # fmt: skip
        async with self._session.post(url, data=data, trace_request_ctx=timing) as response:
            record.status = response.status
            if response.status != 200:
                record.error = (await response.text())[:300]
            elif self.config.stream:
                reader = _SSEReader(record, start, itl, timing, self.config.time_scale, self._prompts.count)
                async for piece in response.content.iter_any():
                    # stamped as the read returns: every event of one network read shares it
                    if reader.feed(piece, time.monotonic()):
                        break
                reader.finish()
            else:
                payload = await response.read()
                timing.end = time.monotonic()
                self._full_response(payload, response.headers, record, timing)

    async def _send_raw(self, url: str, path: str, data: bytes, record: RequestRecord, start: float,
                        itl: list[tuple[float, int]], timing: _Timing) -> None:  # fmt: skip
        reader = _SSEReader(record, start, itl, timing, self.config.time_scale, self._prompts.count)
        on_body = reader.feed if self.config.stream else None
        authority, prefix = _split_url(url)
        head = (f"POST {prefix}{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n{self._raw_auth}\r\n").encode()  # fmt: skip
        async with asyncio.timeout(self._wall(self.config.timeout_s)):
            connection = await self._raw_pool.get(authority)
            reusable = False
            try:
                response = await connection.request(head + data, on_body)
                timing.written = time.monotonic()
                status, headers, body = await response
                reusable = headers.get("connection") != "close"
            finally:
                # a request cut short (timeout, the window closing) drops its connection: the server aborts it
                self._raw_pool.put(authority, connection, reusable)
        record.status = status
        if status != 200:
            record.error = body[:300].decode(errors="replace")
        elif self.config.stream:
            reader.finish()
        else:
            timing.end = connection.last_read
            self._full_response(body, headers, record, timing)

    @staticmethod
    def _full_response(payload: bytes, headers, record: RequestRecord, timing: _Timing) -> None:  # noqa: ANN001
        usage = json.loads(payload).get("usage") or {}
        record.prompt_tokens = usage.get("prompt_tokens", 0)
        record.output_tokens = usage.get("completion_tokens", 0)
        timing.engine_s = _float(headers.get("x-engine-latency"))
        timing.parse_server(headers.get("x-server-timing"))
        record.ok = True

    async def _watch_loop_lag(self) -> None:
        interval = 0.05
        while True:
            before = time.monotonic()
            await asyncio.sleep(interval)
            self._lags.append((time.monotonic() - before - interval) * 1000)

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


_decode = json.JSONDecoder().decode  # str in: json.loads(bytes) first sniffs the encoding, per chunk


class _SSEReader:
    """Parses a streaming completion's SSE events into its record, as network reads arrive."""

    def __init__(self, record: RequestRecord, start: float, itl: list[tuple[float, int]], timing: _Timing,
                 scale: float, count: Callable[[str], int]) -> None:  # fmt: skip
        self.record, self.start, self.itl, self.timing = record, start, itl, timing
        self.scale, self.count = scale, count
        self.last: float | None = None
        self.gaps = 0.0
        self.gap_tokens = 0
        self.buffer = b""
        self.done = False

    def feed(self, data: bytes, now: float) -> bool:
        """Take one network read, stamped `now`; True once [DONE] has been read."""
        buffer = self.buffer + data if self.buffer else data
        while not self.done and (cut := buffer.find(b"\n\n")) >= 0:
            event, buffer = buffer[:cut], buffer[cut + 2 :]
            if event.startswith(b": "):
                self.timing.parse_comment(event)
            elif event.startswith(b"data: [DONE]"):
                self.done = True
                self.timing.end = now
            elif event.startswith(b"data: "):
                self._chunk(_decode(event[6:].decode()), now)
        self.buffer = buffer
        return self.done

    def _chunk(self, chunk: dict, now: float) -> None:
        record = self.record
        usage = chunk.get("usage")
        if usage:
            record.prompt_tokens = usage.get("prompt_tokens", 0)
            record.output_tokens = usage.get("completion_tokens", 0)
        choices = chunk.get("choices")
        if not choices:
            return
        c = choices[0]
        text = c.get("text") if "text" in c else (c.get("delta") or {}).get("content")
        if not text:
            return
        record.chunks += 1
        if self.last is None:
            record.ttft_s = (now - self.start) * self.scale
        else:
            tokens = max(1, self.count(text))
            gap = (now - self.last) * self.scale
            self.gaps += gap
            self.gap_tokens += tokens
            self.itl.append((gap / tokens, tokens))
        self.last = now

    def finish(self) -> None:
        if self.gap_tokens:
            self.record.itl_mean_s = self.gaps / self.gap_tokens
        self.record.ok = self.done
        if not self.done:
            self.record.error = "stream ended without [DONE]"


# Linux's SO_TIMESTAMPNS (asm-generic; Python does not name it): each TCP read then carries the
# kernel's receive time of its last segment as a CLOCK_REALTIME timespec.
_SO_TIMESTAMPNS = 35 if sys.platform == "linux" else None
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY_SPACE = socket.CMSG_SPACE(_TIMESPEC.size) if _SO_TIMESTAMPNS else 0


def _realtime_minus_monotonic() -> float:
    """The offset between the two clocks, read so that a preemption between the reads (which
    would shift every arrival by its length) is caught: bracket, retry when the bracket is wide."""
    for _ in range(4):
        before = time.time()
        monotonic = time.monotonic()
        after = time.time()
        if after - before < 20e-6:
            break
    return (before + after) / 2 - monotonic


def _arrival(ancillary: list[tuple[int, int, bytes]]) -> float:
    """A read's arrival on the monotonic clock: the kernel's receive stamp when there is one."""
    now = time.monotonic()
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(payload)
            return min(now, seconds + nanoseconds * 1e-9 - _realtime_minus_monotonic())
    return now


class _RawConnection:
    """One keep-alive HTTP/1.1 client connection that parses its response in the read callback.

    The lean path for many streams: a non-blocking socket read by a loop reader, each body piece
    handed to `on_body` as it arrives, without a stream reader or a task wake-up per chunk (the
    awaiting task wakes once, when the response is complete). Each read is stamped with the
    kernel's receive time (SO_TIMESTAMPNS, Linux), not the time the event loop got round to it:
    when an engine step sends a token to hundreds of streams at once, the last of their reads is
    dispatched milliseconds after it arrived, and that queueing is the load generator's, not the
    server's. Elsewhere the dispatch time is used. Understands what OpenAI-compatible servers
    send: Content-Length or chunked bodies."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._loop = asyncio.get_running_loop()
        self.closed = False
        self.last_read = 0.0
        self._future: asyncio.Future[tuple[int, dict[str, str], bytes]] | None = None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request is one write: no Nagle
        if _SO_TIMESTAMPNS is not None:
            with contextlib.suppress(OSError):  # a kernel without it: reads are stamped on dispatch
                sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        self._loop.add_reader(sock.fileno(), self._on_readable)

    @classmethod
    async def open(cls, host: str, port: int) -> "_RawConnection":
        loop = asyncio.get_running_loop()
        family, kind, proto, _, address = (await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM))[0]
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
        except BaseException:
            sock.close()
            raise
        return cls(sock)

    @property
    def usable(self) -> bool:
        return not self.closed

    async def request(self, data: bytes, on_body: Callable[[bytes, float], bool] | None):  # noqa: ANN201 - a Future
        """Send one request; returns once it is on the socket, with a future that gives (status,
        lower-cased headers, body not given to on_body)."""
        self._on_body = on_body
        self._buffer = b""
        self._status = 0
        self._headers: dict[str, str] | None = None
        self._chunked = False
        self._remaining: int | None = None  # body bytes left (Content-Length); None: until close
        self._body: list[bytes] = []
        self._future = future = self._loop.create_future()
        await self._loop.sock_sendall(self._sock, data)  # one send() unless the socket buffer is full
        return future

    def _on_readable(self) -> None:
        try:
            data, ancillary, _, _ = self._sock.recvmsg(262_144, _ANCILLARY_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(error)
            return
        if not data:
            self._lost(None)
            return
        self._data_received(data, _arrival(ancillary))

    def _data_received(self, data: bytes, now: float) -> None:
        self.last_read = now
        if self._future is None or self._future.done():
            return  # nothing asked for (a late byte after a cancelled request)
        buffer = self._buffer + data if self._buffer else data
        try:
            if self._headers is None:
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    self._buffer = buffer
                    return
                self._head(buffer[:end])
                buffer = buffer[end + 4 :]
            self._buffer = self._chunks(buffer, now) if self._chunked else self._plain(buffer, now)
        except ValueError as error:  # a malformed response: fail the request, drop the connection
            self._future.set_exception(error)
            self._close()

    def _head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        self._status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self._headers = headers
        self._chunked = "chunked" in headers.get("transfer-encoding", "")
        if not self._chunked and "content-length" in headers:
            self._remaining = int(headers["content-length"])

    def _chunks(self, buffer: bytes, now: float) -> bytes:
        while (eol := buffer.find(b"\r\n")) >= 0:
            size = int(buffer[:eol].split(b";", 1)[0], 16)
            if size == 0:  # the last chunk; our servers send no trailers
                if len(buffer) < eol + 4:
                    return buffer
                self._complete()
                return b""
            end = eol + 2 + size
            if len(buffer) < end + 2:
                return buffer
            self._deliver(buffer[eol + 2 : end], now)
            buffer = buffer[end + 2 :]
        return buffer

    def _plain(self, buffer: bytes, now: float) -> bytes:
        if self._remaining is None:  # delimited by the connection's close
            self._deliver(buffer, now)
            return b""
        piece = buffer[: self._remaining]
        self._remaining -= len(piece)
        if piece:
            self._deliver(piece, now)
        if self._remaining == 0:
            self._complete()
        return b""

    def _deliver(self, piece: bytes, now: float) -> None:
        if self._on_body is not None and self._status == 200:
            self._on_body(piece, now)
        else:
            self._body.append(piece)

    def _complete(self) -> None:
        if not self._future.done():  # type: ignore[union-attr]
            self._future.set_result((self._status, self._headers or {}, b"".join(self._body)))  # type: ignore[union-attr]

    def drop(self) -> None:
        """Close, abandoning any response in progress (nobody awaits it any more)."""
        if self._future is not None and not self._future.done():
            self._future.cancel()
        self._close()

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()

    def _lost(self, error: OSError | None) -> None:
        """The server closed the connection (or it broke)."""
        self._close()
        if self._future is not None and not self._future.done():
            if error is None and self._headers is not None and not self._chunked and self._remaining is None:
                self._complete()  # a body delimited by the connection's close
            else:
                self._future.set_exception(error or ConnectionResetError("the server closed the connection mid-response"))


class _RawPool:
    """Idle keep-alive connections per base URL (a closed loop reuses one per stream)."""

    def __init__(self) -> None:
        self._idle: dict[str, list[_RawConnection]] = {}

    async def get(self, authority: str) -> _RawConnection:
        idle = self._idle.get(authority)
        while idle:
            connection = idle.pop()
            if connection.usable:
                return connection
        host, _, port = authority.rpartition(":")
        if not host or not port.isdigit():  # no port given
            host, port = authority, "80"
        return await _RawConnection.open(host.strip("[]"), int(port))

    def put(self, authority: str, connection: _RawConnection, reusable: bool) -> None:
        if reusable and connection.usable:
            self._idle.setdefault(authority, []).append(connection)
        else:
            connection.drop()

    def close(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.drop()
        self._idle.clear()


def _split_url(url: str) -> tuple[str, str]:
    """http://host:port/prefix -> ("host:port", "/prefix")."""
    authority, slash, prefix = url.removeprefix("http://").partition("/")
    return authority, (slash + prefix).rstrip("/")


_ENGINE, _SERVER = b": engine-latency=", b": server-timing="  # the mock's SSE comments


@dataclass(slots=True)
class _Timing:
    """What a request's end and the server said about it (the mock's comments or headers)."""

    written: float | None = None  # client monotonic time the request's last byte went to the socket
    end: float = 0.0  # client monotonic time the response's end was read
    engine_s: float | None = None  # engine model latency, wall seconds
    received: float | None = None  # server monotonic time its handler started
    sent: float | None = None  # server monotonic time it wrote the last bytes

    def parse_comment(self, event: bytes) -> None:
        if event.startswith(_ENGINE):
            self.engine_s = float(event[len(_ENGINE) :])
        elif event.startswith(_SERVER):
            self.parse_server(event[len(_SERVER) :].decode())

    def parse_server(self, value: str | None) -> None:
        if value:
            received, sent = value.split(",")
            self.received, self.sent = float(received), float(sent)

    def fill(self, record: RequestRecord, start: float, elapsed: float) -> None:
        if self.engine_s is not None:
            record.engine_overhead_ms = (elapsed - self.engine_s) * 1000
        if self.received is None or self.sent is None:
            return
        record.round_trip_overhead_ms = (elapsed - (self.sent - self.received)) * 1000
        record.receive_lag_ms = (self.end - self.sent) * 1000
        if self.written is not None:
            record.send_ms = (self.written - start) * 1000
            record.server_queue_ms = (self.received - self.written) * 1000
            record.overhead_ms = record.send_ms + record.receive_lag_ms


def _stamp_written() -> aiohttp.TraceConfig:
    """aiohttp hands the body to its writer right after this signal: stamp `_Timing.written`."""

    async def on_chunk_sent(_session, context, _params) -> None:  # noqa: ANN001
        if isinstance(context.trace_request_ctx, _Timing):
            context.trace_request_ctx.written = time.monotonic()

    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(on_chunk_sent)
    return trace


def _runqueue_wait_s() -> float:
    """Seconds this thread has waited for a core while runnable (Linux /proc schedstat), else 0.
    Where it grows, the client's lags include CPU contention, not only its own work."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _float(value: str | None) -> float | None:
    return float(value) if value else None


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


async def run_load(config: LoadConfig, progress: Callable[[dict], None] | None = None) -> LoadResult:
    return await LoadGenerator(config, progress).run()


def loop_factory(use_uvloop: bool = True) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when asked for and installed (it halves the loop's per-callback cost);
    None, asyncio's default loop, otherwise: uvloop is optional at run time."""
    if not use_uvloop:
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_load_sync(config: LoadConfig, *, use_uvloop: bool = False, start_at: float | None = None) -> LoadResult:
    """Run the load in this process on a fresh event loop (uvloop's if asked for and installed)."""
    with asyncio.Runner(loop_factory=loop_factory(use_uvloop)) as runner:
        return runner.run(LoadGenerator(config, start_at=start_at).run())


def split_config(config: LoadConfig, workers: int) -> list[LoadConfig]:
    """One share of the load per worker process: concurrency or rate divided, distinct prompt seeds
    (so no two workers send the same prompt), the same windows."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if config.trace is not None and workers > 1:
        raise ValueError("trace replay runs in one process (the trace's order would be split)")
    if config.concurrency is not None and config.concurrency < workers:
        raise ValueError(f"concurrency {config.concurrency} is below workers {workers}")
    shares = []
    for i in range(workers):
        changes: dict = {"seed": config.seed + i}
        if config.concurrency is not None:
            changes["concurrency"] = config.concurrency // workers + (i < config.concurrency % workers)
        if config.rate is not None:
            changes["rate"] = config.rate / workers
        if config.max_requests is not None:
            changes["max_requests"] = max(1, config.max_requests // workers)
        shares.append(replace(config, **changes))
    return shares


def run_load_processes(config: LoadConfig, workers: int, *, use_uvloop: bool = False,
                       start_timeout_s: float = 60.0) -> LoadResult:  # fmt: skip
    """Spread the load over `workers` processes, each with its own event loop, and merge the results.

    One Python event loop is one core at most, and a burst of streams is served one callback at a
    time: more processes serve a burst in parallel. The workers start on one shared instant, so
    their windows coincide and the merged throughput is the sum."""
    shares = split_config(config, workers)
    if workers == 1:
        return run_load_sync(config, use_uvloop=use_uvloop)
    ctx = multiprocessing.get_context("spawn")  # no fork of a parent's loop or threads
    # two barriers: every worker has imported (ready), then the start instant is set and read (go)
    ready, go = ctx.Barrier(workers + 1, timeout=start_timeout_s), ctx.Barrier(workers + 1, timeout=start_timeout_s)
    start = ctx.Value("d", 0.0)
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(i, share, use_uvloop, (ready, go), start, queue), daemon=True)
             for i, share in enumerate(shares)]  # fmt: skip
    for proc in procs:
        proc.start()
    try:
        ready.wait()
        start.value = time.monotonic() + 0.3  # time for every worker to open its session
        go.wait()
        deadline = config.warmup_s + config.duration_s
        timeout = start_timeout_s + deadline / config.time_scale + 30
        parts: dict[int, LoadResult | str] = dict(queue.get(timeout=timeout) for _ in procs)
    finally:
        for proc in procs:
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
    errors = [part for part in parts.values() if isinstance(part, str)]
    if errors:
        raise RuntimeError("load worker failed: " + errors[0])
    return merge_results(config, [parts[i] for i in range(workers)])  # type: ignore[misc]


def _worker(i: int, config: LoadConfig, use_uvloop: bool, barriers, start, queue) -> None:  # noqa: ANN001
    try:
        for barrier in barriers:
            barrier.wait()
        result = run_load_sync(config, use_uvloop=use_uvloop, start_at=start.value)
        result.summary = {}
        queue.put((i, result))
    except BaseException as error:  # noqa: BLE001 - reported to the parent, which raises
        queue.put((i, f"worker {i}: {type(error).__name__}: {error}"))


def merge_results(config: LoadConfig, parts: Sequence[LoadResult]) -> LoadResult:
    """One result from the workers' shares: worker i's request k becomes request k*workers + i."""
    n = len(parts)
    records = []
    for i, part in enumerate(parts):
        for record in part.records:
            record.index = record.index * n + i
            records.append(record)
    records.sort(key=lambda r: r.start_s)
    result = LoadResult(
        config=config,
        records=records,
        window=parts[0].window,
        itl_samples=np.concatenate([p.itl_samples for p in parts]),
        loop_lag_ms=np.concatenate([p.loop_lag_ms for p in parts]),
        dropped=sum(p.dropped for p in parts),
        cpu_s=sum(p.cpu_s for p in parts),
        cpu_wait_s=sum(p.cpu_wait_s for p in parts),
    )
    result.summary = summarize(result)
    return result
