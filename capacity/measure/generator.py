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
to the recorded arrival. `capacity.measure.workers` spreads the load over several processes
(optionally on uvloop).

A replayed trace request that the replica's context cannot hold (prompt + output over the
`max_model_len` its /v1/models card lists, which vLLM would refuse with HTTP 400) is skipped and
counted (`skipped_over_context`), not sent: one long prompt does not end a replay.

`max_requests` caps the requests sent, in every mode. A run of `max_consecutive_4xx` client
errors in a row (an unknown model, a wrong key, a prompt over the context) stops the run with
`LoadStopped`, naming the URL, the model and the status: the server refuses what is being sent,
so sending more measures nothing. 408 and 429 do not count: they are what overload looks like.
Tokens are counted with the model's tokenizer when one is local (`find_tokenizer`: `tokenizer`,
the model's folder, or the local Hugging Face cache), else as whitespace words; the summary says which.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import numpy as np

from capacity.measure.config import LoadConfig
from capacity.measure.rawhttp import RawPool, split_url
from capacity.measure.results import LoadResult, RequestRecord, summarize, weighted_samples
from capacity.measure.sse import SSEReader
from capacity.measure.timing import Timing
from capacity.runtime import quiet_gc
from capacity.workload import traces
from capacity.workload.prompts import PromptBuilder, find_tokenizer

# 4xx statuses that say "not now" rather than "not this request": they do not stop a run
_OVERLOAD_STATUSES = frozenset({408, 429})


class LoadStopped(ValueError):
    """The server kept refusing the requests (a run of 4xx): the run stopped, and why."""


Arrival = tuple[float, int, int, tuple[int, ...] | None]


def trace_arrivals(path: Path, speed: float = 1.0, *, prefix_reuse: bool = False) -> Iterator[Arrival]:
    """(offset seconds, prompt tokens, output tokens, prefix block ids or None) per request of a
    trace, `speed` times faster. A request asks for at least one token of each. With
    `prefix_reuse`, the trace must carry block ids (Mooncake hash_ids)."""
    trace = traces.load(path)
    if prefix_reuse and trace.block_ids is None:
        raise ValueError(f"--prefix-reuse: {path} has no prefix block ids (a Mooncake trace's hash_ids on every line)")
    blocks = trace.block_ids if prefix_reuse and trace.block_ids is not None else [None] * len(trace)
    for offset, prompt, output, ids in zip(trace.arrivals, trace.prompt_tokens, trace.output_tokens, blocks):
        yield float(offset) / speed, max(1, int(prompt)), max(1, int(output)), ids


async def listed_models(session: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> list[dict]:
    """A server's /v1/models entries: each `id` a name to request, its `root` (vLLM: the
    checkpoint it loaded, a Hub id or a folder)."""
    async with session.get(f"{url.rstrip('/')}/v1/models", headers=headers) as response:
        if response.status != 200:
            raise ValueError(f"{url}/v1/models answered HTTP {response.status}; pass --model")
        data = await response.json()
    return list(data.get("data", []))


async def first_model(session: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> dict:
    """The first entry of a server's /v1/models."""
    models = await listed_models(session, url, headers)
    if not models:
        raise ValueError(f"{url}/v1/models lists no model; pass --model")
    return models[0]


async def _max_model_len(session: aiohttp.ClientSession, url: str, headers: dict[str, str], model: str) -> int | None:
    """The `max_model_len` of `model`'s /v1/models card (vLLM's `show_available_models` builds each
    ModelCard with `max_model_len`: vllm-project/vllm vllm/entrypoints/openai/serving_models.py; the
    mock does too), None when the server does not say (a gateway may not list it)."""
    try:
        cards = await listed_models(session, url, headers)
    except (ValueError, aiohttp.ClientError):
        return None
    card = next((c for c in cards if c.get("id") == model), {})
    value = card.get("max_model_len")
    return value if isinstance(value, int) and value > 0 else None


async def discover_model(session: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> str:
    return (await first_model(session, url, headers))["id"]


class LoadGenerator:
    def __init__(
        self, config: LoadConfig, progress: Callable[[dict], None] | None = None, *, start_at: float | None = None
    ) -> None:
        """`start_at`: a `time.monotonic()` instant to start at, so worker processes share one window."""
        self.config = config
        self._start_at = start_at
        self._progress = progress
        self._records: list[RequestRecord] = []
        self._itl: list[tuple[float, int]] = []
        self._lags: list[float] = []
        self._counter = itertools.count()
        self._sent = 0  # requests started (what max_requests caps)
        self._dropped = 0
        self._skipped = 0  # trace requests over the replica's max_model_len, never sent
        self._max_model_len: int | None = None
        self._refused = 0  # consecutive 4xx answers
        self._stopped: str | None = None  # why the run stopped early
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
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, headers=headers, trace_configs=[_stamp_written()]
        ) as session:
            card = {"id": cfg.model} if cfg.model else await first_model(session, cfg.urls[0], headers)
            self._model = model = card["id"]
            if cfg.mode == "trace":
                self._max_model_len = await _max_model_len(session, cfg.urls[0], headers, model)
            # built before the clock starts: loading a tokenizer takes a while
            tokenizer = find_tokenizer(cfg.tokenizer, dict.fromkeys((card.get("root") or model, model)))
            self._prompts = PromptBuilder(tokenizer, seed=cfg.seed)
            self._session = session
            self._raw_pool = RawPool()
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
                work = self._open_loop(trace_arrivals(cfg.trace, cfg.trace_speed, prefix_reuse=cfg.prefix_reuse))
            main = asyncio.create_task(work)
            try:
                # Requests still in flight when the window closes would complete after it and
                # never count: cancel them (the server aborts them) so the run ends on time.
                await asyncio.wait({main}, timeout=self._wall(self._stop_at) + 0.05)
                if not main.done():
                    main.cancel()
                await asyncio.gather(main, return_exceptions=True)
                # A run that ran out of requests (max_requests) before the window closed measured until
                # it ended, not over the whole window: its rates are per second actually elapsed.
                ended = self._now()
                if ended < self._window[1]:
                    self._window = (self._window[0], max(self._window[0], ended))
                if main.done() and not main.cancelled() and main.exception():
                    raise main.exception()
                if self._stopped:
                    raise LoadStopped(self._stopped)
            finally:
                lag.cancel()
                if ticker:
                    ticker.cancel()
                self._raw_pool.close()
        result = LoadResult(
            config=cfg,
            records=self._records,
            window=self._window,
            itl_samples=weighted_samples(self._itl),
            loop_lag_ms=np.asarray(self._lags),
            dropped=self._dropped,
            skipped_over_context=self._skipped,
            token_counting=self._prompts.counter.counting,
        )
        result.summary = summarize(result)
        return result

    def _may_send(self) -> bool:
        """Inside the window, under max_requests, and not stopped."""
        cap = self.config.max_requests
        return self._now() < self._stop_at and (cap is None or self._sent < cap) and self._stopped is None

    async def _closed_loop(self) -> None:
        async def worker() -> None:
            while self._may_send():
                self._sent += 1
                await self._one(next(self._counter), self.config.prompt_tokens, self.config.output_tokens)

        await asyncio.gather(*(worker() for _ in range(self.config.concurrency or 1)))

    def _poisson_arrivals(self) -> Iterator[Arrival]:
        rng = random.Random(self.config.seed)
        t = 0.0
        while True:
            t += rng.expovariate(self.config.rate)
            yield t, self.config.prompt_tokens, self.config.output_tokens, None

    async def _open_loop(self, arrivals) -> None:
        tasks: set[asyncio.Task] = set()
        for offset, prompt, output, blocks in arrivals:
            if offset >= self._stop_at or not self._may_send():
                break
            delay = self._wall(offset - self._now())
            if delay > 0:
                await asyncio.sleep(delay)
                if not self._may_send():  # stopped while waiting
                    break
            if self._max_model_len is not None and prompt + output > self._max_model_len:
                self._skipped += 1  # vLLM refuses it (HTTP 400): sending it measures nothing
                continue
            if len(tasks) >= self.config.max_outstanding:
                self._dropped += 1
                continue
            self._sent += 1
            due = self._t0 + self._wall(offset)
            task = asyncio.create_task(self._one(next(self._counter), prompt, output, due, blocks))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        try:
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    def _body(self, index: int, prompt_tokens: int, output_tokens: int, blocks: tuple[int, ...] | None = None) -> bytes:
        prompt = self._prompts.build(index, prompt_tokens, blocks)
        body: dict = {
            "model": self._model,
            "max_tokens": output_tokens,
            "ignore_eos": True,
            "temperature": 0.0,
            "stream": self.config.stream,
        }
        if self.config.stream:
            body["stream_options"] = {"include_usage": True}
        if self.config.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        return json.dumps(body).encode()

    async def _one(
        self,
        index: int,
        prompt_tokens: int,
        output_tokens: int,
        due: float | None = None,
        blocks: tuple[int, ...] | None = None,
    ) -> None:
        """One request. `due`: its scheduled time (open loop), so a late dispatch counts against
        its latency and send lag instead of hiding (no coordinated omission)."""
        cfg = self.config
        url = cfg.urls[index % len(cfg.urls)].rstrip("/")
        path = "/v1/chat/completions" if cfg.api == "chat" else "/v1/completions"
        # one clock for every stamp, and the one the mock stamps with (CLOCK_MONOTONIC), so
        # same-host lags can be taken across the two processes
        start = time.monotonic() if due is None else min(time.monotonic(), due)
        record = RequestRecord(index=index, url=url, phase="", start_s=(start - self._t0) * cfg.time_scale)
        data = self._body(index, prompt_tokens, output_tokens, blocks)
        timing = Timing()
        itl: list[tuple[float, int]] = []
        try:
            if cfg.client == "raw":
                await self._send_raw(url, path, data, record, start, itl, timing)
            else:
                await self._send_aiohttp(url + path, data, record, start, itl, timing)
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as error:
            record.error = f"{type(error).__name__}: {error}"[:300]
        if record.ok:
            elapsed = timing.end - start
            record.latency_s = elapsed * cfg.time_scale
            timing.fill(record, start, elapsed)
            self._recent.append(record.latency_s)
        end = self._now()
        record.phase = "warmup" if end < self._window[0] else "measure" if end <= self._window[1] else "after"
        self._records.append(record)
        self._count_refusal(record, url + path)
        if itl and record.phase == "measure":
            self._itl.extend(itl)

    async def _send_aiohttp(
        self, url: str, data: bytes, record: RequestRecord, start: float, itl: list[tuple[float, int]], timing: Timing
    ) -> None:
        async with self._session.post(url, data=data, trace_request_ctx=timing) as response:
            record.status = response.status
            if response.status != 200:
                record.error = (await response.text())[:300]
            elif self.config.stream:
                reader = SSEReader(record, start, itl, timing, self.config.time_scale, self._prompts.count)
                async for piece in response.content.iter_any():
                    # stamped as the read returns: every event of one network read shares it
                    if reader.feed(piece, time.monotonic()):
                        break
                reader.finish()
            else:
                payload = await response.read()
                timing.end = time.monotonic()
                self._full_response(payload, response.headers, record, timing)

    async def _send_raw(
        self,
        url: str,
        path: str,
        data: bytes,
        record: RequestRecord,
        start: float,
        itl: list[tuple[float, int]],
        timing: Timing,
    ) -> None:
        reader = SSEReader(record, start, itl, timing, self.config.time_scale, self._prompts.count)
        on_body = reader.feed if self.config.stream else None
        authority, prefix = split_url(url)
        head = (
            f"POST {prefix}{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n{self._raw_auth}\r\n"
        ).encode()
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

    def _count_refusal(self, record: RequestRecord, url: str) -> None:
        """A run of 4xx answers stops the load: the server refuses what is being sent."""
        if 400 <= record.status < 500 and record.status not in _OVERLOAD_STATUSES:
            self._refused += 1
            if self._refused >= self.config.max_consecutive_4xx and self._stopped is None:
                detail = _error_message(record.error)
                self._stopped = (
                    f"stopped after {self._refused} consecutive HTTP {record.status} answers from "
                    f"{url} for model {self._model!r}" + (f": {detail}" if detail else "")
                )
        elif record.status:
            self._refused = 0

    @staticmethod
    def _full_response(payload: bytes, headers, record: RequestRecord, timing: Timing) -> None:
        usage = json.loads(payload).get("usage") or {}
        record.prompt_tokens = usage.get("prompt_tokens", 0)
        record.output_tokens = usage.get("completion_tokens", 0)
        timing.parse_headers(headers)
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


def _error_message(body: str | None) -> str:
    """The message of an OpenAI-style error body ({"error": {"message": ...}}), else the body."""
    if not body:
        return ""
    try:
        error = json.loads(body).get("error")
        message = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = body
    return " ".join(str(message).split())[:200]


def _stamp_written() -> aiohttp.TraceConfig:
    """aiohttp hands the body to its writer right after this signal: stamp `Timing.written`."""

    async def on_chunk_sent(_session, context, _params) -> None:
        if isinstance(context.trace_request_ctx, Timing):
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


async def run_load(config: LoadConfig, progress: Callable[[dict], None] | None = None) -> LoadResult:
    return await LoadGenerator(config, progress).run()
