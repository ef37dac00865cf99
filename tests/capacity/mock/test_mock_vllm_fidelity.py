"""The mock streams, finishes, fails and counts as vLLM does, and its metrics agree with what it sent.

Upstream (vLLM, vllm/v1/engine/output_processor.py, vllm/entrypoints/openai/*/serving.py,
vllm/v1/metrics/loggers.py): `RequestState.make_request_output` emits the first token, then every
`stream_interval` tokens (default 1), and the last; `RequestOutputCollector.put` merges outputs
only when the consumer has not taken the previous one; `abort_requests` records no finished
request; `PrometheusStatLogger.record` counts every finished request under its finish reason and
observes its histograms; a GenerationError mid-stream is `data: {"error": ...}` then `[DONE]`.
"""

import asyncio
import json
import re

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from capacity.engine import get_profile
from capacity.mock.faults import GENERATION_ERROR, Faults
from capacity.mock.replica import DEFAULT_MAX_TOKENS
from capacity.mock.serving import serve_replicas

FAST = get_profile("8gb-qwen2.5-1.5b")
MODEL = FAST.served_model_name


async def _post(url: str, body: dict, path: str = "/v1/completions") -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        async with session.post(url + path, json={"model": MODEL, **body}) as response:
            return response.status, await response.text()


def _data(stream: str) -> list:
    """The data payloads of an SSE stream, decoded ("[DONE]" as is)."""
    out = []
    for event in stream.split("\n\n"):
        if event.startswith("data: "):
            payload = event.removeprefix("data: ")
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def _tokens(chunk: dict) -> int:
    choice = chunk["choices"][0]
    return ((choice.get("text") or "") + ((choice.get("delta") or {}).get("content") or "")).count(" tok")


async def _metrics(url: str) -> dict[str, float]:
    """Every sample by name and labels other than model_name/engine, e.g. 'vllm:request_success_total{stop}'."""
    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as response:
        text = await response.text()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            extra = ",".join(v for k, v in sorted(s.labels.items()) if k not in ("model_name", "engine"))
            out[f"{s.name}{{{extra}}}" if extra else s.name] = s.value
    return out


@pytest.mark.asyncio
async def test_streaming_sends_one_chunk_per_token_even_at_a_high_speedup():
    async with serve_replicas(FAST, speedup=50) as [replica]:
        status, text = await _post(replica.url, {"prompt": "a b c", "max_tokens": 60, "stream": True})
    chunks = [d for d in _data(text) if d != "[DONE]"]
    assert status == 200
    assert [_tokens(c) for c in chunks] == [1] * 60


@pytest.mark.asyncio
async def test_stream_interval_sends_the_first_token_then_every_interval_and_the_last():
    async with serve_replicas(FAST, speedup=10, stream_interval=4) as [replica]:
        _, text = await _post(replica.url, {"prompt": "a b c", "max_tokens": 10, "stream": True})
    assert [_tokens(c) for c in _data(text) if c != "[DONE]"] == [1, 4, 4, 1]


@pytest.mark.asyncio
async def test_a_request_without_max_tokens_stops_as_at_eos_and_counts_as_stop():
    async with serve_replicas(FAST, speedup=50) as [replica]:
        status, text = await _post(replica.url, {"prompt": "a b c"})
        metrics = await _metrics(replica.url)
    choice = json.loads(text)["choices"][0]
    assert status == 200 and choice["finish_reason"] == "stop" and choice["text"].count(" tok") == DEFAULT_MAX_TOKENS
    assert metrics["vllm:request_success_total{stop}"] == 1 and metrics["vllm:request_success_total{length}"] == 0
    assert metrics["vllm:request_params_max_tokens_sum"] == FAST.max_model_len - 3  # get_max_tokens: the context left


@pytest.mark.asyncio
async def test_a_request_without_max_tokens_that_reaches_the_context_finishes_with_length():
    prompt = [7] * (FAST.max_model_len - 10)  # token ids
    async with serve_replicas(FAST, speedup=50) as [replica]:
        _, text = await _post(replica.url, {"prompt": prompt})
        metrics = await _metrics(replica.url)
    result = json.loads(text)
    assert result["choices"][0]["finish_reason"] == "length" and result["usage"]["completion_tokens"] == 10
    assert metrics["vllm:request_success_total{length}"] == 1 and metrics["vllm:request_success_total{stop}"] == 0


@pytest.mark.asyncio
async def test_a_prompt_that_fills_the_context_is_refused_as_vllm_does():
    async with serve_replicas(FAST, speedup=50) as [replica]:
        status, text = await _post(replica.url, {"prompt": [7] * FAST.max_model_len})
    error = json.loads(text)["error"]
    assert status == 400 and error["param"] == "input_tokens"
    assert f"your request has {FAST.max_model_len} input tokens" in error["message"]


@pytest.mark.asyncio
async def test_a_client_that_disconnects_is_aborted_and_not_counted_as_a_finished_request():
    async with serve_replicas(FAST, speedup=1) as [replica]:
        async with aiohttp.ClientSession() as session:
            body = {"model": MODEL, "prompt": "x y", "max_tokens": 5000, "stream": True}
            async with session.post(replica.url + "/v1/completions", json=body) as response:
                await response.content.readuntil(b"\n\n")  # streaming has begun
                response.close()
        for _ in range(100):
            if replica.replica.engine.outstanding == 0:
                break
            await asyncio.sleep(0.02)
        metrics = await _metrics(replica.url)
    assert replica.replica.engine.outstanding == 0
    assert sum(v for k, v in metrics.items() if k.startswith("vllm:request_success_total")) == 0
    assert metrics["vllm:e2e_request_latency_seconds_count"] == 0
    assert metrics["vllm:time_to_first_token_seconds_count"] == 1  # its first token was generated


@pytest.mark.asyncio
@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
async def test_a_mid_stream_error_is_an_error_event_then_done_on_http_200(path):
    body = {"max_tokens": 30, "stream": True, "stream_options": {"include_usage": True}}
    body |= {"prompt": "a b"} if path == "/v1/completions" else {"messages": [{"role": "user", "content": "a b"}]}
    async with serve_replicas(FAST, speedup=20, faults=Faults(mid_stream_error=1.0)) as [replica]:
        status, text = await _post(replica.url, body, path)
        metrics = await _metrics(replica.url)
    data = _data(text)
    assert status == 200
    assert data[-2:] == [{"error": GENERATION_ERROR}, "[DONE]"]
    assert 1 <= sum(_tokens(c) for c in data[:-2] if c.get("choices")) < 30
    assert not any(c.get("usage") for c in data[:-2])  # the usage chunk never comes
    assert metrics["vllm:request_success_total{error}"] == 1


@pytest.mark.asyncio
async def test_a_generation_error_without_streaming_is_an_http_500():
    async with serve_replicas(FAST, speedup=20, faults=Faults(mid_stream_error=1.0)) as [replica]:
        status, text = await _post(replica.url, {"prompt": "a b", "max_tokens": 30})
    assert status == 500 and json.loads(text) == {"error": GENERATION_ERROR}


def _request(i: int) -> tuple[str, dict]:
    """A mix: text and chat, streamed or not, with and without max_tokens and usage."""
    words = " ".join(["w"] * (5 + i))
    body: dict = {"stream": i % 2 == 0}
    if i % 3:
        body["max_tokens"] = 4 + i
    if i % 4 == 0:
        body["stream_options"] = {"include_usage": True}
    if i % 5 < 2:
        return "/v1/chat/completions", body | {"messages": [{"role": "user", "content": words}]}
    return "/v1/completions", body | {"prompt": words}


def _outcome(path: str, body: dict, status: int, text: str) -> dict:
    """What the client saw: finish reason, prompt tokens sent, tokens received."""
    prompt = len((body.get("prompt") or body["messages"][0]["content"]).split())
    if status != 200:
        return {"reason": "error", "prompt": prompt, "tokens": None}
    if body["stream"]:
        data = [d for d in _data(text) if d != "[DONE]"]
        reasons = [c["choices"][0]["finish_reason"] for c in data if c.get("choices")]
        reason = "error" if any("error" in c for c in data) else reasons[-1]
        return {"reason": reason, "prompt": prompt, "tokens": sum(_tokens(c) for c in data if c.get("choices"))}
    choice = json.loads(text)["choices"][0]
    content = choice.get("text") or choice["message"]["content"]
    return {"reason": choice["finish_reason"], "prompt": prompt, "tokens": content.count(" tok")}


@pytest.mark.asyncio
@pytest.mark.parametrize("faults", [Faults(), Faults(mid_stream_error=0.4)], ids=["clean", "faults"])
async def test_every_counter_agrees_with_the_responses_the_mock_sent(faults):
    requests = [_request(i) for i in range(24)]
    if faults.mid_stream_error:  # a failed non-streaming request hides how many tokens it generated
        requests = [(path, body | {"stream": True}) for path, body in requests]
    async with serve_replicas(FAST, speedup=20, faults=faults, seed=3) as [replica]:
        answers = await asyncio.gather(*(_post(replica.url, body, path) for path, body in requests))
        metrics = await _metrics(replica.url)
    seen = [_outcome(path, body, *answer) for (path, body), answer in zip(requests, answers)]
    reasons = {reason: sum(o["reason"] == reason for o in seen) for reason in ("stop", "length", "abort", "error")}
    if faults.mid_stream_error:
        assert 0 < reasons["error"] < len(seen)
    for reason, n in reasons.items():
        assert metrics[f"vllm:request_success_total{{{reason}}}"] == n, reason
    generated, prompts = sum(o["tokens"] for o in seen), sum(o["prompt"] for o in seen)
    assert metrics["vllm:generation_tokens_total"] == generated
    assert metrics["vllm:prompt_tokens_total"] == prompts
    assert metrics["vllm:iteration_tokens_total_sum"] == generated + prompts
    assert (
        metrics["vllm:request_generation_tokens_sum"]
        == metrics["vllm:request_max_num_generation_tokens_sum"]
        == generated
    )
    assert metrics["vllm:request_prompt_tokens_sum"] == prompts
    effective_max = sum(
        body.get("max_tokens") or FAST.max_model_len - o["prompt"] for (_, body), o in zip(requests, seen)
    )
    assert metrics["vllm:request_params_max_tokens_sum"] == effective_max
    per_request = [
        name for name in metrics if re.fullmatch(r"vllm:request_\w+_count|vllm:e2e_request_latency_seconds_count", name)
    ]
    assert len(per_request) >= 9
    for name in per_request:
        assert metrics[name] == len(seen), name
    assert metrics["vllm:time_to_first_token_seconds_count"] == len(seen)
    assert metrics["vllm:num_requests_running"] == metrics["vllm:num_requests_waiting"] == 0
    assert metrics["vllm:num_preemptions_total"] == 0
