"""What one vLLM replica's `/metrics` shows between scrapes: its histograms and counters.

The gauges (running, waiting, KV-cache usage) are read from the engine at scrape time; the
histograms and counters accumulate here as requests progress, as vLLM's Prometheus logger
records them (`vllm/v1/metrics/loggers.py`, PrometheusStatLogger).
"""

from __future__ import annotations

from bisect import bisect_left

from contract.signals import REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS


def cumulative(buckets: list[int]) -> tuple[int, ...]:
    """Per-bucket counts as Prometheus exposes them: each `le` bucket counts all below it."""
    out, total = [], 0
    for count in buckets:
        total += count
        out.append(total)
    return tuple(out)


class Exposition:
    """One replica's live histogram buckets (non-cumulative, the last one +Inf) and its
    `vllm:prompt_tokens_total`."""

    __slots__ = ("ttft_buckets", "e2e_buckets", "prompt_tokens_total")

    def __init__(self) -> None:
        self.ttft_buckets = [0] * (len(TTFT_BUCKETS) + 1)
        self.e2e_buckets = [0] * (len(REQUEST_LATENCY_BUCKETS) + 1)
        self.prompt_tokens_total = 0

    def first_token(self, ttft_s: float, prompt_tokens: int) -> None:
        """A request's prefill completed: vLLM v1 counts its prompt tokens with its first token
        (vllm/v1/metrics/stats.py IterationStats.update_from_output: is_prefilling)."""
        self.ttft_buckets[bisect_left(TTFT_BUCKETS, ttft_s)] += 1
        self.prompt_tokens_total += prompt_tokens

    def finished(self, e2e_s: float) -> None:
        self.e2e_buckets[bisect_left(REQUEST_LATENCY_BUCKETS, e2e_s)] += 1
