"""The official `openai` client works unchanged against the mock vLLM server."""

import openai
import pytest

from capacity.engine import get_profile
from capacity.mock.serving import serve_replicas

FAST = get_profile("8gb-qwen2.5-1.5b")
MODEL = FAST.served_model_name


@pytest.mark.asyncio
async def test_openai_client_completion_non_streaming_reports_usage_and_length():
    async with serve_replicas(FAST, speedup=10) as [replica]:
        client = openai.AsyncOpenAI(base_url=replica.url + "/v1", api_key="unused")
        result = await client.completions.create(
            model=MODEL, prompt="one two three four", max_tokens=7, extra_body={"ignore_eos": True}
        )
        await client.close()
    assert result.usage.prompt_tokens == 4
    assert result.usage.completion_tokens == 7
    assert result.choices[0].finish_reason == "length"
    assert len(result.choices[0].text.split()) == 7


@pytest.mark.asyncio
async def test_openai_client_completion_streaming_delivers_every_token_then_usage():
    async with serve_replicas(FAST, speedup=10) as [replica]:
        client = openai.AsyncOpenAI(base_url=replica.url + "/v1", api_key="unused")
        stream = await client.completions.create(
            model=MODEL, prompt="a b c", max_tokens=40, stream=True, stream_options={"include_usage": True}
        )
        texts, usage, reasons = [], None, []
        async for chunk in stream:
            if chunk.choices:
                texts.append(chunk.choices[0].text)
                reasons.append(chunk.choices[0].finish_reason)
            if chunk.usage:
                usage = chunk.usage
        await client.close()
    assert len("".join(texts).split()) == 40
    assert reasons[-1] == "length"
    assert usage.completion_tokens == 40 and usage.prompt_tokens == 3


@pytest.mark.asyncio
async def test_openai_client_chat_non_streaming_returns_an_assistant_message():
    async with serve_replicas(FAST, speedup=10) as [replica]:
        client = openai.AsyncOpenAI(base_url=replica.url + "/v1", api_key="unused")
        result = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hello there"}], max_tokens=5
        )
        await client.close()
    assert result.choices[0].message.role == "assistant"
    assert len(result.choices[0].message.content.split()) == 5
    assert result.usage.total_tokens == 7


@pytest.mark.asyncio
async def test_openai_client_chat_streaming_opens_with_the_role_and_streams_content():
    async with serve_replicas(FAST, speedup=10) as [replica]:
        client = openai.AsyncOpenAI(base_url=replica.url + "/v1", api_key="unused")
        stream = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=25, stream=True
        )
        chunks = [chunk async for chunk in stream]
        await client.close()
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(content.split()) == 25
    assert chunks[-1].choices[0].finish_reason == "length"


@pytest.mark.asyncio
async def test_openai_client_lists_the_served_model():
    async with serve_replicas(FAST, speedup=10, served_model_name="my-model") as [replica]:
        client = openai.AsyncOpenAI(base_url=replica.url + "/v1", api_key="unused")
        models = await client.models.list()
        await client.close()
    assert [m.id for m in models.data] == ["my-model"]


@pytest.mark.asyncio
async def test_unknown_model_is_a_404_not_found_error():
    async with serve_replicas(FAST, speedup=10) as [replica]:
        client = openai.AsyncOpenAI(base_url=replica.url + "/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.NotFoundError):
            await client.completions.create(model="other", prompt="x", max_tokens=1)
        await client.close()


@pytest.mark.asyncio
async def test_request_beyond_max_model_len_is_a_400_naming_the_limit():
    async with serve_replicas(FAST, speedup=10) as [replica]:
        client = openai.AsyncOpenAI(base_url=replica.url + "/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="maximum context length is 32768"):
            await client.completions.create(model=MODEL, prompt="x", max_tokens=40_000)
        await client.close()


@pytest.mark.asyncio
async def test_api_key_is_enforced_on_v1_but_not_on_health_or_metrics():
    async with serve_replicas(FAST, speedup=10, api_key="s3cret") as [replica]:
        bad = openai.AsyncOpenAI(base_url=replica.url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            await bad.models.list()
        good = openai.AsyncOpenAI(base_url=replica.url + "/v1", api_key="s3cret")
        assert (await good.models.list()).data
        await bad.close()
        await good.close()
        import aiohttp

        async with aiohttp.ClientSession() as session:
            for path in ("/health", "/metrics"):
                async with session.get(replica.url + path) as response:
                    assert response.status == 200, path


@pytest.mark.asyncio
async def test_a_client_that_goes_away_frees_its_slot_like_vllm_aborts():
    import asyncio

    import aiohttp

    async with serve_replicas(FAST, speedup=1) as [replica]:
        async with aiohttp.ClientSession() as session:
            body = {"model": MODEL, "prompt": "x y", "max_tokens": 5000}
            with pytest.raises(asyncio.TimeoutError):
                async with session.post(
                    replica.url + "/v1/completions", json=body, timeout=aiohttp.ClientTimeout(total=0.3)
                ) as response:
                    await response.read()
        for _ in range(50):
            if replica.replica.engine.outstanding == 0:
                break
            await asyncio.sleep(0.05)
        assert replica.replica.engine.outstanding == 0


@pytest.mark.asyncio
async def test_responses_end_with_the_servers_own_timing_for_load_generators():
    import time

    import aiohttp

    async with serve_replicas(FAST, speedup=10) as [replica], aiohttp.ClientSession() as session:
        body = {"model": MODEL, "prompt": "a b", "max_tokens": 3, "stream": True}
        async with session.post(replica.url + "/v1/completions", json=body) as response:
            text = await response.text()
        body["stream"] = False
        async with session.post(replica.url + "/v1/completions", json=body) as response:
            header = response.headers["x-server-timing"]
    comment = next(line for line in text.split("\n\n") if line.startswith(": server-timing="))
    for value in (comment.removeprefix(": server-timing="), header):
        received, sent = (float(v) for v in value.split(","))
        # handler entry and last write, on the host's monotonic clock
        assert received <= sent <= time.monotonic()
        assert sent - received < 5
    assert text.endswith("data: [DONE]\n\n")


@pytest.mark.parametrize("kind", ["text", "chat"])
def test_intermediate_chunks_from_the_template_equal_encoding_the_delta(kind):
    from capacity.mock.openai import ChatCompletion, TextCompletion, sse

    chunks = ChatCompletion('odd "model"') if kind == "chat" else TextCompletion("")
    for n in (1, 2, 7):
        assert chunks.delta_event(n) == sse(chunks.delta(n, None))


@pytest.mark.asyncio
async def test_a_streaming_client_that_hangs_up_is_aborted_without_an_error_log(caplog):
    import asyncio
    import logging

    import aiohttp

    caplog.set_level(logging.ERROR, logger="aiohttp.server")
    async with serve_replicas(FAST, speedup=1) as [replica]:
        for _ in range(5):  # a hang-up lands between writes or during a wait: both are quiet
            async with aiohttp.ClientSession() as session:
                body = {"model": MODEL, "prompt": "x y", "max_tokens": 5000, "stream": True}
                async with session.post(replica.url + "/v1/completions", json=body) as response:
                    await response.content.readuntil(b"\n\n")  # streaming has begun
                    response.close()
        for _ in range(50):
            if replica.replica.engine.outstanding == 0:
                break
            await asyncio.sleep(0.05)
        assert replica.replica.engine.outstanding == 0
    assert not [r for r in caplog.records if "Error handling request" in r.getMessage()]
