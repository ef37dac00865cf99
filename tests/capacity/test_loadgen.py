"""Load generator: windows, modes, prompts, and agreement with the server-side histograms."""

import json

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from capacity.engine import get_profile
from capacity.loadgen import LoadConfig, load_trace, run_load, write_outputs
from capacity.mock.server import serve_replicas
from capacity.prompts import PromptBuilder

FAST = get_profile("8gb-qwen2.5-1.5b")
SPEEDUP = 5


async def _histogram(url: str, name: str) -> tuple[float, float]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url + "/metrics") as response:
            text = await response.text()
    family = next(f for f in text_string_to_metric_families(text) if f.name == name)
    total = next(s.value for s in family.samples if s.name.endswith("_sum"))
    count = next(s.value for s in family.samples if s.name.endswith("_count"))
    return total, count


@pytest.mark.asyncio
async def test_client_latencies_agree_with_the_servers_e2e_and_ttft_histograms():
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(urls=(replica.url,), concurrency=8, warmup_s=0, duration_s=6, time_scale=SPEEDUP,
                            prompt_tokens=200, output_tokens=150, stream=True)  # fmt: skip
        result = await run_load(config)
        e2e_sum, e2e_count = await _histogram(replica.url, "vllm:e2e_request_latency_seconds")
        ttft_sum, ttft_count = await _histogram(replica.url, "vllm:time_to_first_token_seconds")
    ok = [r for r in result.records if r.ok]
    # requests still streaming when the window closed were cancelled (server-side aborted): they
    # have a TTFT but no e2e observation, and one may finish as the client hangs up
    assert len(ok) > 10
    assert len(ok) <= e2e_count <= len(ok) + config.concurrency
    assert e2e_count <= ttft_count <= e2e_count + config.concurrency
    client_e2e = sum(r.latency_s for r in ok) / len(ok)
    client_ttft = sum(r.ttft_s for r in ok) / len(ok)
    assert client_e2e == pytest.approx(e2e_sum / e2e_count, rel=0.05)
    # TTFT is short, so allow the client's own (scaled) overhead in absolute terms
    assert client_ttft == pytest.approx(ttft_sum / ttft_count, abs=0.05 * SPEEDUP)


@pytest.mark.asyncio
async def test_closed_loop_keeps_exactly_the_concurrency_in_flight():
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(urls=(replica.url,), concurrency=6, warmup_s=0.5, duration_s=2, time_scale=SPEEDUP,
                            prompt_tokens=20, output_tokens=200)  # fmt: skip
        gen_task = run_load(config)
        import asyncio

        task = asyncio.create_task(gen_task)
        await asyncio.sleep(0.3)
        in_flight = replica.replica.engine.outstanding
        result = await task
    assert in_flight == 6
    assert result.summary["successful"] > 0 and result.summary["errors"] == {}


@pytest.mark.asyncio
async def test_poisson_open_loop_issues_about_rate_times_duration_requests():
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(urls=(replica.url,), rate=20.0, warmup_s=0, duration_s=10, time_scale=SPEEDUP,
                            prompt_tokens=20, output_tokens=5)  # fmt: skip
        result = await run_load(config)
    assert 140 <= len(result.records) <= 260  # Poisson(200)
    assert result.summary["successful_rps"] == pytest.approx(20, rel=0.3)


@pytest.mark.asyncio
async def test_trace_replay_sends_each_rows_lengths(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.0,30,4\n2023-11-16 18:15:46.5,10,7\n2023-11-16 18:15:47.0,25,3\n")  # fmt: skip
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(urls=(replica.url,), trace=trace, warmup_s=0, duration_s=5, time_scale=SPEEDUP)
        result = await run_load(config)
    got = sorted((r.prompt_tokens, r.output_tokens) for r in result.records)
    assert got == [(10, 7), (25, 3), (30, 4)]


@pytest.mark.asyncio
async def test_api_key_header_is_sent_and_round_robin_spreads_over_urls(tmp_path):
    async with serve_replicas(FAST, count=2, speedup=SPEEDUP, api_key="k") as replicas:
        config = LoadConfig(urls=tuple(r.url for r in replicas), concurrency=4, api_key="k", warmup_s=0,
                            duration_s=1, time_scale=SPEEDUP, prompt_tokens=10, output_tokens=5)  # fmt: skip
        result = await run_load(config)
    assert result.summary["errors"] == {}
    assert {r.url for r in result.records} == {r.url for r in replicas}
    write_outputs(result, tmp_path / "r.jsonl", tmp_path / "s.json")
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert len(lines) == len(result.records)
    assert json.loads((tmp_path / "s.json").read_text())["successful"] == result.summary["successful"]


@pytest.mark.asyncio
async def test_requests_completing_in_warmup_are_excluded_from_the_measurement():
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(urls=(replica.url,), concurrency=2, warmup_s=2, duration_s=2, time_scale=SPEEDUP,
                            prompt_tokens=10, output_tokens=5)  # fmt: skip
        result = await run_load(config)
    phases = {r.phase for r in result.records}
    assert "warmup" in phases and "measure" in phases
    assert result.summary["measured"] == sum(r.phase == "measure" for r in result.records)


def test_word_prompts_have_exact_length_and_unique_starts():
    builder = PromptBuilder(seed=1)
    a, b = builder.build(1, 300), builder.build(2, 300)
    assert len(a.split()) == len(b.split()) == 300
    assert a.split()[0] != b.split()[0]


def test_tokenizer_prompts_have_exact_token_length(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 50, trainer)
    from tokenizers import decoders

    tokenizer.decoder = decoders.ByteLevel()
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    builder = PromptBuilder(tokenizer=path)
    for n in (20, 64, 256):
        prompt = builder.build(n, n)
        assert len(tokenizer.encode(prompt, add_special_tokens=False).ids) == n


def test_trace_loader_reads_the_azure_layout(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:50.0,5,6\n2023-11-16 18:15:46.5,7,8\n")
    entries = load_trace(trace)
    assert [(e.offset_s, e.prompt_tokens, e.output_tokens) for e in entries] == [(0.0, 7, 8), (3.5, 5, 6)]


def test_config_rejects_two_modes_naming_them():
    with pytest.raises(ValueError, match="concurrency"):
        LoadConfig(urls=("http://127.0.0.1:1",), concurrency=2, rate=1.0)
