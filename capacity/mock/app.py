"""The aiohttp application of one mock replica: vLLM's routes, wiring the OpenAI wire format
(`capacity.mock.openai`) to the replica (`capacity.mock.replica`).

Routes: /health, /metrics (the replica's `capacity.mock.metrics`, brought up to the scrape),
/v1/models, /v1/completions and /v1/chat/completions; like vLLM's --api-key, a key protects only
/v1. A streaming response writes one SSE chunk per output the replica emits; tokens are coalesced
into one chunk only when the client reads slower than they are generated. A client that goes
away is aborted in the replica.

The mock's timing for load generators: `received` is when the server started on the request
(the outermost middleware), `sent` when the last bytes were handed to the socket, both
`time.monotonic()` seconds (CLOCK_MONOTONIC: one clock for every process on the host).
`sent - received` is the server's own share of a request's latency; the rest is the client's
plus the kernel's.
"""

from __future__ import annotations

import asyncio
import json
import time

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from capacity.mock import openai
from capacity.mock.replica import MockReplica, PendingRequest, emission_points

RECEIVED = web.RequestKey("received", float)


def create_app(replica: MockReplica, *, api_key: str | None = None) -> web.Application:
    """The replica's HTTP API; `api_key` (like vLLM's --api-key) is required on /v1 when given."""
    routes = _Routes(replica, api_key)
    app = web.Application(middlewares=[_stamp_received, routes.auth])
    app.router.add_get("/health", routes.health)
    app.router.add_get("/metrics", routes.metrics)
    app.router.add_get("/v1/models", routes.models)
    app.router.add_post("/v1/completions", routes.completions)
    app.router.add_post("/v1/chat/completions", routes.chat)
    app.on_shutdown.append(routes.close)  # end open streams before connections are awaited
    app.on_cleanup.append(routes.close)
    return app


@web.middleware
async def _stamp_received(request: web.Request, handler):
    """The outermost middleware: when the server starts on a request (the base of server-timing)."""
    request[RECEIVED] = time.monotonic()
    return await handler(request)


def _refuse(error: openai.OpenAIError) -> web.Response:
    return web.json_response(error.body, status=error.status)


async def _json_object(request: web.Request) -> dict:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise openai.OpenAIError(400, "request body must be JSON") from None
    if not isinstance(body, dict):
        raise openai.OpenAIError(400, "request body must be a JSON object")
    return body


class _Routes:
    """The handlers of one replica's routes."""

    def __init__(self, replica: MockReplica, api_key: str | None) -> None:
        self.replica = replica
        self.api_key = api_key

    async def close(self, _app: web.Application) -> None:
        self.replica.close()

    @web.middleware
    async def auth(self, request: web.Request, handler):
        # like vLLM's --api-key: only the /v1 API is protected
        if (
            self.api_key
            and request.path.startswith("/v1")
            and request.headers.get("Authorization") != f"Bearer {self.api_key}"
        ):
            return web.json_response(openai.UNAUTHORIZED, status=401)
        return await handler(request)

    async def health(self, _request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def metrics(self, _request: web.Request) -> web.Response:
        self.replica.catch_up()
        body = generate_latest(self.replica.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def models(self, _request: web.Request) -> web.Response:
        return web.json_response(openai.model_list(self.replica.model_name, self.replica.profile.max_model_len))

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        replica = self.replica
        try:
            body = await _json_object(request)
            prompt_of = openai.chat_prompt_tokens if chat else openai.completion_prompt_tokens
            prompt_tokens = prompt_of(body, replica.tokens.count)
            asked = openai.generation_request(
                body, prompt_tokens, chat=chat, model=replica.model_name, max_model_len=replica.profile.max_model_len
            )
        except openai.OpenAIError as error:
            return _refuse(error)
        try:
            pending = replica.submit(
                asked.prompt_tokens, asked.max_tokens, ignore_eos=asked.ignore_eos, stream=asked.stream
            )
        except ValueError as error:  # a request the engine model cannot hold
            return _refuse(openai.OpenAIError(400, str(error)))
        completion = openai.ChatCompletion(replica.model_name) if chat else openai.TextCompletion(replica.model_name)
        try:
            if asked.stream:
                return await self._stream(request, pending, completion, asked.include_usage)
            finished = await pending.done
        except (asyncio.CancelledError, ConnectionResetError):
            replica.abort(pending)
            raise
        if pending.finish_reason == "error":
            return web.json_response(openai.GENERATION_FAILED, status=500)
        output_tokens = finished.request.output_tokens
        usage = openai.usage(asked.prompt_tokens, output_tokens)
        payload = completion.full(output_tokens, pending.finish_reason, usage)
        latency = replica.wall_seconds(finished.finish_time - finished.request.arrival)
        # "sent" is stamped as the body is built, a few microseconds before aiohttp writes it
        headers = openai.timing_headers(latency, request[RECEIVED], time.monotonic())
        return web.json_response(payload, headers=headers)

    async def _stream(
        self, request: web.Request, pending: PendingRequest, completion: openai.TextCompletion, include_usage: bool
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        sent = 0
        target = pending.request.output_tokens
        try:
            opening = completion.opening()
            if opening:
                await response.write(openai.sse(opening))
            while sent < target:
                generated, lagged = await pending.next_output()
                points = emission_points(sent, min(generated, target), target, self.replica.stream_interval)
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
                        events.append(self._last_events(request, pending, completion, point - sent, include_usage))
                    else:
                        events.append(completion.delta_event(point - sent))
                    sent = point
                await response.write(b"".join(events))
        except ConnectionResetError:
            # the client hung up between two writes (a load generator's window closed): free its
            # slot as vLLM aborts; the prepared response goes back and aiohttp closes quietly
            self.replica.abort(pending)
            return response
        await response.write_eof()
        return response

    def _last_events(
        self,
        request: web.Request,
        pending: PendingRequest,
        completion: openai.TextCompletion,
        tokens: int,
        include_usage: bool,
    ) -> bytes:
        """The last tokens, then usage, the mock's timing comments and [DONE], for one write; a
        failed generation ends with vLLM's error event instead."""
        if pending.finish_reason == "error":
            return completion.failed_events(tokens)
        r = pending.request
        usage = openai.usage(r.prompt_tokens, r.output_tokens) if include_usage else None
        events = completion.last_events(tokens, pending.finish_reason, usage)
        f = pending.done.result()
        latency = self.replica.wall_seconds(f.finish_time - f.request.arrival)
        # stamped right before the write: aiohttp hands these bytes to the socket synchronously
        return events + openai.timing_comments(latency, request[RECEIVED], time.monotonic()) + openai.DONE
