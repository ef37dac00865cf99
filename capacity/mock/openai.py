"""The OpenAI wire format as vLLM's OpenAI server speaks it: what a request asks for, and the bytes
of every answer (completions, chat, SSE chunks, usage, errors). No HTTP framework here: the app
decides when these are sent.

Generated text is `" tok"` per token, so a client can count the tokens it received.

Timing for load generators (mock only; vLLM sends neither): each response ends with
`: engine-latency=<wall s>` (what the engine model produced) and
`: server-timing=<received>,<sent>` SSE comments (streaming), or `x-engine-latency` and
`x-server-timing` headers; `received` and `sent` are `time.monotonic()` seconds that the app
stamps (`capacity.mock.app`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from capacity.mock.faults import GENERATION_ERROR

WORD = " tok"  # the text of one generated token
DONE = b"data: [DONE]\n\n"
UNAUTHORIZED = {"error": "Unauthorized"}  # vLLM's answer to a missing or wrong --api-key
GENERATION_FAILED = {"error": GENERATION_ERROR}  # vLLM: _convert_generation_error_to_response


class OpenAIError(Exception):
    """A refused request, answered with vLLM's ErrorResponse: {"error": {message, type, param, code}}
    with the HTTP status as code."""

    def __init__(self, status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": kind, "param": param, "code": status}}


# --- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GenerationRequest:
    """What a completion or chat request asks for, validated as vLLM's OpenAIServing does."""

    prompt_tokens: int
    max_tokens: int | None  # None: the rest of the context (vLLM's get_max_tokens)
    ignore_eos: bool
    stream: bool
    include_usage: bool  # a stream ends with a usage chunk


def completion_prompt_tokens(body: dict, count: Callable[[str], int]) -> int:
    """The prompt of /v1/completions: a string, a one-element list of strings, or token ids."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
        return len(prompt)
    if isinstance(prompt, str):
        return count(prompt)
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return count(prompt[0])
    raise OpenAIError(400, "'prompt' must be a string, a one-element list of strings, or a list of token ids")


def chat_prompt_tokens(body: dict, count: Callable[[str], int]) -> int:
    """The messages of /v1/chat/completions, text parts only; at least one token."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise OpenAIError(400, "'messages' must be a non-empty list")
    prompt_tokens = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        prompt_tokens += count(content or "")
    return max(prompt_tokens, 1)


def generation_request(
    body: dict, prompt_tokens: int, *, chat: bool, model: str, max_model_len: int
) -> GenerationRequest:
    """The request for `model`, refused as vLLM refuses it (OpenAIServing._validate_input)."""
    asked = body.get("model")
    if asked != model:
        raise OpenAIError(404, f"The model `{asked}` does not exist.", "NotFoundError", param="model")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens")) if chat else body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise OpenAIError(400, f"max_tokens must be at least 1, got {max_tokens}.", param="max_tokens")
    limit = max_model_len
    if prompt_tokens >= limit:
        raise OpenAIError(
            400,
            f"This model's maximum context length is {limit} tokens. However, your request "
            f"has {prompt_tokens} input tokens. Please reduce the length of the input messages.",
            param="input_tokens",
        )
    if max_tokens is not None and prompt_tokens + max_tokens > limit:
        raise OpenAIError(
            400,
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's "
            f"maximum context length is {limit} tokens and your request has {prompt_tokens} input "
            f"tokens ({max_tokens} > {limit} - {prompt_tokens}).",
            param="max_tokens",
        )
    stream = bool(body.get("stream"))
    # stream_options is looked at only when streaming: a non-streaming request never trips on it
    include_usage = stream and bool((body.get("stream_options") or {}).get("include_usage"))
    return GenerationRequest(prompt_tokens, max_tokens, bool(body.get("ignore_eos")), stream, include_usage)


# --- responses --------------------------------------------------------------------------------


def model_list(model: str, max_model_len: int) -> dict:
    """/v1/models: the one served model."""
    card = {
        "id": model,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "vllm",
        "root": model,
        "parent": None,
        "max_model_len": max_model_len,
    }
    return {"object": "list", "data": [card]}


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def sse(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def timing_headers(engine_latency: float, received: float, sent: float) -> dict[str, str]:
    """The mock's timing on a non-streaming response."""
    return {"x-engine-latency": f"{engine_latency:.6f}", "x-server-timing": f"{received:.6f},{sent:.6f}"}


def timing_comments(engine_latency: float, received: float, sent: float) -> bytes:
    """The mock's timing at the end of a stream, as SSE comments clients skip."""
    return f": engine-latency={engine_latency:.6f}\n\n: server-timing={received:.6f},{sent:.6f}\n\n".encode()


class TextCompletion:
    """One /v1/completions response: the whole body, or its stream chunks."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.id = f"cmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self._template: tuple[bytes, bytes] | None = None

    def _base(self) -> dict:
        return {"id": self.id, "object": "text_completion", "created": self.created, "model": self.model}

    def full(self, n: int, finish_reason: str, usage: dict) -> dict:
        choice = {"index": 0, "text": WORD * n, "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
        return {**self._base(), "choices": [choice], "usage": usage}

    def opening(self) -> dict | None:
        return None

    def delta(self, n: int, finish_reason: str | None) -> dict:
        choice = {"index": 0, "text": WORD * n, "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
        return {**self._base(), "choices": [choice]}

    def delta_event(self, n: int) -> bytes:
        """The SSE event of `delta(n, None)`, spliced into a template encoded once per response:
        the mock writes one per stream per step, and JSON-encoding each was its largest cost."""
        if self._template is None:
            head, tail = sse(self._with_text(self.delta(0, None), "\0")).split(b"\\u0000", 1)
            self._template = (head, tail)
        head, tail = self._template
        return head + (WORD * n).encode() + tail

    def usage_chunk(self, usage: dict) -> dict:
        return {**self._base(), "choices": [], "usage": usage}

    def last_events(self, n: int, finish_reason: str, usage: dict | None) -> bytes:
        """The stream's last tokens with its finish reason, then the usage chunk if asked for."""
        events = sse(self.delta(n, finish_reason))
        if usage is not None:
            events += sse(self.usage_chunk(usage))
        return events

    def failed_events(self, n: int) -> bytes:
        """A generation that failed mid-stream: its last tokens, vLLM's error event and [DONE]
        (HTTP 200 is already out)."""
        events = self.delta_event(n) if n else b""
        return events + sse(GENERATION_FAILED) + DONE

    @staticmethod
    def _with_text(chunk: dict, text: str) -> dict:
        chunk["choices"][0]["text"] = text
        return chunk


class ChatCompletion(TextCompletion):
    """One /v1/chat/completions response: the whole body, or its stream chunks."""

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.id = f"chatcmpl-{uuid.uuid4().hex}"

    def _base(self, chunk: bool = True) -> dict:
        kind = "chat.completion.chunk" if chunk else "chat.completion"
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def full(self, n: int, finish_reason: str, usage: dict) -> dict:
        message = {"role": "assistant", "content": WORD * n, "tool_calls": []}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}
        return {**self._base(chunk=False), "choices": [choice], "usage": usage}

    def opening(self) -> dict:
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        return {**self._base(), "choices": [choice]}

    def delta(self, n: int, finish_reason: str | None) -> dict:
        choice = {"index": 0, "delta": {"content": WORD * n}, "logprobs": None, "finish_reason": finish_reason}
        return {**self._base(), "choices": [choice]}

    @staticmethod
    def _with_text(chunk: dict, text: str) -> dict:
        chunk["choices"][0]["delta"]["content"] = text
        return chunk
