"""Load generator: windows, modes, prompts, and agreement with the server-side histograms."""

import asyncio
import json
import sys
import threading
import time

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from capacity.engine import get_profile
from capacity.measure.config import LoadConfig
from capacity.measure.generator import run_load, trace_arrivals
from capacity.measure.results import write_outputs
from capacity.measure.workers import run_load_processes, split_config
from capacity.mock.serving import serve_replicas
from capacity.runtime import loop_factory
from capacity.workload.prompts import PromptBuilder

FAST = get_profile("8gb-qwen2.5-1.5b")
SPEEDUP = 5


async def _histogram(url: str, name: str) -> tuple[float, float]:
    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as response:
        text = await response.text()
    family = next(f for f in text_string_to_metric_families(text) if f.name == name)
    total = next(s.value for s in family.samples if s.name.endswith("_sum"))
    count = next(s.value for s in family.samples if s.name.endswith("_count"))
    return total, count


@pytest.mark.asyncio
@pytest.mark.parametrize("client", ["aiohttp", "raw"])
async def test_client_latencies_agree_with_the_servers_e2e_and_ttft_histograms(client):
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(
            urls=(replica.url,),
            concurrency=8,
            warmup_s=0,
            duration_s=6,
            time_scale=SPEEDUP,
            prompt_tokens=200,
            output_tokens=150,
            stream=True,
            client=client,
        )
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
        config = LoadConfig(
            urls=(replica.url,),
            concurrency=6,
            warmup_s=0.5,
            duration_s=2,
            time_scale=SPEEDUP,
            prompt_tokens=20,
            output_tokens=200,
        )
        task = asyncio.create_task(run_load(config))
        in_flight = []
        while not task.done():  # sampled through the run: never more than 6, and 6 once all started
            in_flight.append(replica.replica.engine.outstanding)
            await asyncio.sleep(0.01)
        result = await task
    assert max(in_flight) == 6
    assert result.summary["successful"] > 0 and result.summary["errors"] == {}


@pytest.mark.asyncio
async def test_poisson_open_loop_issues_about_rate_times_duration_requests():
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(
            urls=(replica.url,),
            rate=20.0,
            warmup_s=0,
            duration_s=10,
            time_scale=SPEEDUP,
            prompt_tokens=20,
            output_tokens=5,
        )
        result = await run_load(config)
    assert 140 <= len(result.records) <= 260  # Poisson(200)
    assert result.summary["successful_rps"] == pytest.approx(20, rel=0.3)


@pytest.mark.asyncio
async def test_trace_replay_sends_each_rows_lengths(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.0,30,4\n2023-11-16 18:15:46.5,10,7\n2023-11-16 18:15:47.0,25,3\n"
    )
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(urls=(replica.url,), trace=trace, warmup_s=0, duration_s=5, time_scale=SPEEDUP)
        result = await run_load(config)
    got = sorted((r.prompt_tokens, r.output_tokens) for r in result.records)
    assert got == [(10, 7), (25, 3), (30, 4)]


@pytest.mark.asyncio
async def test_a_trace_request_over_the_replicas_context_is_skipped_and_counted_not_sent(tmp_path):
    """Issue 37: a Mooncake replay stopped at its first prompt over max_model_len (vLLM answers 400)."""
    over = FAST.max_model_len  # prompt + output over the context the replica's /v1/models lists
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        f"2023-11-16 18:15:46.0,30,4\n2023-11-16 18:15:46.5,{over},7\n2023-11-16 18:15:47.0,25,3\n"
    )
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(urls=(replica.url,), trace=trace, warmup_s=0, duration_s=5, time_scale=SPEEDUP)
        result = await run_load(config)
    assert sorted((r.prompt_tokens, r.output_tokens) for r in result.records) == [(25, 3), (30, 4)]
    assert result.summary["skipped_over_context"] == 1 and result.summary["errors"] == {}


@pytest.mark.asyncio
async def test_api_key_header_is_sent_and_round_robin_spreads_over_urls(tmp_path):
    async with serve_replicas(FAST, count=2, speedup=SPEEDUP, api_key="k") as replicas:
        config = LoadConfig(
            urls=tuple(r.url for r in replicas),
            concurrency=4,
            api_key="k",
            warmup_s=0,
            duration_s=1,
            time_scale=SPEEDUP,
            prompt_tokens=10,
            output_tokens=5,
        )
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
        config = LoadConfig(
            urls=(replica.url,),
            concurrency=2,
            warmup_s=2,
            duration_s=2,
            time_scale=SPEEDUP,
            prompt_tokens=10,
            output_tokens=5,
        )
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
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["[UNK]"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
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
    assert list(trace_arrivals(trace)) == [(0.0, 7, 8, None), (3.5, 5, 6, None)]


def test_config_rejects_two_modes_naming_them():
    with pytest.raises(ValueError, match="concurrency"):
        LoadConfig(urls=("http://127.0.0.1:1",), concurrency=2, rate=1.0)


@pytest.mark.asyncio
@pytest.mark.parametrize("client", ["aiohttp", "raw"])
@pytest.mark.parametrize("stream", [True, False])
async def test_overhead_is_the_clients_send_plus_receive_lag_from_the_mocks_timing(client, stream):
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(
            urls=(replica.url,),
            concurrency=4,
            warmup_s=0,
            duration_s=2,
            time_scale=SPEEDUP,
            prompt_tokens=20,
            output_tokens=10,
            stream=stream,
            client=client,
        )
        result = await run_load(config)
    ok = [r for r in result.records if r.ok]
    assert ok and result.summary["errors"] == {}
    for r in ok:
        # one host, one clock: every part is a duration, and the parts add up
        assert r.send_ms >= 0 and r.receive_lag_ms >= 0 and r.server_queue_ms >= 0
        assert r.overhead_ms == pytest.approx(r.send_ms + r.receive_lag_ms)
        assert r.round_trip_overhead_ms == pytest.approx(r.overhead_ms + r.server_queue_ms, abs=1e-6)
        assert r.overhead_ms < r.latency_s / SPEEDUP * 1000
    assert result.summary["client_overhead_ms"]["p50"] is not None


@pytest.mark.asyncio
async def test_raw_client_reports_http_errors_and_non_streaming_usage():
    async with serve_replicas(FAST, speedup=SPEEDUP, api_key="k") as [replica]:
        denied = LoadConfig(
            urls=(replica.url,),
            model=FAST.served_model_name,
            api_key="wrong",
            concurrency=2,
            warmup_s=0,
            duration_s=0.5,
            time_scale=SPEEDUP,
            prompt_tokens=5,
            output_tokens=3,
            client="raw",
            max_requests=6,
        )
        bad = await run_load(denied)
        good = await run_load(
            LoadConfig(
                urls=(replica.url,),
                api_key="k",
                api="chat",
                concurrency=2,
                warmup_s=0,
                duration_s=1,
                time_scale=SPEEDUP,
                prompt_tokens=5,
                output_tokens=3,
                client="raw",
            )
        )
    assert set(bad.summary["errors"]) == {"401"} and "Unauthorized" in bad.records[0].error
    assert good.summary["errors"] == {} and good.summary["successful"] > 0
    assert {(r.prompt_tokens, r.output_tokens) for r in good.records if r.ok} == {(5, 3)}


def test_raw_client_accepts_plain_http_urls_only():
    with pytest.raises(ValueError, match="http://"):
        LoadConfig(urls=("https://example.invalid",), concurrency=1, client="raw")


def test_workers_get_a_share_of_the_load_and_distinct_prompts():
    closed = split_config(LoadConfig(urls=("http://127.0.0.1:1",), concurrency=5, seed=3), 2)
    assert [c.concurrency for c in closed] == [3, 2]
    assert [c.seed for c in closed] == [3, 4]
    assert [c.rate for c in split_config(LoadConfig(urls=("http://127.0.0.1:1",), rate=10.0), 4)] == [2.5] * 4
    with pytest.raises(ValueError, match="below workers"):
        split_config(LoadConfig(urls=("http://127.0.0.1:1",), concurrency=1), 2)


def test_uvloop_is_optional_at_run_time(monkeypatch):
    assert loop_factory(use_uvloop=False) is None
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed: the import fails
    assert loop_factory(use_uvloop=True) is None


@pytest.fixture
def replica_in_a_thread():
    """A mock replica on its own loop in a thread, for code that runs its own loops (processes)."""
    loop = asyncio.new_event_loop()
    started, stop = threading.Event(), asyncio.Event()
    urls: list[str] = []

    async def serve() -> None:
        async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
            urls.append(replica.url)
            started.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(10)
    yield urls[0]
    loop.call_soon_threadsafe(stop.set)
    thread.join(10)


def test_worker_processes_share_one_window_and_merge_into_one_result(replica_in_a_thread):
    config = LoadConfig(
        urls=(replica_in_a_thread,),
        concurrency=4,
        warmup_s=0,
        duration_s=2,
        time_scale=SPEEDUP,
        prompt_tokens=10,
        output_tokens=5,
        stream=True,
    )
    result = run_load_processes(config, 2, use_uvloop=True)
    assert result.summary["errors"] == {} and result.summary["successful"] > 0
    assert result.summary["concurrency"] == 4 and result.cpu_s > 0
    indexes = [r.index for r in result.records]
    assert len(set(indexes)) == len(indexes)  # worker i's request k is k*2+i
    assert {i % 2 for i in indexes} == {0, 1}
    assert max(r.start_s for r in result.records) < result.window[1]


@pytest.fixture
def http_server():
    """A real HTTP server on its own thread: it answers while the test's event loop is blocked."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    answered = threading.Event()

    class Ok(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            self.wfile.flush()
            answered.set()

        def log_message(self, *args) -> None:
            """No access log on the test's stderr."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], answered
    server.shutdown()
    server.server_close()


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive timestamps (SO_TIMESTAMPNS) are Linux's")
@pytest.mark.asyncio
async def test_raw_client_stamps_a_read_with_its_arrival_not_with_a_late_dispatch(http_server):
    from capacity.measure.rawhttp import RawConnection

    port, answered = http_server
    # The first socket on a machine to ask for receive stamps turns them on through a deferred
    # kernel work item (net/core/dev.c net_enable_timestamp -> netstamp_work); a segment that
    # lands before it ran is stamped when it is read. So stamping is on once any read came back
    # stamped: keep that socket open while the measured one reads (bounded: 50 tries).
    opened = []
    for _ in range(50):
        status, body, late = await _blocked_read(RawConnection, port, answered, 0.05, opened)
        if late > 0.04:
            break
    status, body, late = await _blocked_read(RawConnection, port, answered, 0.3, opened)
    for connection in opened:
        connection.drop()
    assert (status, body) == (200, b"ok")
    assert late > 0.2


async def _blocked_read(connection_type, port, answered, block_s, opened):
    """One GET whose answer arrives while the event loop is blocked, for `block_s` after it was
    written (waiting on the server's write, not a guess, keeps this exact under CPU contention):
    (status, body, how long before the dispatch its read is stamped)."""
    connection = await connection_type.open("127.0.0.1", port)
    opened.append(connection)
    answered.clear()
    response = await connection.request(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n", None)
    assert answered.wait(timeout=30)
    time.sleep(block_s)
    dispatched = time.monotonic()
    status, _, body = await response
    return status, body, dispatched - connection.last_read


@pytest.mark.asyncio
async def test_open_loop_counts_a_late_dispatch_from_the_scheduled_time(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        '{"offset_s": 0, "prompt_tokens": 8, "output_tokens": 2}\n'
        '{"offset_s": 0.3, "prompt_tokens": 8, "output_tokens": 2}\n'
    )

    async def block_the_loop() -> None:
        await asyncio.sleep(0.15)
        time.sleep(0.5)  # the second arrival falls due in here

    async with serve_replicas(FAST) as [replica]:
        config = LoadConfig(urls=(replica.url,), trace=trace, warmup_s=0, duration_s=3, client="raw")
        blocker = asyncio.create_task(block_the_loop())
        result = await run_load(config)
        await blocker
    first, second = sorted((r for r in result.records if r.ok), key=lambda r: r.start_s)
    assert first.start_s < 0.1 and second.start_s == pytest.approx(0.3, abs=0.02)
    assert second.send_ms > 200 and first.send_ms < 100


@pytest.mark.asyncio
@pytest.mark.parametrize("client", ["aiohttp", "raw"])
async def test_a_mid_stream_error_counts_as_a_failure_named_in_the_summary(client):
    from capacity.mock.faults import Faults

    async with serve_replicas(FAST, speedup=SPEEDUP, faults=Faults(mid_stream_error=1.0)) as [replica]:
        config = LoadConfig(
            urls=(replica.url,),
            concurrency=2,
            warmup_s=0,
            duration_s=20,
            time_scale=SPEEDUP,
            prompt_tokens=10,
            output_tokens=20,
            stream=True,
            client=client,
            max_requests=6,
        )
        result = await run_load(config)
    assert result.summary["successful"] == 0
    assert result.summary["errors"] == {"mid-stream error: Internal server error": 6}
    assert {r.status for r in result.records} == {200}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", [{"concurrency": 8}, {"rate": 50.0}], ids=["closed", "open"])
async def test_a_run_of_4xx_stops_the_load_naming_the_url_model_and_status(mode):
    from capacity.measure.generator import LoadStopped

    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(
            urls=(replica.url,),
            model="no-such-model",
            warmup_s=0,
            duration_s=600,
            **mode,
            prompt_tokens=5,
            output_tokens=3,
        )
        with pytest.raises(LoadStopped) as stopped:
            await asyncio.wait_for(run_load(config), timeout=30)  # the window alone is 600 s
    message = str(stopped.value)
    assert "\n" not in message
    for part in (f"{replica.url}/v1/completions", "'no-such-model'", "HTTP 404", "does not exist"):
        assert part in message


@pytest.mark.asyncio
async def test_answers_of_429_are_overload_and_do_not_stop_the_load():
    from aiohttp import web

    async def too_many(_request: web.Request) -> web.Response:
        return web.json_response({"error": "slow down"}, status=429)

    app = web.Application()
    app.router.add_post("/v1/completions", too_many)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        config = LoadConfig(
            urls=(f"http://127.0.0.1:{port}",),
            model="m",
            concurrency=2,
            warmup_s=0,
            duration_s=60,
            prompt_tokens=5,
            output_tokens=3,
            max_requests=15,
            max_consecutive_4xx=3,
        )
        result = await run_load(config)
    finally:
        await runner.cleanup()
    assert len(result.records) == 15 and result.summary["errors"] == {"429": 15}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["closed", "poisson", "trace"])
async def test_max_requests_caps_what_is_sent_in_every_mode(mode, tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        "".join(f'{{"offset_s": {i * 0.05}, "prompt_tokens": 8, "output_tokens": 2}}\n' for i in range(40))
    )
    modes = {"closed": {"concurrency": 4}, "poisson": {"rate": 100.0}, "trace": {"trace": trace}}
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(
            urls=(replica.url,),
            warmup_s=0,
            duration_s=60,
            time_scale=SPEEDUP,
            prompt_tokens=8,
            output_tokens=2,
            max_requests=7,
            **modes[mode],
        )
        result = await asyncio.wait_for(run_load(config), timeout=30)
    assert len(result.records) == 7 and all(r.ok for r in result.records)


@pytest.mark.asyncio
async def test_a_run_out_of_requests_before_its_window_closes_reports_the_rate_it_sent_at():
    # `load --max-requests 20 --duration 100` once reported 20 / 100 s = 0.2 req/s for ~1.5 real
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(
            urls=(replica.url,),
            concurrency=4,
            warmup_s=0,
            duration_s=100,
            time_scale=SPEEDUP,
            prompt_tokens=8,
            output_tokens=2,
            max_requests=20,
        )
        started = time.monotonic()
        result = await asyncio.wait_for(run_load(config), timeout=30)
        elapsed = (time.monotonic() - started) * SPEEDUP  # model seconds
    summary = result.summary
    assert summary["successful"] == 20 and summary["window_s"][1] < elapsed < 100
    assert summary["successful_rps"] == pytest.approx(20 / summary["window_s"][1])
    assert summary["successful_rps"] > 20 / elapsed


def test_workers_share_max_requests_exactly():
    shares = split_config(LoadConfig(urls=("http://127.0.0.1:1",), rate=10.0, max_requests=5), 2)
    assert [c.max_requests for c in shares] == [3, 2]


@pytest.mark.asyncio
async def test_the_summary_says_tokens_were_counted_as_whitespace_words_without_a_tokenizer(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # an empty cache
    async with serve_replicas(FAST, speedup=SPEEDUP) as [replica]:
        config = LoadConfig(
            urls=(replica.url,),
            concurrency=1,
            warmup_s=0,
            duration_s=10,
            time_scale=SPEEDUP,
            prompt_tokens=5,
            output_tokens=2,
            max_requests=1,
        )
        result = await run_load(config)
    assert result.summary["token_counting"] == "whitespace words"


def _tokenizer_file(path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel()
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["[UNK]"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 50, trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return tokenizer


@pytest.mark.asyncio
async def test_the_models_tokenizer_is_found_in_the_local_hugging_face_cache_and_named_in_the_summary(
    tmp_path, monkeypatch
):
    cached = tmp_path / "models--org--tiny" / "snapshots" / "abc123" / "tokenizer.json"
    tokenizer = _tokenizer_file(cached)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    async with serve_replicas(FAST, speedup=SPEEDUP, served_model_name="org/tiny", tokenizer=str(cached)) as [replica]:
        config = LoadConfig(
            urls=(replica.url,),
            concurrency=1,
            warmup_s=0,
            duration_s=10,
            time_scale=SPEEDUP,
            prompt_tokens=40,
            output_tokens=2,
            max_requests=2,
        )
        result = await run_load(config)
    assert result.summary["token_counting"] == f"tokenizer {cached}"
    # the mock counted the prompts with the same tokenizer: exactly what was asked for
    assert [r.prompt_tokens for r in result.records] == [40, 40]
    prompt = PromptBuilder(cached).build(0, 40)
    assert len(tokenizer.encode(prompt, add_special_tokens=False).ids) == 40 != len(prompt.split())


def test_an_explicit_tokenizer_path_without_a_tokenizer_is_one_error_naming_it(tmp_path):
    from capacity.workload.prompts import find_tokenizer

    with pytest.raises(ValueError, match=f"--tokenizer: {tmp_path}/tokenizer.json is not a tokenizer.json file"):
        find_tokenizer(tmp_path)


def test_a_model_that_is_not_cached_locally_counts_whitespace_words(tmp_path, monkeypatch):
    from capacity.workload.prompts import find_tokenizer

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert find_tokenizer(None, ["org/absent"]) is None
