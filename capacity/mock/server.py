"""Mock vLLM OpenAI-compatible server: real HTTP, vLLM's metrics, engine-model timing.

Time: the engine runs in model seconds; with `speedup` X one model second passes in 1/X
wall seconds. Everything the replica reports (histograms, usage) is in model seconds, so a
sped-up replica looks like the real GPU it models; only wall-clock rates are X times higher.

Streaming follows vLLM's OpenAI server: one SSE chunk per engine step that gave the request a
token (`--stream-interval` tokens, default 1: vLLM's `OutputProcessor(stream_interval=1)`, whose
`RequestState.make_request_output` sends the first token, then every `stream_interval` tokens,
and the last), at any speedup. Tokens are coalesced into one chunk only when the consumer lags:
each stream holds one slot that the engine fills and its writer empties, as vLLM's
`RequestOutputCollector.put` merges outputs when the producer gets ahead of the consumer.

Finish reasons and `vllm:request_success_total` follow vLLM: a request with `max_tokens` runs to
it ("length": the mock never samples EOS, as with `ignore_eos`); without it vLLM allows the rest
of the context (`get_max_tokens`: max_model_len - prompt) and the mock stops after
DEFAULT_MAX_TOKENS as at an EOS ("stop"), or at the context ("length") if that comes first. A
client that disconnects is aborted (`OutputProcessor.abort_requests`), which records no finished
request: no `request_success`, no per-request histogram. Prompt tokens are counted with the
model's tokenizer when one is at hand (`tokenizer=`), else as whitespace words. Faults
(`capacity.mock.faults`) are reported as vLLM reports them.

Timing for load generators (mock only; vLLM sends neither): each response ends with
`: engine-latency=<wall s>` (what the engine model produced) and
`: server-timing=<received>,<sent>` SSE comments (streaming), or `x-engine-latency` and
`x-server-timing` headers. `received` is when the handler started (the request parsed),
`sent` when the last bytes were handed to the socket, both `time.monotonic()` seconds
(CLOCK_MONOTONIC: one clock for every process on the host). `sent - received` is the
server's own share of a request's latency; the rest is the client's plus the kernel's.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from capacity.engine import EngineProfile, Finished, ReplicaEngine, Request
from capacity.mock.faults import GENERATION_ERROR, Faults
from capacity.mock.metrics import VllmMetrics
from capacity.workload.prompts import TokenCounter

DEFAULT_MAX_TOKENS = 256  # where a request without max_tokens stops, as if it sampled EOS
_WORD = " tok"


@dataclass
class _Pending:
    request: Request
    stream: bool
    done: asyncio.Future[Finished]
    finish_reason: str  # "length", "stop" or "error" (an injected fault), once the engine finishes it
    max_tokens: int  # the effective max_tokens (vLLM's sampling_params.max_tokens)
    generated: int = 0
    first_token_time: float = -1.0
    progress: asyncio.Event = field(default_factory=asyncio.Event)
    lagged: bool = False  # progress came again before the writer took the last: merge (the collector's put)

    def advance_to(self, generated: int) -> None:
        """The engine's progress, handed to the stream's writer like vLLM's RequestOutputCollector.put."""
        self.generated = generated
        if self.progress.is_set():
            self.lagged = True
        self.progress.set()


class MockReplica:
    """One replica: an engine model driven in real time, plus its vLLM metrics."""

    def __init__(
        self,
        profile: EngineProfile,
        *,
        speedup: float = 1.0,
        served_model_name: str | None = None,
        api_key: str | None = None,
        stream_interval: int = 1,
        faults: Faults = Faults(),
        tokenizer: str | None = None,
        seed: int = 0,
    ) -> None:
        if speedup <= 0:
            raise ValueError(f"speedup must be > 0, got {speedup}")
        if stream_interval < 1:
            raise ValueError(f"--stream-interval must be >= 1 token, got {stream_interval}")
        self.profile = profile
        self.speedup = speedup
        self.model_name = served_model_name or profile.served_model_name
        self.api_key = api_key
        self.stream_interval = stream_interval
        self.faults = faults
        self.tokens = TokenCounter(tokenizer)
        self._rng = random.Random(seed)
        self.engine = ReplicaEngine(profile, record_stats=True)
        self.metrics = VllmMetrics(self.model_name, profile.max_model_len)
        self.metrics.bind_gauges(self._running, self._waiting, self._kv)
        self._pending: dict[int, _Pending] = {}
        self._streams: dict[int, _Pending] = {}
        self._ids = 0
        self._t0 = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")

    # --- clock -------------------------------------------------------------------------
    def model_now(self) -> float:
        return (time.monotonic() - self._t0) * self.speedup

    def _wall(self, model_seconds: float) -> float:
        return model_seconds / self.speedup

    # --- engine driving --------------------------------------------------------------------
    def submit(self, prompt_tokens: int, output_tokens: int, *, stream: bool, max_tokens: int,
               finish_reason: str) -> _Pending:  # fmt: skip
        """Start a request that generates `output_tokens` and then finishes with `finish_reason`,
        unless a fault strikes first."""
        now = self.model_now()
        self._sync(now)
        if self.faults.mid_stream_error and self._rng.random() < self.faults.mid_stream_error:
            output_tokens = self._rng.randint(1, max(1, output_tokens - 1))  # fails after at least one token
            finish_reason = "error"
        self._ids += 1
        request = Request(self._ids, now, prompt_tokens, output_tokens)
        self.engine.submit(request, now)  # raises ValueError for requests the model cannot hold
        pending = _Pending(request, stream, asyncio.get_running_loop().create_future(), finish_reason, max_tokens)
        self._pending[request.id] = pending
        if stream:
            self._streams[request.id] = pending
        self._schedule()
        return pending

    def _sync(self, now: float | None = None) -> None:
        now = self.model_now() if now is None else now
        finished = self.engine.advance(now)
        m = self.metrics
        for request, t in self.engine.first_tokens():
            m.ttft.observe(t - request.arrival)
            pending = self._pending.get(request.id)
            if pending is not None:
                pending.first_token_time = t
        stats = self.engine.drain_stats()
        if stats.prompt_tokens:
            m.prompt_tokens.inc(stats.prompt_tokens)
        if stats.generation_tokens:
            m.generation_tokens.inc(stats.generation_tokens)
        if stats.preemptions:
            m.preemptions.inc(stats.preemptions)
        for seconds, count in stats.inter_token_latencies:
            m.inter_token_latency.observe(seconds, count)
        for tokens, count in stats.step_tokens:
            m.iteration_tokens.observe(tokens, count)
        stepped = stats.generation_tokens > 0  # the engine produced tokens since the last _sync
        for f in finished:
            pending = self._pending.pop(f.request.id, None)
            if pending is None:
                continue
            self._observe_finished(f, pending)
            self._streams.pop(f.request.id, None)
            if not pending.done.done():
                pending.done.set_result(f)
            pending.advance_to(f.request.output_tokens)
        # Progress moves only when tokens were produced: most _sync calls come from a submit
        # between two steps, and scanning every stream then cost ~0.1 ms per request.
        if self._streams and stepped:
            progress = self.engine.running_progress()
            for rid, pending in self._streams.items():
                n = progress.get(rid, 0)
                if n > pending.generated:
                    pending.advance_to(n)

    def abort(self, pending: _Pending) -> None:
        """The client went away: free the request's slot and KV, as vLLM aborts it."""
        rid = pending.request.id
        if self._pending.pop(rid, None) is None:
            return
        self._streams.pop(rid, None)
        self._sync()
        self.engine.abort(rid)  # like vLLM's abort_requests: no finished-request stats
        self._schedule()

    def _observe_finished(self, f: Finished, pending: _Pending) -> None:
        """vLLM's per finished request metrics (PrometheusStatLogger.record, finished_requests)."""
        m = self.metrics
        r = f.request
        m.request_success[pending.finish_reason].inc()
        m.params_n.observe(1)
        m.max_num_generation_tokens.observe(r.output_tokens)
        m.params_max_tokens.observe(pending.max_tokens)
        m.e2e_latency.observe(f.finish_time - r.arrival)
        m.queue_time.observe(f.scheduled_time - r.arrival)
        m.inference_time.observe(f.finish_time - f.scheduled_time)
        m.prefill_time.observe(f.first_token_time - f.scheduled_time)
        m.decode_time.observe(f.finish_time - f.first_token_time)
        # vLLM's FinishedRequestStats.mean_time_per_output_token: 0 for a single token
        tpot = (f.finish_time - f.first_token_time) / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0
        m.request_time_per_output_token.observe(tpot)
        m.request_prompt_tokens.observe(r.prompt_tokens)
        m.request_generation_tokens.observe(r.output_tokens)

    def _schedule(self) -> None:
        """Arm one timer for the next engine event, or the next step while streams want its tokens."""
        loop = asyncio.get_running_loop()
        nxt = self.engine.next_step_time() if self._streams else self.engine.next_event_time()
        at = float("inf") if nxt is None else self._t0 + self._wall(nxt)
        if at == self._timer_at and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = at
        if at != float("inf"):
            # loop.time() and time.monotonic() share a clock on every asyncio loop we use
            self._timer = loop.call_at(max(at, loop.time()) + 1e-5, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = float("inf")
        self._sync()
        self._schedule()

    def _running(self) -> float:
        return self.engine.num_running

    def _waiting(self) -> float:
        return self.engine.num_waiting

    def _kv(self) -> float:
        return self.engine.kv_usage

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for pending in self._pending.values():
            if not pending.done.done():
                pending.done.cancel()
            pending.progress.set()

    # --- HTTP -------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(middlewares=[_stamp_received, self._auth])
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.on_shutdown.append(self._on_cleanup)  # end open streams before connections are awaited
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _on_cleanup(self, _app: web.Application) -> None:
        self.close()

    @web.middleware
    async def _auth(self, request: web.Request, handler):  # noqa: ANN001, ANN202
        # like vLLM's --api-key: only the /v1 API is protected
        if self.api_key and request.path.startswith("/v1"):
            if request.headers.get("Authorization") != f"Bearer {self.api_key}":
                return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    async def _health(self, _request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _metrics(self, _request: web.Request) -> web.Response:
        self._sync()
        body = generate_latest(self.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _models(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.model_name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "vllm",
                        "root": self.model_name,
                        "parent": None,
                        "max_model_len": self.profile.max_model_len,
                    }
                ],
            }
        )

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await _json_body(request)
        if isinstance(body, web.Response):
            return body
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            prompt_tokens = len(prompt)
        elif isinstance(prompt, str):
            prompt_tokens = self.tokens.count(prompt)
        elif isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt_tokens = self.tokens.count(prompt[0])
        else:
            return _error(400, "'prompt' must be a string, a one-element list of strings, or a list of token ids")
        return await self._serve(request, body, prompt_tokens, chat=False)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await _json_body(request)
        if isinstance(body, web.Response):
            return body
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "'messages' must be a non-empty list")
        prompt_tokens = 0
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            prompt_tokens += self.tokens.count(content or "")
        return await self._serve(request, body, max(prompt_tokens, 1), chat=True)

    async def _serve(self, request: web.Request, body: dict, prompt_tokens: int, *, chat: bool) -> web.StreamResponse:
        model = body.get("model")
        if model != self.model_name:
            return _error(404, f"The model `{model}` does not exist.", "NotFoundError", param="model")
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens")) if chat else body.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            return _error(400, f"max_tokens must be at least 1, got {max_tokens}.", param="max_tokens")
        # vLLM's OpenAIServing._validate_input, then get_max_tokens
        limit = self.profile.max_model_len
        if prompt_tokens >= limit:
            return _error(400, f"This model's maximum context length is {limit} tokens. However, your request "
                               f"has {prompt_tokens} input tokens. Please reduce the length of the input messages.",
                          param="input_tokens")  # fmt: skip
        if max_tokens is not None and prompt_tokens + max_tokens > limit:
            return _error(400, f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's "
                               f"maximum context length is {limit} tokens and your request has {prompt_tokens} input "
                               f"tokens ({max_tokens} > {limit} - {prompt_tokens}).", param="max_tokens")  # fmt: skip
        effective_max = max_tokens if max_tokens is not None else limit - prompt_tokens
        if max_tokens is not None or body.get("ignore_eos"):
            output_tokens, finish_reason = effective_max, "length"
        else:  # the mock's EOS comes after DEFAULT_MAX_TOKENS, unless the context ends first
            output_tokens = min(DEFAULT_MAX_TOKENS, effective_max)
            finish_reason = "stop" if output_tokens == DEFAULT_MAX_TOKENS else "length"
        stream = bool(body.get("stream"))
        try:
            pending = self.submit(prompt_tokens, output_tokens, stream=stream, max_tokens=effective_max,
                                  finish_reason=finish_reason)  # fmt: skip
        except ValueError as error:
            return _error(400, str(error))
        kind = _Chat(self.model_name) if chat else _Text(self.model_name)
        try:
            if stream:
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return await self._stream(request, pending, kind, include_usage)
            finished = await pending.done
        except (asyncio.CancelledError, ConnectionResetError):
            self.abort(pending)
            raise
        if pending.finish_reason == "error":  # vLLM: _convert_generation_error_to_response
            return web.json_response({"error": GENERATION_ERROR}, status=500)
        output_tokens = finished.request.output_tokens
        payload = kind.full(output_tokens, pending.finish_reason, _usage(prompt_tokens, output_tokens))
        latency = self._wall(finished.finish_time - finished.request.arrival)
        # "sent" is stamped as the body is built, a few microseconds before aiohttp writes it
        timing = f"{request[RECEIVED]:.6f},{time.monotonic():.6f}"
        return web.json_response(payload, headers={"x-engine-latency": f"{latency:.6f}", "x-server-timing": timing})

    async def _stream(self, request: web.Request, pending: _Pending, kind: "_Text | _Chat",
                      include_usage: bool) -> web.StreamResponse:  # fmt: skip
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        sent = 0
        target = pending.request.output_tokens
        try:
            opening = kind.opening()
            if opening:
                await response.write(_sse(opening))
            while sent < target:
                await pending.progress.wait()
                pending.progress.clear()
                lagged, pending.lagged = pending.lagged, False
                points = _emission_points(sent, min(pending.generated, target), target, self.stream_interval)
                if not points:
                    if pending.done.cancelled():
                        break
                    continue
                if lagged:  # the writer fell behind: one chunk for all (RequestOutputCollector merges)
                    points = points[-1:]
                # Otherwise one chunk per output, in one write: a timer wakes the mock once per step
                # only down to the event loop's timer resolution (~1 ms), so at high speedups one
                # wake can find several steps done.
                events = []
                for point in points:
                    if point == target:
                        events.append(self._last_events(request, pending, kind, point - sent, include_usage))
                    else:
                        events.append(kind.delta_event(point - sent))
                    sent = point
                await response.write(b"".join(events))
        except ConnectionResetError:
            # the client hung up between two writes (a load generator's window closed): free its
            # slot as vLLM aborts; the prepared response goes back and aiohttp closes quietly
            self.abort(pending)
            return response
        await response.write_eof()
        return response

    def _last_events(self, request: web.Request, pending: _Pending, kind: "_Text | _Chat", tokens: int,
                     include_usage: bool) -> bytes:  # fmt: skip
        """The last tokens, then usage, the mock's timing comments and [DONE], for one write; a
        failed generation ends with vLLM's error event and [DONE] instead (HTTP 200 is already out)."""
        if pending.finish_reason == "error":
            event = kind.delta_event(tokens) if tokens else b""
            return event + _sse({"error": GENERATION_ERROR}) + b"data: [DONE]\n\n"
        event = _sse(kind.delta(tokens, pending.finish_reason))
        if include_usage:
            event += _sse(kind.usage_chunk(_usage(pending.request.prompt_tokens, pending.request.output_tokens)))
        f = pending.done.result()
        event += f": engine-latency={self._wall(f.finish_time - f.request.arrival):.6f}\n\n".encode()
        # stamped right before the write: aiohttp hands these bytes to the socket synchronously
        event += f": server-timing={request[RECEIVED]:.6f},{time.monotonic():.6f}\n\n".encode()
        return event + b"data: [DONE]\n\n"


def _emission_points(sent: int, generated: int, target: int, interval: int) -> list[int]:
    """Token counts in (sent, generated] at which vLLM's output processor emits an output:
    the first token, then every `interval` tokens, and the last (RequestState.make_request_output)."""
    points = list(range(1 if sent == 0 else sent + interval, generated + 1, interval))
    if generated == target and (not points or points[-1] != target):
        points.append(target)
    return points


RECEIVED = web.RequestKey("received", float)


@web.middleware
async def _stamp_received(request: web.Request, handler):  # noqa: ANN001, ANN202
    """The outermost middleware: when the server starts on a request (the base of server-timing)."""
    request[RECEIVED] = time.monotonic()
    return await handler(request)


def _usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}  # fmt: skip


def _sse(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _error(status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> web.Response:
    """vLLM's ErrorResponse: {"error": {message, type, param, code}} with the HTTP status as code."""
    return web.json_response({"error": {"message": message, "type": kind, "param": param, "code": status}},
                             status=status)  # fmt: skip


async def _json_body(request: web.Request) -> dict | web.Response:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _error(400, "request body must be JSON")
    if not isinstance(body, dict):
        return _error(400, "request body must be a JSON object")
    return body


class _Text:
    def __init__(self, model: str) -> None:
        self.model = model
        self.id = f"cmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self._template: tuple[bytes, bytes] | None = None

    def _base(self) -> dict:
        return {"id": self.id, "object": "text_completion", "created": self.created, "model": self.model}

    def full(self, n: int, finish_reason: str, usage: dict) -> dict:
        choice = {"index": 0, "text": _WORD * n, "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
        return {**self._base(), "choices": [choice], "usage": usage}

    def opening(self) -> dict | None:
        return None

    def delta(self, n: int, finish_reason: str | None) -> dict:
        choice = {"index": 0, "text": _WORD * n, "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
        return {**self._base(), "choices": [choice]}

    def delta_event(self, n: int) -> bytes:
        """The SSE event of `delta(n, None)`, spliced into a template encoded once per response:
        the mock writes one per stream per step, and JSON-encoding each was its largest cost."""
        if self._template is None:
            head, tail = _sse(self._with_text(self.delta(0, None), "\0")).split(b"\\u0000", 1)
            self._template = (head, tail)
        head, tail = self._template
        return head + (_WORD * n).encode() + tail

    def usage_chunk(self, usage: dict) -> dict:
        return {**self._base(), "choices": [], "usage": usage}

    @staticmethod
    def _with_text(chunk: dict, text: str) -> dict:
        chunk["choices"][0]["text"] = text
        return chunk


class _Chat(_Text):
    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.id = f"chatcmpl-{uuid.uuid4().hex}"

    def _base(self, chunk: bool = True) -> dict:
        kind = "chat.completion.chunk" if chunk else "chat.completion"
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def full(self, n: int, finish_reason: str, usage: dict) -> dict:
        message = {"role": "assistant", "content": _WORD * n, "tool_calls": []}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
        return {**self._base(chunk=False), "choices": [choice], "usage": usage}

    def opening(self) -> dict:
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        return {**self._base(), "choices": [choice]}

    def delta(self, n: int, finish_reason: str | None) -> dict:
        choice = {"index": 0, "delta": {"content": _WORD * n}, "logprobs": None, "finish_reason": finish_reason}
        return {**self._base(), "choices": [choice]}

    @staticmethod
    def _with_text(chunk: dict, text: str) -> dict:
        chunk["choices"][0]["delta"]["content"] = text
        return chunk


# --- running replicas --------------------------------------------------------------------------


@dataclass
class RunningReplica:
    replica: MockReplica
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


@asynccontextmanager
async def serve_replicas(
    profile: EngineProfile,
    count: int = 1,
    *,
    host: str = "127.0.0.1",
    ports: list[int] | None = None,
    **replica_options: object,
) -> AsyncIterator[list[RunningReplica]]:
    """Run `count` replicas on loopback (free ports unless given); stop them on exit."""
    ports = ports or [0] * count
    runners: list[web.AppRunner] = []
    running: list[RunningReplica] = []
    try:
        for port in ports:
            replica = MockReplica(profile, **replica_options)  # type: ignore[arg-type]
            # handler_cancellation: a client that disconnects cancels its handler (-> engine abort)
            runner = web.AppRunner(replica.app(), access_log=None, handle_signals=False, handler_cancellation=True,
                                   shutdown_timeout=1.0)  # fmt: skip
            await runner.setup()
            runners.append(runner)
            sock = _bind(host, port)
            await web.SockSite(runner, sock).start()
            running.append(RunningReplica(replica, sock.getsockname()[1]))
        yield running
    finally:
        for runner in runners:
            await runner.cleanup()
