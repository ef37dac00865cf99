"""The replica hands a stream its outputs as vLLM's output processor does.

Upstream (vLLM, vllm/v1/engine/output_processor.py): `RequestState.make_request_output` emits the
first token, then every `stream_interval` tokens (default 1), and the last;
`RequestOutputCollector.put` merges outputs only when the consumer has not taken the previous one.
"""

import asyncio

import pytest

from capacity.mock.replica import PendingRequest, emission_points


def test_emission_points_follow_make_request_output():
    assert emission_points(0, 3, 10, 1) == [1, 2, 3]
    assert emission_points(0, 10, 10, 4) == [1, 5, 9, 10]
    assert emission_points(5, 8, 10, 4) == []  # 3 tokens since the last output: held
    assert emission_points(5, 10, 10, 4) == [9, 10]


@pytest.mark.asyncio
async def test_progress_that_comes_again_before_the_writer_took_it_is_merged():
    pending = PendingRequest(None, True, asyncio.get_running_loop().create_future(), "length", 10)  # type: ignore[arg-type]  # no engine request: only the stream state is under test
    pending.advance_to(1)
    assert not pending.lagged  # the writer takes each step's tokens as its own chunk
    pending.advance_to(2)
    assert pending.lagged and pending.generated == 2  # it had not: one chunk for both


@pytest.mark.asyncio
async def test_the_writer_takes_the_merged_progress_once_and_then_waits_again():
    pending = PendingRequest(None, True, asyncio.get_running_loop().create_future(), "length", 10)  # type: ignore[arg-type]  # no engine request: only the stream state is under test
    pending.advance_to(1)
    pending.advance_to(3)
    assert await pending.next_output() == (3, True)
    assert not pending.lagged and not pending.progress.is_set()
    pending.advance_to(4)
    assert await pending.next_output() == (4, False)
