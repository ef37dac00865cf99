"""Server-sent events of a streaming completion, parsed into its record as network reads arrive."""

from __future__ import annotations

import json
from collections.abc import Callable

from capacity.measure.results import RequestRecord
from capacity.measure.timing import Timing

_decode = json.JSONDecoder().decode  # str in: json.loads(bytes) first sniffs the encoding, per chunk


class SSEReader:
    """Parses a streaming completion's SSE events into its record, as network reads arrive."""

    def __init__(self, record: RequestRecord, start: float, itl: list[tuple[float, int]], timing: Timing,
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


