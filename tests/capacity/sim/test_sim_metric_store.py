"""The metric store evaluates a trigger's Query over the pods' scraped series as Prometheus would:
one value, NaN where PromQL gives NaN, or empty (None) where the result has no series."""

from types import SimpleNamespace

import numpy as np
import pytest

from capacity.sim.control.scalers import PrometheusUnavailable
from capacity.sim.fleet import Phase, Pod
from capacity.sim.metric_store import MetricStore
from contract.signals import Query, Vllm


def engine(waiting: float, kv: float) -> SimpleNamespace:
    """What a scrape reads from a replica's engine."""
    return SimpleNamespace(num_running=0, num_waiting=waiting, kv_usage=kv)


def two_pods(store: MetricStore, kv: tuple[float, float]) -> list[Pod]:
    """Two ready pods scraped at 0 s (KV 0, pod i waiting i) and 15 s (these KV fractions, 3 waiting)."""
    pods = []
    for i, value in enumerate(kv):
        pod = Pod(i)
        pod.phase, pod.engine = Phase.READY, engine(float(i), 0.0)
        store.scrape(0.0, pod)
        pod.engine = engine(3.0, value)
        store.scrape(15.0, pod)
        pods.append(pod)
    return pods


@pytest.mark.parametrize(("aggregation", "value"), [("sum", 1.0), ("avg", 0.5), ("max", 0.8), ("min", 0.2)])
def test_an_aggregation_across_replicas_is_evaluated_like_prometheus(aggregation, value):
    store = MetricStore()
    two_pods(store, (0.2, 0.8))
    read = store.instant_query(Query(Vllm.KV_CACHE_USAGE, "sum", aggregation=aggregation))
    assert read(20.0) == pytest.approx(value)


def test_max_over_time_holds_the_peak_of_each_series_in_the_window():
    store = MetricStore()
    two_pods(store, (0.2, 0.8))
    read = store.instant_query(Query(Vllm.REQUESTS_WAITING, "sum_max_over_time", 60))
    assert read(20.0) == 6.0  # max(0, 3) + max(1, 3)


def test_a_sum_over_no_live_series_is_empty_not_zero():
    # Prometheus: an aggregation over an empty instant vector returns no series
    store = MetricStore()
    for pod in two_pods(store, (0.2, 0.8)):
        pod.phase = Phase.GONE  # left the scrape targets: its series is stale
    assert store.instant_query(Query(Vllm.KV_CACHE_USAGE, "sum"))(20.0) is None


def test_a_rate_needs_two_samples_in_its_window():
    store = MetricStore()
    two_pods(store, (0.2, 0.8))
    assert store.instant_query(Query(Vllm.PROMPT_TOKENS, "sum_rate", 30))(20.0) == 0.0
    assert store.instant_query(Query(Vllm.PROMPT_TOKENS, "sum_rate", 10))(20.0) is None  # one sample each


def test_a_quantile_without_observations_is_nan():
    # histogram_quantile over buckets that counted nothing
    store = MetricStore()
    two_pods(store, (0.2, 0.8))
    value = store.instant_query(Query(Vllm.E2E_LATENCY, "quantile", 60, 0.99, zero_when_empty=False))(20.0)
    assert np.isnan(value)


def test_a_quantile_over_no_series_is_empty():
    store = MetricStore()
    assert store.instant_query(Query(Vllm.E2E_LATENCY, "quantile", 60, 0.99, zero_when_empty=False))(20.0) is None


@pytest.mark.parametrize("scraped", [False, True], ids=["no series", "no observation"])
def test_the_or_vector_0_guard_reads_0_for_an_empty_or_nan_quantile(scraped):
    store = MetricStore()
    if scraped:
        two_pods(store, (0.2, 0.8))
    assert store.instant_query(Query(Vllm.E2E_LATENCY, "quantile", 60, 0.99))(20.0) == 0.0


def test_a_query_during_an_outage_gets_no_answer():
    store = MetricStore(outages=((10.0, 30.0),))
    two_pods(store, (0.2, 0.8))
    read = store.instant_query(Query(Vllm.KV_CACHE_USAGE, "sum"))
    with pytest.raises(PrometheusUnavailable):
        read(20.0)
    assert read(30.0) == pytest.approx(1.0)


def scrape_every_15s(store: MetricStore, pod: Pod, start: float, end: float) -> None:
    for k in range(int((end - start) // 15) + 1):
        store.scrape(start + 15.0 * k, pod)


def test_a_range_query_still_reads_a_gone_pods_samples_while_its_window_covers_them():
    # Prometheus: a staleness marker ends the instant vector, not the range vector's samples
    store = MetricStore()
    read = store.instant_query(Query(Vllm.REQUESTS_WAITING, "sum_max_over_time", 600))
    gone, live = Pod(0), Pod(1)
    gone.phase, gone.engine = Phase.READY, engine(7.0, 0.0)
    live.phase, live.engine = Phase.READY, engine(1.0, 0.0)
    scrape_every_15s(store, gone, 0.0, 60.0)
    gone.phase = Phase.GONE
    scrape_every_15s(store, live, 0.0, 600.0)
    assert read(600.0) == 8.0  # 60 s is in (0, 600]
    scrape_every_15s(store, live, 615.0, 660.0)
    assert read(660.0) == 1.0  # its last sample (60 s) left the window


def test_the_store_keeps_only_the_samples_its_longest_range_can_read():
    store = MetricStore()
    store.instant_query(Query(Vllm.REQUESTS_WAITING, "sum_avg_over_time", 600))
    gone, live = Pod(0), Pod(1)
    gone.phase, gone.engine = Phase.READY, engine(7.0, 0.0)
    live.phase, live.engine = Phase.READY, engine(1.0, 0.0)
    scrape_every_15s(store, gone, 0.0, 60.0)
    gone.phase = Phase.GONE
    scrape_every_15s(store, live, 0.0, 86400.0)  # a day of scrapes
    # at most two retention periods of one series: the gone pod's series is forgotten
    assert store.samples_kept <= 2 * 600 // 15 + 1


def test_a_longer_range_asked_after_the_store_dropped_samples_is_refused():
    store = MetricStore()
    pod = Pod(0)
    pod.phase, pod.engine = Phase.READY, engine(1.0, 0.0)
    scrape_every_15s(store, pod, 0.0, 3600.0)
    with pytest.raises(RuntimeError, match="600 s range"):
        store.instant_query(Query(Vllm.REQUESTS_WAITING, "sum_avg_over_time", 600))
