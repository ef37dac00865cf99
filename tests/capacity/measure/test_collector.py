"""Collector: the KEDA queries, built by `signals`, and the one-series rule."""

import httpx
import pytest

from capacity.measure.collector import scaling_queries
from capacity.measure.prometheus import PrometheusClient
from capacity.measure.recommend import current_values
from contract import signals
from tests.capacity.conftest import REPO


def _client(result: list, result_type: str = "vector") -> PrometheusClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"status": "success", "data": {"resultType": result_type, "result": result}})

    return PrometheusClient("http://prom", transport=httpx.MockTransport(handler))


def test_queries_are_exactly_the_signals_builders_keda_uses():
    scope = signals.Scope("m", "ns")
    by_name = {s.name: s.query for s in scaling_queries(scope)}  # the settings' defaults: 60 s, 120 s
    assert by_name["queueDepth"] == signals.queue_depth(scope, 60)
    assert by_name["kvCache"] == signals.kv_cache_usage(scope)
    assert by_name["e2eLatency"] == signals.e2e_latency_quantile(scope, 0.99, 120)
    assert by_name["ttft"] == signals.ttft_quantile(scope, 0.95, 120)


def test_stack_windows_and_quantiles_are_used_when_a_stack_is_given():
    policy, why = current_values("dev", "default", REPO / "Pulumi.dev.yaml")
    assert policy is not None, why
    t = policy.triggers
    scope = signals.Scope("m")
    by_name = {s.name: s.query for s in scaling_queries(scope, policy)}
    assert by_name["queueDepth"] == signals.queue_depth(scope, t.queue_depth.window_seconds)
    assert by_name["e2eLatency"] == signals.e2e_latency_quantile(
        scope, t.e2e_latency.quantile, t.e2e_latency.window_seconds
    )


def test_a_query_returning_several_series_is_rejected_as_keda_would():
    two = [{"metric": {"pod": "a"}, "value": [1, "1"]}, {"metric": {"pod": "b"}, "value": [1, "2"]}]
    with pytest.raises(ValueError, match="exactly one"):
        _client(two).query("vllm:num_requests_waiting")


def test_nan_and_empty_results_read_as_no_value():
    assert _client([{"metric": {}, "value": [1, "NaN"]}]).query("q") is None
    assert _client([]).query("q") is None
    assert _client([1, "3.5"], "scalar").query("q") == 3.5


def test_prometheus_errors_name_the_query():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"status": "error", "error": "parse error at char 3"})

    client = PrometheusClient("http://prom", transport=httpx.MockTransport(handler))
    with pytest.raises(ValueError, match="parse error"):
        client.query("sum(")
