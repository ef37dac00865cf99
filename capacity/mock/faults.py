"""Error injection for the mock (`serve --fault KIND:P[,KIND:P...]`): which requests fail, and how.

Kinds, each reported the way vLLM reports it:
- `mid-stream-error`: generation fails after a random number of tokens (at least one), as
  vLLM's GenerationError (a request finished with reason "error", e.g. a failed KV load). A
  stream has already answered HTTP 200, so it gets `data: {"error": {...}}` then `data: [DONE]`
  (`completion_stream_generator` / `chat_completion_stream_generator`, which catch
  GenerationError and yield `_convert_generation_error_to_streaming_response`); a non-streaming
  request gets HTTP 500 with the same error object. vLLM counts it in
  `vllm:request_success_total{finished_reason="error"}` (every finished request is counted under
  its finish reason, in `PrometheusStatLogger.record`).
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("mid-stream-error",)
GRAMMAR = "KIND:PROBABILITY[,KIND:PROBABILITY...] with KIND one of " + ", ".join(KINDS)

# vLLM's GenerationError as the client sees it (vllm/entrypoints/openai/engine/serving.py,
# _raise_if_error + create_error_response: message, type, param, code)
GENERATION_ERROR = {"message": "Internal server error", "type": "InternalServerError", "param": None, "code": 500}


@dataclass(frozen=True)
class Faults:
    mid_stream_error: float = 0.0  # probability that a request fails mid-generation

    @classmethod
    def parse(cls, text: str) -> Faults:
        """`mid-stream-error:0.05` -> Faults(mid_stream_error=0.05); one clear error otherwise."""
        chances: dict[str, float] = {}
        for part in text.split(","):
            kind, sep, value = part.strip().partition(":")
            if not sep or kind not in KINDS:
                raise ValueError(f"--fault {text!r}: expected {GRAMMAR}")
            try:
                chance = float(value)
            except ValueError:
                chance = -1.0
            if not 0.0 <= chance <= 1.0:
                raise ValueError(
                    f"--fault {text!r}: the probability of {kind} must be a number in [0, 1], got {value!r}"
                )
            chances[kind.replace("-", "_")] = chance
        return cls(**chances)
