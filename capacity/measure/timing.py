"""The timing stamps of one request and what the server said about them (the mock's SSE
comments or response headers), turned into the record's harness timings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from capacity.measure.results import RequestRecord

_ENGINE, _SERVER = b": engine-latency=", b": server-timing="  # the mock's SSE comments


@dataclass(slots=True)
class Timing:
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

    def parse_headers(self, headers: Mapping[str, str]) -> None:
        """A non-streaming response: the mock's timing headers."""
        engine = headers.get("x-engine-latency")
        self.engine_s = float(engine) if engine else None
        self.parse_server(headers.get("x-server-timing"))

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
