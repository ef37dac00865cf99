"""Server-sent events of a streaming completion, parsed into its record as network reads arrive.

Framing per the WHATWG SSE spec (html.spec.whatwg.org, "Parsing an event stream"): a line ends
with CRLF, LF or CR; an empty line ends an event; a `data:` field's value drops one leading
space and several data lines join with LF; lines starting with `:` are comments. A stream is a
success only if it reaches `data: [DONE]` without an error event: vLLM reports a failure after
the HTTP 200 as `data: {"error": {...}}` followed by `data: [DONE]`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from capacity.measure.results import RequestRecord
from capacity.measure.timing import Timing

_decode = json.JSONDecoder().decode  # str in: json.loads(bytes) first sniffs the encoding, per chunk


class SSEReader:
    """Parses a streaming completion's SSE events into its record, as network reads arrive."""

    def __init__(
        self,
        record: RequestRecord,
        start: float,
        itl: list[tuple[float, int]],
        timing: Timing,
        scale: float,
        count: Callable[[str], int],
    ) -> None:
        self.record, self.start, self.itl, self.timing = record, start, itl, timing
        self.scale, self.count = scale, count
        self.last: float | None = None
        self.gaps = 0.0
        self.gap_tokens = 0
        self.buffer = b""
        self.done = False
        self.stamp = 0.0  # the latest read's arrival

    def feed(self, data: bytes, now: float) -> bool:
        """Take one network read, stamped `now`; True once [DONE] has been read."""
        self.stamp = now
        buffer = self.buffer + data if self.buffer else data
        held = b""
        if b"\r" in buffer:
            # CRLF and a lone CR end lines too; a CR closing the buffer may be half of a CRLF
            if buffer.endswith(b"\r"):
                buffer, held = buffer[:-1], b"\r"
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        while not self.done and (cut := buffer.find(b"\n\n")) >= 0:
            event, buffer = buffer[:cut], buffer[cut + 2 :]
            if b"\n" in event:
                self._lines(event.split(b"\n"), now)
            else:
                self._line(event, now)
        self.buffer = buffer + held
        return self.done

    def _line(self, line: bytes, now: float) -> None:
        """An event of one line, the common case."""
        if line.startswith(b"data:"):
            self._data(line[6:] if line[5:6] == b" " else line[5:], now)
        elif line.startswith(b":"):
            self.timing.parse_comment(line)

    def _lines(self, lines: list[bytes], now: float) -> None:
        data = []
        for line in lines:
            if line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line.startswith(b":"):
                self.timing.parse_comment(line)
        if data:
            self._data(b"\n".join(data), now)

    def _data(self, data: bytes, now: float) -> None:
        if data == b"[DONE]":
            self.done = True
            self.timing.end = now
        else:
            self._chunk(_decode(data.decode()), now)

    def _chunk(self, chunk: dict, now: float) -> None:
        record = self.record
        if "error" in chunk:
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            record.error = f"mid-stream error: {message}"[:300]
            return
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
        """The response has ended: a CR held back as half of a CRLF ends its line after all."""
        if self.buffer.endswith(b"\r") and not self.done:
            self.feed(b"\n", self.stamp)
        if self.gap_tokens:
            self.record.itl_mean_s = self.gaps / self.gap_tokens
        self.record.ok = self.done and self.record.error is None
        if not self.done and self.record.error is None:
            self.record.error = "stream ended without [DONE]"
