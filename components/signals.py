# TEMPORARY NOTE FOR HELPERS (the lead removes it): the placeholders NOTES_ENGINE, NOTES_CONFIG and
# COMMON_RULES in your task prompt are the files /work/notes/engine_api.md, /work/notes/config_paths.md
# and /work/notes/common.md. Read all three now; they are binding.
"""The one home of every metric name and every PromQL string the platform uses.

KEDA triggers, recording and alert rules, dashboards, the capacity collector and the
simulator all build their queries here, so a renamed metric is fixed in one place.

Metric names are those of the pinned vLLM image (`VLLM_IMAGE_TAG`): vLLM renamed
`gpu_cache_usage_perc` -> `kv_cache_usage_perc` and `time_per_output_token_seconds` ->
`inter_token_latency_seconds` (0.10-0.13); the old names do not exist in this version.
"""

from __future__ import annotations

from dataclasses import dataclass

# The vLLM OpenAI server release whose metric names are listed below.
VLLM_IMAGE_REPOSITORY = "vllm/vllm-openai"
VLLM_IMAGE_TAG = "v0.25.1"


class Vllm:
    """vLLM metric names (V1 engine). Every series carries `model_name` and `engine` labels."""

    REQUESTS_RUNNING = "vllm:num_requests_running"  # gauge
    REQUESTS_WAITING = "vllm:num_requests_waiting"  # gauge
    KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"  # gauge, fraction 0..1
    PREEMPTIONS = "vllm:num_preemptions_total"  # counter
    PROMPT_TOKENS = "vllm:prompt_tokens_total"  # counter
    GENERATION_TOKENS = "vllm:generation_tokens_total"  # counter
    REQUEST_SUCCESS = "vllm:request_success_total"  # counter, label finished_reason
    TTFT = "vllm:time_to_first_token_seconds"  # histogram
    INTER_TOKEN_LATENCY = "vllm:inter_token_latency_seconds"  # histogram
    E2E_LATENCY = "vllm:e2e_request_latency_seconds"  # histogram
    QUEUE_TIME = "vllm:request_queue_time_seconds"  # histogram

    # Names that older images exposed; a query using them silently returns nothing.
    REMOVED = ("vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds")


class Dcgm:
    """NVIDIA DCGM exporter metric names (gauges; XID is the last error code seen)."""

    GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent
    FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
    FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB
    POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"  # watts
    GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"  # celsius
    XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"


def duration(seconds: int) -> str:
    """A PromQL range duration, e.g. 60 -> '60s'."""
    if seconds <= 0:
        raise ValueError(f"a PromQL window must be positive, got {seconds}s")
    return f"{int(seconds)}s"


@dataclass(frozen=True)
class Scope:
    """Which series belong to one model: vLLM's `model_name` label (the served name),
    narrowed to a namespace inside the cluster (absent on a bare replica)."""

    model: str
    namespace: str | None = None

    def matchers(self) -> str:
        parts = [f'model_name="{self.model}"']
        if self.namespace:
            parts.insert(0, f'namespace="{self.namespace}"')
        return "{" + ",".join(parts) + "}"

    def select(self, metric: str) -> str:
        return f"{metric}{self.matchers()}"


# --- Scaling signals (each returns exactly one series, as KEDA requires) ---------------


def queue_depth(scope: Scope, window_seconds: int) -> str:
    """Requests waiting across all replicas, averaged over the window (additive)."""
    return f"sum(avg_over_time({scope.select(Vllm.REQUESTS_WAITING)}[{duration(window_seconds)}]))"


def kv_cache_usage(scope: Scope) -> str:
    """KV-cache in use summed over replicas, in replica-fractions (additive: 1.0 = one full replica)."""
    return f"sum({scope.select(Vllm.KV_CACHE_USAGE)})"


def requests_running(scope: Scope) -> str:
    return f"sum({scope.select(Vllm.REQUESTS_RUNNING)})"


def requests_waiting(scope: Scope) -> str:
    return f"sum({scope.select(Vllm.REQUESTS_WAITING)})"


def _quantile(metric: str, scope: Scope, quantile: float, window_seconds: int) -> str:
    # No traffic makes the quantile NaN (0/0); `> 0 or vector(0)` turns that into 0 so
    # the query still returns exactly one series.
    if not 0 < quantile < 1:
        raise ValueError(f"a quantile must be in (0, 1), got {quantile}")
    rate = f"sum by (le) (rate({scope.select(metric + '_bucket')}[{duration(window_seconds)}]))"
    return f"(histogram_quantile({quantile}, {rate}) > 0) or vector(0)"


def e2e_latency_quantile(scope: Scope, quantile: float, window_seconds: int) -> str:
    return _quantile(Vllm.E2E_LATENCY, scope, quantile, window_seconds)


def ttft_quantile(scope: Scope, quantile: float, window_seconds: int) -> str:
    return _quantile(Vllm.TTFT, scope, quantile, window_seconds)


def inter_token_latency_quantile(scope: Scope, quantile: float, window_seconds: int) -> str:
    return _quantile(Vllm.INTER_TOKEN_LATENCY, scope, quantile, window_seconds)


def generation_tokens_per_second(scope: Scope, window_seconds: int) -> str:
    return f"sum(rate({scope.select(Vllm.GENERATION_TOKENS)}[{duration(window_seconds)}]))"


def requests_per_second(scope: Scope, window_seconds: int) -> str:
    return f"sum(rate({scope.select(Vllm.REQUEST_SUCCESS)}[{duration(window_seconds)}]))"
