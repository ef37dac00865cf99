"""The metric store evaluates a trigger's Query over the pods' scraped series as Prometheus would."""

from types import SimpleNamespace

import numpy as np
import pytest

from capacity.sim.control.keda import KedaTrigger
from capacity.sim.fleet import Phase, Pod
from capacity.sim.metric_store import MetricStore
from capacity.sim.simulator import SimConfig, Simulation
from capacity.workload.traces import load
from contract.signals import Query, Vllm
from tests.capacity.sim.test_sim_sixth_trigger import TOY


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


def test_an_empty_result_fails_unless_ignore_null_values_reads_it_as_zero():
    config = SimConfig(profile=TOY, pools=(), startup=None)  # type: ignore[arg-type]
    sim = Simulation(config, load("synthetic:step:base=1,peak=1,at=0,length=1,duration=10"), None)
    two_pods(sim.prometheus, (0.2, 0.8))  # no request observed
    query = Query(Vllm.E2E_LATENCY, "quantile", 60, 0.99, zero_when_empty=False)
    assert np.isnan(sim._reader(KedaTrigger("e2e", "Value", 30.0, source=query))(20.0))
    assert sim._reader(KedaTrigger("e2e", "Value", 30.0, source=query, ignore_null_values=True))(20.0) == 0.0
