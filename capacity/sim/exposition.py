"""What one vLLM replica's `/metrics` shows between scrapes: its histograms and counters.

The gauges (running, waiting, KV-cache usage) are read from the engine at scrape time; the
histograms and counters accumulate here as requests progress, as vLLM's Prometheus logger
records them (`vllm/v1/metrics/loggers.py`, PrometheusStatLogger).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

import numpy as np

from capacity.engine import Finished, Request
from contract.signals import REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS


def cumulative(buckets: list[int]) -> np.ndarray:
    """Per-bucket counts as Prometheus exposes them: each `le` bucket counts all below it (as
    float64, what PromQL computes in; exact, as counts stay far below 2**53)."""
    return np.array(buckets, dtype=np.float64).cumsum()


class Exposition:
    """One replica's live histogram buckets (non-cumulative, the last one +Inf) and its
    `vllm:prompt_tokens_total`."""

    __slots__ = ("_e2e_cumulative", "_ttft_cumulative", "e2e_buckets", "prompt_tokens_total", "ttft_buckets")

    def __init__(self) -> None:
        self.ttft_buckets = [0] * (len(TTFT_BUCKETS) + 1)
        self.e2e_buckets = [0] * (len(REQUEST_LATENCY_BUCKETS) + 1)
        self.prompt_tokens_total = 0
        # what the last scrape read, while no observation changed it (None: recompute)
        self._ttft_cumulative: np.ndarray | None = None
        self._e2e_cumulative: np.ndarray | None = None

    def ttft_cumulative(self) -> np.ndarray:
        """The TTFT histogram as scraped (`cumulative`); unchanged since the last scrape, the same
        array (a scrape's samples are never written to)."""
        if self._ttft_cumulative is None:
            self._ttft_cumulative = cumulative(self.ttft_buckets)
        return self._ttft_cumulative

    def e2e_cumulative(self) -> np.ndarray:
        """The e2e latency histogram as scraped, like `ttft_cumulative`."""
        if self._e2e_cumulative is None:
            self._e2e_cumulative = cumulative(self.e2e_buckets)
        return self._e2e_cumulative

    def first_tokens(self, events: Iterable[tuple[Request, float]]) -> None:
        """Requests whose prefill completed (each with its first token's time): vLLM v1 counts
        a prompt's tokens with its first token (vllm/v1/metrics/stats.py
        IterationStats.update_from_output: is_prefilling)."""
        buckets = self.ttft_buckets
        self._ttft_cumulative = None
        for request, when in events:
            buckets[bisect_left(TTFT_BUCKETS, when - request.arrival)] += 1
            self.prompt_tokens_total += request.prompt_tokens

    def finished(self, done: Iterable[Finished]) -> None:
        """Requests that completed: their e2e latencies."""
        buckets = self.e2e_buckets
        self._e2e_cumulative = None
        for f in done:
            buckets[bisect_left(REQUEST_LATENCY_BUCKETS, f.finish_time - f.request.arrival)] += 1
