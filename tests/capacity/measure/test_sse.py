"""SSE framing per the WHATWG spec ("Parsing an event stream"), and what makes a stream a success."""

import json

import pytest

from capacity.measure.results import RequestRecord
from capacity.measure.sse import SSEReader
from capacity.measure.timing import Timing


def _events(sep: str, *payloads: str) -> bytes:
    return "".join(f"{p}{sep}" for p in payloads).encode()


def _chunk(text: str) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "text": text, "finish_reason": None}]})


USAGE = "data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})


def _read(stream: bytes, piece: int) -> tuple[RequestRecord, Timing]:
    record, timing = RequestRecord(index=0, url="u", phase="", start_s=0.0), Timing()
    reader = SSEReader(record, 0.0, [], timing, 1.0, lambda text: len(text.split()))
    for i in range(0, len(stream), piece):
        reader.feed(stream[i : i + piece], float(i))
    reader.finish()
    return record, timing


@pytest.mark.parametrize("sep", ["\n\n", "\r\n\r\n", "\r\r"], ids=["LF", "CRLF", "CR"])
@pytest.mark.parametrize("piece", [1, 2, 7, 10_000], ids=lambda n: f"reads of {n} bytes")
def test_events_separated_by_lf_crlf_or_cr_parse_alike_however_the_reads_split(sep, piece):
    stream = _events(sep, _chunk(" a"), _chunk(" b"), USAGE, ": server-timing=1.5,2.5", "data: [DONE]")
    record, timing = _read(stream, piece)
    assert record.ok and record.error is None
    assert (record.chunks, record.prompt_tokens, record.output_tokens) == (2, 3, 2)
    assert (timing.received, timing.sent) == (1.5, 2.5)


def test_a_data_field_without_its_space_and_an_event_of_several_lines_parse():
    stream = _events("\n\n", "data:" + _chunk(" a")[6:], ": a comment\n" + _chunk(" b"), "data:[DONE]")
    record, _ = _read(stream, 5)
    assert record.ok and record.chunks == 2


def test_an_error_event_before_done_fails_the_request_with_its_message():
    error = 'data: {"error": {"message": "Internal server error", "type": "InternalServerError", "code": 500}}'
    record, _ = _read(_events("\n\n", _chunk(" a"), error, "data: [DONE]"), 10_000)
    assert not record.ok and record.error == "mid-stream error: Internal server error"


def test_a_stream_that_ends_without_done_fails():
    record, _ = _read(_events("\n\n", _chunk(" a")), 10_000)
    assert not record.ok and record.error == "stream ended without [DONE]"
