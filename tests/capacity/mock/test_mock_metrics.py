"""The mock's /metrics match vLLM's (pinned image) names, types, labels and buckets."""

import aiohttp
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from capacity.engine import get_profile
from capacity.measure.config import LoadConfig
from capacity.measure.generator import run_load
from capacity.mock.serving import serve_replicas
from contract.signals import Vllm

FAST = get_profile("8gb-qwen2.5-1.5b")

# From vllm/v1/metrics/loggers.py (PrometheusStatLogger) of the pinned release line: the
# always-on metrics, by the family name the Prometheus text parser reports.
EXPECTED_TYPES = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:engine_sleep_state": "gauge",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:external_prefix_cache_queries": "counter",
    "vllm:external_prefix_cache_hits": "counter",
    "vllm:mm_cache_queries": "counter",
    "vllm:mm_cache_hits": "counter",
    "vllm:num_preemptions": "counter",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "vllm:request_prompt_tokens": "histogram",
    "vllm:request_generation_tokens": "histogram",
    "vllm:iteration_tokens_total": "histogram",
    "vllm:request_max_num_generation_tokens": "histogram",
    "vllm:request_params_n": "histogram",
    "vllm:request_params_max_tokens": "histogram",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:request_time_per_output_token_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_inference_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
}
EXPECTED_BUCKETS = {
    "vllm:time_to_first_token_seconds": [
        0.001,
        0.005,
        0.01,
        0.02,
        0.04,
        0.06,
        0.08,
        0.1,
        0.25,
        0.5,
        0.75,
        1.0,
        2.5,
        5.0,
        7.5,
        10.0,
        20.0,
        40.0,
        80.0,
        160.0,
        640.0,
        2560.0,
    ],
    "vllm:inter_token_latency_seconds": [
        0.01,
        0.025,
        0.05,
        0.075,
        0.1,
        0.15,
        0.2,
        0.3,
        0.4,
        0.5,
        0.75,
        1.0,
        2.5,
        5.0,
        7.5,
        10.0,
        20.0,
        40.0,
        80.0,
    ],
    "vllm:e2e_request_latency_seconds": [
        0.3,
        0.5,
        0.8,
        1.0,
        1.5,
        2.0,
        2.5,
        5.0,
        10.0,
        15.0,
        20.0,
        30.0,
        40.0,
        50.0,
        60.0,
        120.0,
        240.0,
        480.0,
        960.0,
        1920.0,
        7680.0,
    ],
    "vllm:request_queue_time_seconds": [
        0.3,
        0.5,
        0.8,
        1.0,
        1.5,
        2.0,
        2.5,
        5.0,
        10.0,
        15.0,
        20.0,
        30.0,
        40.0,
        50.0,
        60.0,
        120.0,
        240.0,
        480.0,
        960.0,
        1920.0,
        7680.0,
    ],
}


async def _families(url: str) -> dict:
    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as response:
        text = await response.text()
    return {f.name: f for f in text_string_to_metric_families(text)}


@pytest_asyncio.fixture
async def scraped():
    async with serve_replicas(FAST, speedup=10, served_model_name="m1") as [replica]:
        config = LoadConfig(
            urls=(replica.url,),
            concurrency=4,
            warmup_s=0,
            duration_s=1.0,
            time_scale=10,
            prompt_tokens=50,
            output_tokens=20,
            stream=True,
        )
        result = await run_load(config)
        yield result, await _families(replica.url)


@pytest.mark.asyncio
async def test_every_vllm_metric_exists_with_its_type(scraped):
    _, families = scraped
    got = {name: families[name].type for name in EXPECTED_TYPES if name in families}
    assert got == EXPECTED_TYPES


@pytest.mark.asyncio
async def test_every_series_carries_model_name_and_engine_labels(scraped):
    _, families = scraped
    for name in EXPECTED_TYPES:
        for sample in families[name].samples:
            assert sample.labels.get("model_name") == "m1", sample
            assert sample.labels.get("engine") == "0", sample


@pytest.mark.asyncio
async def test_timing_histograms_use_vllms_bucket_boundaries(scraped):
    _, families = scraped
    for name, bounds in EXPECTED_BUCKETS.items():
        les = [float(s.labels["le"]) for s in families[name].samples if s.name.endswith("_bucket")]
        assert les == [*bounds, float("inf")], name


@pytest.mark.asyncio
async def test_request_success_has_a_series_per_finish_reason(scraped):
    _, families = scraped
    reasons = {
        s.labels["finished_reason"] for s in families["vllm:request_success"].samples if s.name.endswith("_total")
    }
    assert reasons == {"stop", "length", "abort", "error", "repetition"}


@pytest.mark.asyncio
async def test_removed_metric_names_are_absent_and_every_signals_name_is_present(scraped):
    _, families = scraped
    names = set(families)
    for removed in Vllm.REMOVED:
        assert removed not in names
    for attr in (
        "REQUESTS_RUNNING",
        "REQUESTS_WAITING",
        "KV_CACHE_USAGE",
        "TTFT",
        "INTER_TOKEN_LATENCY",
        "E2E_LATENCY",
        "QUEUE_TIME",
    ):
        assert getattr(Vllm, attr) in names
    for attr in (
        "PREEMPTIONS",
        "PROMPT_TOKENS",
        "GENERATION_TOKENS",
        "REQUEST_SUCCESS",
        "PREFIX_CACHE_QUERIES",
        "PREFIX_CACHE_HITS",
    ):
        assert getattr(Vllm, attr).removesuffix("_total") in names


@pytest.mark.asyncio
async def test_token_counters_match_what_the_load_generator_received(scraped):
    result, families = scraped
    ok = [r for r in result.records if r.ok]
    generation = next(s.value for s in families["vllm:generation_tokens"].samples if s.name.endswith("_total"))
    prompt = next(s.value for s in families["vllm:prompt_tokens"].samples if s.name.endswith("_total"))
    assert generation == sum(r.output_tokens for r in ok) == 20 * len(ok)
    assert prompt == sum(r.prompt_tokens for r in ok) == 50 * len(ok)


@pytest.mark.asyncio
async def test_prefix_cache_counters_query_every_prompt_and_hit_nothing_without_a_prefix_cache(scraped):
    # vllm/v1/core/kv_cache_manager.py records num_tokens queried per lookup; the mock's engine keeps
    # no prefix cache, so it reports zero hits rather than invent them
    _, families = scraped
    (queries,) = [s.value for s in families["vllm:prefix_cache_queries"].samples if s.name.endswith("_total")]
    (hits,) = [s.value for s in families["vllm:prefix_cache_hits"].samples if s.name.endswith("_total")]
    prompt = next(s.value for s in families["vllm:prompt_tokens"].samples if s.name.endswith("_total"))
    assert queries == prompt > 0
    assert hits == 0


def test_a_lookup_records_its_hits_and_refuses_more_hits_than_tokens():
    from capacity.mock.metrics import VllmMetrics

    metrics = VllmMetrics("m1", 4096)
    metrics.record_prefix_lookup(1024, cached_tokens=512)
    labels = {"model_name": "m1", "engine": "0"}
    assert metrics.registry.get_sample_value("vllm:prefix_cache_queries_total", labels) == 1024
    assert metrics.registry.get_sample_value("vllm:prefix_cache_hits_total", labels) == 512
    with pytest.raises(ValueError, match="cached tokens"):
        metrics.record_prefix_lookup(16, cached_tokens=32)
