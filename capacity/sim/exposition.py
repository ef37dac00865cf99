"""What one vLLM replica's `/metrics` shows between scrapes: its histograms and counters.

The gauges (running, waiting, KV-cache usage) are read from the engine at scrape time; the
histograms and counters accumulate here as requests progress, as vLLM's Prometheus logger
records them (`vllm/v1/metrics/loggers.py`, PrometheusStatLogger).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from itertools import accumulate

import numpy as np

from capacity.engine import Finished, Request
from contract.signals import REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS

# A scrape reads both histograms into one row (`Exposition.scraped_buckets`): these columns.
TTFT_COLUMNS = slice(0, len(TTFT_BUCKETS) + 1)
E2E_COLUMNS = slice(len(TTFT_BUCKETS) + 1, len(TTFT_BUCKETS) + len(REQUEST_LATENCY_BUCKETS) + 2)


class Exposition:
    """One replica's live histogram buckets (non-cumulative, the last one +Inf) and its
    `vllm:prompt_tokens_total`."""

    __slots__ = ("e2e_buckets", "prompt_tokens_total", "ttft_buckets")

    def __init__(self) -> None:
        self.ttft_buckets = [0] * (len(TTFT_BUCKETS) + 1)
        self.e2e_buckets = [0] * (len(REQUEST_LATENCY_BUCKETS) + 1)
        self.prompt_tokens_total = 0

    def scraped_buckets(self) -> np.ndarray:
        """Both histograms as Prometheus exposes them, side by side (`TTFT_COLUMNS`, `E2E_COLUMNS`):
        each `le` bucket counts all below it, as float64 (what PromQL computes in; exact, as counts
        stay far below 2**53). One array per scrape: the queries read both histograms at once."""
        return np.array([*accumulate(self.ttft_buckets), *accumulate(self.e2e_buckets)], dtype=np.float64)

    def first_tokens(self, events: Iterable[tuple[Request, float]]) -> None:
        """Requests whose prefill completed (each with its first token's time): vLLM v1 counts
        a prompt's tokens with its first token (vllm/v1/metrics/stats.py
        IterationStats.update_from_output: is_prefilling)."""
        buckets = self.ttft_buckets
        for request, when in events:
            buckets[bisect_left(TTFT_BUCKETS, when - request.arrival)] += 1
            self.prompt_tokens_total += request.prompt_tokens

    def finished(self, done: Iterable[Finished]) -> None:
        """Requests that completed: their e2e latencies."""
        buckets = self.e2e_buckets
        for f in done:
            buckets[bisect_left(REQUEST_LATENCY_BUCKETS, f.finish_time - f.request.arrival)] += 1
