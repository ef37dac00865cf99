"""The one home of every metric name and every PromQL string the platform uses.

KEDA triggers, recording and alert rules, dashboards, the capacity collector and the
simulator all build their queries here, so a renamed metric is fixed in one place.

Metric names are those of the pinned vLLM image (`VLLM_IMAGE_TAG`): vLLM renamed
`gpu_cache_usage_perc` -> `kv_cache_usage_perc` and `time_per_output_token_seconds` ->
`inter_token_latency_seconds` (0.10-0.13); the old names do not exist in this version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
    # Prompt tokens looked up in the prefix cache, and the cached ones among them (counters).
    PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"
    PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"
    # counter, label finished_reason; +1 per finished request of every reason (stop, length, abort,
    # error, repetition), as each one is observed in the token histograms below
    # (vllm/v1/metrics/loggers.py, PrometheusStatLogger.record: `for finished_request in
    # iteration_stats.finished_requests`)
    REQUEST_SUCCESS = "vllm:request_success_total"
    # histograms of each finished request's prompt and generated tokens, buckets
    # build_1_2_5_buckets(max_model_len): 1, 2, 5, 10, ... up to the model's context length
    REQUEST_PROMPT_TOKENS = "vllm:request_prompt_tokens"
    REQUEST_GENERATION_TOKENS = "vllm:request_generation_tokens"
    TTFT = "vllm:time_to_first_token_seconds"  # histogram
    # histogram, one observation per gap between consecutive tokens (token-weighted: long answers dominate)
    INTER_TOKEN_LATENCY = "vllm:inter_token_latency_seconds"
    # histogram, one observation per finished request: its TPOT, (last token - first token) /
    # (generated tokens - 1), 0 for a single token (vllm/v1/metrics/stats.py,
    # IterationStats.update_from_finished_request; observed in loggers.py PrometheusStatLogger.record).
    # Request-weighted, so its buckets count requests within a TPOT target: the SLO's TPOT signal.
    REQUEST_TPOT = "vllm:request_time_per_output_token_seconds"
    E2E_LATENCY = "vllm:e2e_request_latency_seconds"  # histogram
    QUEUE_TIME = "vllm:request_queue_time_seconds"  # histogram

    # Names that older images exposed; a query using them silently returns nothing.
    REMOVED = ("vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds")


# vLLM's histogram bucket boundaries (`vllm/v1/metrics/loggers.py`, PrometheusStatLogger): the
# mock exposes them and the simulator's PromQL reads them, so both quantize latency like vLLM.
TTFT_BUCKETS = (
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
)
# inter-token latency and time per output token
TOKEN_LATENCY_BUCKETS = (
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
)
# e2e latency, queue time and the other per-phase request histograms
REQUEST_LATENCY_BUCKETS = (
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
)
ITERATION_TOKEN_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PARAMS_N_BUCKETS = (1, 2, 5, 10, 20)


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


Aggregation = Literal["sum", "avg", "max", "min"]
Shape = Literal["sum", "sum_avg_over_time", "sum_max_over_time", "sum_rate", "quantile"]
# The range function each windowed shape applies to its series.
RANGE_FUNCTIONS: dict[Shape, str] = {
    "sum_avg_over_time": "avg_over_time",
    "sum_max_over_time": "max_over_time",
    "sum_rate": "rate",
}


@dataclass(frozen=True)
class Trend:
    """`predict_linear((QUERY)[range:step], ahead)`: the query's value `ahead` seconds from now,
    by a least-squares line through its values at `step`-aligned instants over the last `range`
    seconds (a subquery: Prometheus evaluates the inner query at each step)."""

    range_seconds: int
    step_seconds: int
    ahead_seconds: int

    def __post_init__(self) -> None:
        if not 0 < self.step_seconds < self.range_seconds:
            raise ValueError(
                f"a trend's step ({self.step_seconds}s) must be positive and below its range ({self.range_seconds}s)"
            )
        if self.ahead_seconds <= 0:
            raise ValueError(f"a trend looks ahead a positive time, got {self.ahead_seconds}s")


@dataclass(frozen=True)
class Query:
    """A single-series signal in one of the shapes scaling triggers use, as plain data: it
    renders to PromQL for KEDA, rules, dashboards and the collector, and the simulator
    evaluates the same description over its scraped series (`capacity.sim`).

    Each shape is named with its default aggregation across series, `sum`; `aggregation`
    replaces it (`avg`, `max`, `min`) and `by` groups (labels every series of one model shares,
    so the result stays one series, as KEDA requires):

    - `sum`: `sum(metric)`, a gauge added up over replicas (additive);
    - `sum_avg_over_time`, `sum_max_over_time`: `sum(avg_over_time(metric[window]))`, the same
      smoothed (or peak-held) over a window;
    - `sum_rate`: `sum(rate(metric[window]))`, a counter's per-second increase;
    - `quantile`: `histogram_quantile(q, sum by (le) (rate(metric_bucket[window])))`, with
      `> 0 or vector(0)` (`zero_when_empty`) so that no traffic (NaN) still returns one series, 0.

    Two look-aheads for a `sum_rate`, from the history Prometheus already holds (the forecast
    triggers): `offset_seconds` reads the range that many seconds back (`rate(m[w] offset o)`: a
    day ago, moved forward by a replica's start), and `trend` extrapolates the query's recent
    values (`predict_linear` over a subquery).
    """

    metric: str
    shape: Shape
    window_seconds: int | None = None
    quantile: float | None = None
    aggregation: Aggregation = "sum"
    by: tuple[str, ...] = ()
    zero_when_empty: bool = True  # quantile only
    offset_seconds: int = 0  # sum_rate only
    trend: Trend | None = None  # sum_rate only

    def __post_init__(self) -> None:
        if (self.offset_seconds or self.trend) and self.shape != "sum_rate":
            raise ValueError(f"an offset or a trend applies to a sum_rate query, not a {self.shape} one")
        if self.offset_seconds < 0:
            raise ValueError(f"an offset looks back a positive time, got {self.offset_seconds}s")
        if self.offset_seconds and self.trend:
            raise ValueError("a query takes an offset or a trend, not both")

    @property
    def look_back_seconds(self) -> int:
        """How far back its samples reach: what the stack's Prometheus must still hold."""
        reach = (self.window_seconds or 0) + self.offset_seconds
        return reach + (self.trend.range_seconds if self.trend else 0)

    @property
    def additive(self) -> bool:
        """A sum over replicas, which KEDA divides by the replica count (AverageValue)."""
        return self.aggregation == "sum" and self.shape != "quantile"

    def _aggregate(self, inner: str, by: tuple[str, ...]) -> str:
        grouping = f" by ({', '.join(by)}) " if by else ""
        return f"{self.aggregation}{grouping}({inner})"

    def promql(self, scope: Scope) -> str:
        if self.shape == "sum":
            return self._aggregate(scope.select(self.metric), self.by)
        if self.window_seconds is None:
            raise ValueError(f"a {self.shape} query needs a window")
        window = duration(self.window_seconds)
        if self.shape in RANGE_FUNCTIONS:
            offset = f" offset {duration(self.offset_seconds)}" if self.offset_seconds else ""
            selected = f"{RANGE_FUNCTIONS[self.shape]}({scope.select(self.metric)}[{window}]{offset})"
            if self.trend is None:
                return self._aggregate(selected, self.by)
            t = self.trend
            subquery = f"({self._aggregate(selected, self.by)})[{duration(t.range_seconds)}:{duration(t.step_seconds)}]"
            return f"predict_linear({subquery}, {t.ahead_seconds})"
        if self.quantile is None or not 0 < self.quantile < 1:
            raise ValueError(f"a quantile must be in (0, 1), got {self.quantile}")
        rate = self._aggregate(f"rate({scope.select(self.metric + '_bucket')}[{window}])", ("le", *self.by))
        quantile = f"histogram_quantile({self.quantile}, {rate})"
        return f"({quantile} > 0) or vector(0)" if self.zero_when_empty else quantile


def queue_depth(scope: Scope, window_seconds: int) -> str:
    """Requests waiting across all replicas, averaged over the window (additive)."""
    return Query(Vllm.REQUESTS_WAITING, "sum_avg_over_time", window_seconds).promql(scope)


def kv_cache_usage(scope: Scope) -> str:
    """KV-cache in use summed over replicas, in replica-fractions (additive: 1.0 = one full replica)."""
    return Query(Vllm.KV_CACHE_USAGE, "sum").promql(scope)


def requests_running(scope: Scope) -> str:
    return Query(Vllm.REQUESTS_RUNNING, "sum").promql(scope)


def requests_waiting(scope: Scope) -> str:
    return Query(Vllm.REQUESTS_WAITING, "sum").promql(scope)


def e2e_latency_quantile(scope: Scope, quantile: float, window_seconds: int) -> str:
    return Query(Vllm.E2E_LATENCY, "quantile", window_seconds, quantile).promql(scope)


def ttft_quantile(scope: Scope, quantile: float, window_seconds: int) -> str:
    return Query(Vllm.TTFT, "quantile", window_seconds, quantile).promql(scope)


def inter_token_latency_quantile(scope: Scope, quantile: float, window_seconds: int) -> str:
    return Query(Vllm.INTER_TOKEN_LATENCY, "quantile", window_seconds, quantile).promql(scope)


def tpot_quantile(scope: Scope, quantile: float, window_seconds: int) -> str:
    """The quantile of requests' time per output token (one observation per request)."""
    return Query(Vllm.REQUEST_TPOT, "quantile", window_seconds, quantile).promql(scope)


def generation_tokens_per_second(scope: Scope, window_seconds: int) -> str:
    return f"sum(rate({scope.select(Vllm.GENERATION_TOKENS)}[{duration(window_seconds)}]))"


def requests_per_second(scope: Scope, window_seconds: int) -> str:
    return f"sum(rate({scope.select(Vllm.REQUEST_SUCCESS)}[{duration(window_seconds)}]))"


# --- History (what the model served, read back over days) ----------------------------------


def requests_finished(scope: Scope, window_seconds: int) -> str:
    """Requests finished in the window, every finish reason, summed over replicas: `increase`
    handles a replica's counter reset (a restart) and series that come and go (scaling)."""
    return f"sum(increase({scope.select(Vllm.REQUEST_SUCCESS)}[{duration(window_seconds)}]))"


def histogram_bucket_increase(scope: Scope, histogram: str, window_seconds: int) -> str:
    """Each cumulative bucket's (`le`) increase over the window, summed over replicas."""
    return f"sum by (le) (increase({scope.select(histogram + '_bucket')}[{duration(window_seconds)}]))"


def histogram_sum_increase(scope: Scope, histogram: str, window_seconds: int) -> str:
    """The observed values' total over the window, summed over replicas."""
    return f"sum(increase({scope.select(histogram + '_sum')}[{duration(window_seconds)}]))"


# --- Kubernetes state, DCGM and alert conditions (Observability, Autoscaling, dashboards) ---


class KubeState:
    """kube-state-metrics names (shipped with kube-prometheus-stack)."""

    DEPLOYMENT_SPEC_REPLICAS = "kube_deployment_spec_replicas"
    DEPLOYMENT_READY_REPLICAS = "kube_deployment_status_replicas_ready"
    HPA_DESIRED_REPLICAS = "kube_horizontalpodautoscaler_status_desired_replicas"
    HPA_CURRENT_REPLICAS = "kube_horizontalpodautoscaler_status_current_replicas"
    POD_PHASE = "kube_pod_status_phase"
    POD_RESOURCE_REQUESTS = "kube_pod_container_resource_requests"
    NODE_ALLOCATABLE = "kube_node_status_allocatable"
    # Node labels appear only when allow-listed (Observability allow-lists the GPU pool label).
    NODE_LABELS = "kube_node_labels"
    POOL_LABEL = "label_inference_platform_gpu_pool"  # from the node label inference-platform/gpu-pool
    # kube-state-metrics turns the resource name `nvidia.com/gpu` into this label value.
    GPU_RESOURCE = "nvidia_com_gpu"


# The `job` label the platform's ServiceMonitor gives every DCGM exporter target, and the
# label that carries the Kubernetes node name of the GPU it measures.
DCGM_JOB = "dcgm-exporter"
NODE_LABEL = "node"


def number(value: float) -> str:
    """A PromQL number literal (no trailing `.0` noise: 4.0 -> '4')."""
    return f"{float(value):g}"


@dataclass(frozen=True)
class Workload:
    """The Kubernetes objects that serve one model: its predictor Deployment (pods are
    named `<deployment>-<hash>-<id>`) and the HPA KEDA creates for its ScaledObject."""

    namespace: str
    deployment: str
    hpa: str

    def deployment_matchers(self) -> str:
        return f'{{namespace="{self.namespace}",deployment="{self.deployment}"}}'

    def pod_matchers(self, *extra: str) -> str:
        parts = [f'namespace="{self.namespace}"', f'pod=~"{self.deployment}-.*"', *extra]
        return "{" + ",".join(parts) + "}"


def kv_cache_usage_max(scope: Scope) -> str:
    """The fullest replica's KV-cache fraction (a replica near 1.0 starts preempting)."""
    return f"max({scope.select(Vllm.KV_CACHE_USAGE)})"


def desired_replicas(workload: Workload) -> str:
    """What the autoscaler asks for (KEDA's HPA)."""
    return f'sum({KubeState.HPA_DESIRED_REPLICAS}{{namespace="{workload.namespace}",horizontalpodautoscaler="{workload.hpa}"}})'


def spec_replicas(workload: Workload) -> str:
    return f"sum({KubeState.DEPLOYMENT_SPEC_REPLICAS}{workload.deployment_matchers()})"


def ready_replicas(workload: Workload) -> str:
    return f"sum({KubeState.DEPLOYMENT_READY_REPLICAS}{workload.deployment_matchers()})"


PENDING, RUNNING = 'phase="Pending"', 'phase="Running"'


def pending_pods(workload: Workload) -> str:
    """Predictor pods waiting for a node (a GPU node launching, or a pool at its GPU limit)."""
    return f"sum({KubeState.POD_PHASE}{workload.pod_matchers(PENDING)}) or vector(0)"


def gpus_in_use(workload: Workload) -> str:
    """GPUs requested by the model's running predictor pods."""
    gpu = 'resource="' + KubeState.GPU_RESOURCE + '"'
    requests = f"{KubeState.POD_RESOURCE_REQUESTS}{workload.pod_matchers(gpu)}"
    running = f"{KubeState.POD_PHASE}{workload.pod_matchers(RUNNING)} == 1"
    return f"sum({requests} * on (namespace, pod) group_left () ({running})) or vector(0)"


def per_replica(signal: str, workload: Workload) -> str:
    """A fleet-wide sum divided by ready replicas: what KEDA compares with an AverageValue target."""
    return f"({signal}) / clamp_min({ready_replicas(workload)}, 1)"


def constant(value: float) -> str:
    """A flat line, e.g. a configured threshold drawn next to the signal it bounds."""
    return f"vector({number(value)})"


def model_gpu_utilization(workload: Workload) -> str:
    """Average DCGM utilisation (percent) of the GPUs attached to the model's pods."""
    return f"avg({Dcgm.GPU_UTIL}{workload.pod_matchers()})"


def gpu_by_node(metric: str, aggregation: str = "avg") -> str:
    """One DCGM gauge per node (`avg`, `max` or `sum` over the node's GPUs)."""
    if aggregation not in ("avg", "max", "sum"):
        raise ValueError(f"unsupported aggregation {aggregation!r}")
    return f"{aggregation} by ({NODE_LABEL}) ({metric})"


def gpus_allocatable_by_pool() -> str:
    """GPUs on the nodes of each GPU NodePool (compare with the pool's gpuLimit)."""
    pool = KubeState.POOL_LABEL
    allocatable = f'{KubeState.NODE_ALLOCATABLE}{{resource="{KubeState.GPU_RESOURCE}"}}'
    return f"sum by ({pool}) ({allocatable} * on (node) group_left ({pool}) {KubeState.NODE_LABELS})"


def gpu_memory_used_fraction() -> str:
    """Framebuffer in use per GPU, 0..1 (vLLM pre-allocates `gpuMemoryUtilization` of it)."""
    return f"{Dcgm.FB_USED} / ({Dcgm.FB_USED} + {Dcgm.FB_FREE})"


# --- Alert conditions: each returns the series that should alert ---------------------------


def above(expression: str, threshold: float) -> str:
    return f"({expression}) > {number(threshold)}"


def ttft_slo_breach(scope: Scope, quantile: float, window_seconds: int, slo_seconds: float) -> str:
    return above(ttft_quantile(scope, quantile, window_seconds), slo_seconds)


def tpot_slo_breach(scope: Scope, quantile: float, window_seconds: int, slo_seconds: float) -> str:
    return above(tpot_quantile(scope, quantile, window_seconds), slo_seconds)


def capacity_exhausted(
    scope: Scope, workload: Workload, window_seconds: int, target_per_replica: float, max_replicas: int
) -> str:
    """Queue above what maxReplicas can absorb at the target, while maxReplicas are already ready."""
    queue = above(queue_depth(scope, window_seconds), target_per_replica * max_replicas)
    return f"{queue} and on () ({ready_replicas(workload)} >= {max_replicas})"


def kv_cache_near_full(scope: Scope, fraction: float) -> str:
    return above(kv_cache_usage_max(scope), fraction)


def scaling_signal_absent(scope: Scope, workload: Workload) -> str:
    """No vLLM series while the Deployment wants replicas: KEDA would scale on nothing."""
    # The value is the replicas the Deployment wants (absent() alone is always 1).
    return f"absent({scope.select(Vllm.REQUESTS_WAITING)}) * on () ({spec_replicas(workload)} > 0)"


def replicas_not_ready(workload: Workload) -> str:
    return f"({spec_replicas(workload)}) - ({ready_replicas(workload)}) > 0"


def dcgm_exporters_missing() -> str:
    """Fewer DCGM exporters up than nodes that offer GPUs (an exporter down or never scheduled)."""
    gpu_nodes = f'count({KubeState.NODE_ALLOCATABLE}{{resource="{KubeState.GPU_RESOURCE}"}} > 0) or vector(0)'
    exporters = f'count(up{{job="{DCGM_JOB}"}} == 1) or vector(0)'
    # The value is the number of GPU nodes.
    return f"({gpu_nodes}) > ({exporters})"


def gpu_xid_errors() -> str:
    return f"{Dcgm.XID_ERRORS} != 0"


def gpu_memory_high(fraction: float) -> str:
    return above(gpu_memory_used_fraction(), fraction)


def gpu_temperature_high(celsius: float) -> str:
    return above(Dcgm.GPU_TEMP, celsius)
