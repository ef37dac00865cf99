"""Collector: the KEDA queries, built by `signals`, and the one-series rule."""

import httpx
import pytest

from capacity.measure.collector import collect, scaling_queries
from capacity.measure.envelope import EnvelopeRow
from capacity.measure.prometheus import PrometheusClient
from capacity.measure.recommend import current_values
from capacity.measure.report import markdown_report
from capacity.measure.sweep import PointResult
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
    policy, why = current_values(REPO / "Pulumi.dev.yaml", "default")
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


def _constant(value: float) -> PrometheusClient:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("query_range"):
            data = {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, str(value)]]}]}
        else:
            data = {"resultType": "vector", "result": [{"metric": {}, "value": [1, str(value)]}]}
        return httpx.Response(200, json={"status": "success", "data": data})

    return PrometheusClient("http://prom", transport=httpx.MockTransport(handler))


def test_a_triggers_rate_read_from_a_20x_mock_is_per_real_second():
    queries = scaling_queries(signals.Scope("m", "ns"), time_scale=20)
    readings = collect(_constant(13_312), queries, 0, 10, time_scale=20)
    assert readings["promptTokens"].instant == pytest.approx(665.6)  # 13,312 prompt tokens per wall second / 20
    assert readings["queueDepth"].instant == 13_312  # a gauge: no clock in it
    assert readings["e2eLatency"].instant == 13_312  # the mock's histograms already hold model seconds


def test_the_autoscaler_table_shows_additive_signals_per_replica_and_says_its_units():
    queries = scaling_queries(signals.Scope("m", "ns"), time_scale=20)
    readings = collect(_constant(12), queries, 0, 10, time_scale=20)
    row = EnvelopeRow(20, 1.5, 1700, 17, 20)
    report = markdown_report([row], None, "t", "e.png", [PointResult(row, {}, readings, replicas=2, time_scale=20)])
    table = report.split("## What the autoscaler would have seen")[1].splitlines()
    at = next(i for i, line in enumerate(table) if line.startswith("| concurrency"))
    header = [c.strip() for c in table[at].strip("|").split("|")]
    values = dict(zip(header, (c.strip() for c in table[at + 2].strip("|").split("|"))))
    assert values["Queue depth / replica"] == "6.00" and values["KV cache / replica"] == "6.00"  # 12 over 2 replicas
    assert values["Prompt tokens/s / replica"] == "0.30"  # 12 per wall second / 20 / 2 replicas
    assert values["End-to-end (s)"] == "12.00"  # a quantile: the fleet's, not divided
    assert "20x clock" in report and "per replica" in report


def test_the_autoscaler_table_leads_with_the_policys_per_replica_targets():
    queries = scaling_queries(signals.Scope("m", "ns"), time_scale=20)
    readings = collect(_constant(12), queries, 0, 10, time_scale=20)
    row = EnvelopeRow(20, 1.5, 1700, 17, 20)
    policy, _ = current_values(REPO / "Pulumi.dev.yaml", "default")
    point = PointResult(row, {}, readings, replicas=2, time_scale=20)
    report = markdown_report([row], None, "t", "e.png", [point], policy=policy)
    target = next(line for line in report.splitlines() if line.startswith("| target |"))
    cells = [c.strip() for c in target.strip("|").split("|")]
    assert cells[1] == f"{policy.triggers.queue_depth.target_per_replica:g}"  # queue depth per replica
    assert cells[3].endswith("(off)")  # dev's promptTokens trigger is off
