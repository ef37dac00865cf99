"""vLLM's Prometheus metrics, as the pinned image (signals.VLLM_IMAGE_TAG) exposes them.

Names, types, label names and histogram buckets are copied from vLLM's own source
(github.com/vllm-project/vllm): `vllm/v1/metrics/loggers.py`, class PrometheusStatLogger, in
the post-0.12 layout that the pinned image keeps (`gpu_cache_usage_perc` removed,
`time_per_output_token_seconds` only behind --show-hidden-metrics-for-version, counters
declared without `_total`, which prometheus_client appends), and the finish reasons from
`vllm/v1/engine/__init__.py` (FINISH_REASON_STRINGS: stop, length, abort, error, repetition).
Not mirrored: optional families (LoRA, speculative decoding, KV connector, KV-residency
sampling, vllm:cache_config_info) and the HTTP/process metrics of the API server. Every series carries
`model_name` (the served model name) and `engine` (the engine-core index, "0" here).

Counters and gauges use prometheus_client directly. Histograms use a small collector that
accepts many identical observations at once (the engine model advances many decode steps
in one event), exposed as ordinary Prometheus histograms.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from contract.signals import (
    ITERATION_TOKEN_BUCKETS,
    PARAMS_N_BUCKETS,
    REQUEST_LATENCY_BUCKETS,
    TOKEN_LATENCY_BUCKETS,
    TTFT_BUCKETS,
    Vllm,
)

LABELS = ("model_name", "engine")
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")


def build_1_2_5_buckets(max_value: int) -> tuple[int, ...]:
    """vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, ... up to max_value."""
    out: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(out)
            out.append(value)
        exponent += 1


class _Histogram:
    """Cumulative-bucket histogram with weighted observations (value seen `count` times)."""

    def __init__(self, name: str, documentation: str, buckets: Iterable[float]) -> None:
        self.name = name
        self.documentation = documentation
        self.bounds = tuple(float(b) for b in buckets)
        self.counts = [0] * (len(self.bounds) + 1)  # last slot is +Inf
        self.sum = 0.0

    def observe(self, value: float, count: int = 1) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += count
        self.sum += value * count

    @property
    def count(self) -> int:
        return sum(self.counts)

    def family(self, labelvalues: list[str]) -> HistogramMetricFamily:
        family = HistogramMetricFamily(self.name, self.documentation, labels=list(LABELS))
        cumulative, buckets = 0, []
        for bound, n in zip((*self.bounds, float("inf")), self.counts):
            cumulative += n
            buckets.append(("+Inf" if bound == float("inf") else _le(bound), cumulative))
        family.add_metric(labelvalues, buckets, self.sum)
        return family


def _le(bound: float) -> str:
    return repr(float(bound))  # prometheus_client renders le="0.5", le="1.0", le="16.0"


class _HistogramCollector(Collector):
    def __init__(self, histograms: list[_Histogram], labelvalues: list[str]) -> None:
        self._histograms = histograms
        self._labelvalues = labelvalues

    def collect(self):
        for h in self._histograms:
            yield h.family(self._labelvalues)


class VllmMetrics:
    """One replica's vLLM metric set in its own registry."""

    def __init__(self, model_name: str, max_model_len: int, engine: str = "0") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labelvalues = [model_name, engine]
        r = self.registry

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, LABELS, registry=r)

        def counter(name: str, doc: str) -> Counter:
            # prometheus_client appends `_total` like vLLM's counters (declared without it)
            return Counter(name.removesuffix("_total"), doc, LABELS, registry=r).labels(*labelvalues)

        self.running = gauge(Vllm.REQUESTS_RUNNING, "Number of requests in model execution batches.")
        self.waiting = gauge(Vllm.REQUESTS_WAITING, "Number of requests waiting to be processed.")
        self.kv_usage = gauge(Vllm.KV_CACHE_USAGE, "KV-cache usage. 1 means 100 percent usage.")
        sleep = Gauge(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; "
            "awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; "
            "discard_all = 1 means sleep level 2.",
            [*LABELS, "sleep_state"],
            registry=r,
        )
        for state, value in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
            sleep.labels(model_name, engine, state).set(value)

        # vLLM counts a request's prompt tokens as queries, and the cached ones among them as hits,
        # when the scheduler looks its prefix up (vllm/v1/core/kv_cache_manager.py, get_computed_blocks:
        # prefix_cache_stats.record(num_tokens=request.num_tokens, num_hits=...)), only with prefix
        # caching on. The mock engine keeps no prefix cache: its hits stay 0, honestly.
        self.prefix_cache_queries = counter(
            Vllm.PREFIX_CACHE_QUERIES, "Prefix cache queries, in terms of number of queried tokens."
        )
        self.prefix_cache_hits = counter(
            Vllm.PREFIX_CACHE_HITS, "Prefix cache hits, in terms of number of cached tokens."
        )
        counter(
            "vllm:external_prefix_cache_queries",
            "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.",
        )
        counter(
            "vllm:external_prefix_cache_hits",
            "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.",
        )
        counter("vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items.")
        counter("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.")
        self.preemptions = counter(Vllm.PREEMPTIONS, "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter(Vllm.PROMPT_TOKENS, "Number of prefill tokens processed.")
        self.generation_tokens = counter(Vllm.GENERATION_TOKENS, "Number of generation tokens processed.")
        success = Counter(
            Vllm.REQUEST_SUCCESS.removesuffix("_total"),
            "Count of successfully processed requests.",
            [*LABELS, "finished_reason"],
            registry=r,
        )
        self.request_success = {reason: success.labels(model_name, engine, reason) for reason in FINISH_REASONS}

        token_buckets = build_1_2_5_buckets(max_model_len)
        H = _Histogram
        self.request_prompt_tokens = H(Vllm.REQUEST_PROMPT_TOKENS, "Number of prefill tokens processed.", token_buckets)
        self.request_generation_tokens = H(
            Vllm.REQUEST_GENERATION_TOKENS, "Number of generation tokens processed.", token_buckets
        )
        self.iteration_tokens = H(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_TOKEN_BUCKETS
        )
        self.max_num_generation_tokens = H(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            token_buckets,
        )
        self.params_n = H("vllm:request_params_n", "Histogram of the n request parameter.", PARAMS_N_BUCKETS)
        self.params_max_tokens = H(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", token_buckets
        )
        self.ttft = H(Vllm.TTFT, "Histogram of time to first token in seconds.", TTFT_BUCKETS)
        self.inter_token_latency = H(
            Vllm.INTER_TOKEN_LATENCY, "Histogram of inter-token latency in seconds.", TOKEN_LATENCY_BUCKETS
        )
        self.request_time_per_output_token = H(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            TOKEN_LATENCY_BUCKETS,
        )
        self.e2e_latency = H(Vllm.E2E_LATENCY, "Histogram of e2e request latency in seconds.", REQUEST_LATENCY_BUCKETS)
        self.queue_time = H(
            Vllm.QUEUE_TIME, "Histogram of time spent in WAITING phase for request.", REQUEST_LATENCY_BUCKETS
        )
        self.inference_time = H(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.prefill_time = H(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.decode_time = H(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.histograms = [
            self.request_prompt_tokens,
            self.request_generation_tokens,
            self.iteration_tokens,
            self.max_num_generation_tokens,
            self.params_n,
            self.params_max_tokens,
            self.ttft,
            self.inter_token_latency,
            self.request_time_per_output_token,
            self.e2e_latency,
            self.queue_time,
            self.inference_time,
            self.prefill_time,
            self.decode_time,
        ]
        r.register(_HistogramCollector(self.histograms, labelvalues))
        self._labelvalues = labelvalues

    def record_prefix_lookup(self, prompt_tokens: int, cached_tokens: int = 0) -> None:
        """One request's prefix-cache lookup: its prompt tokens queried, `cached_tokens` of them hit."""
        if not 0 <= cached_tokens <= prompt_tokens:
            raise ValueError(f"cached tokens ({cached_tokens}) must be within the prompt's {prompt_tokens}")
        self.prefix_cache_queries.inc(prompt_tokens)
        if cached_tokens:
            self.prefix_cache_hits.inc(cached_tokens)

    def bind_gauges(self, running: Callable[[], float], waiting: Callable[[], float], kv: Callable[[], float]) -> None:
        """Gauges read the engine at scrape time."""
        self.running.labels(*self._labelvalues).set_function(running)
        self.waiting.labels(*self._labelvalues).set_function(waiting)
        self.kv_usage.labels(*self._labelvalues).set_function(kv)
