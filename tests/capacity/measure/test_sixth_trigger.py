"""A sixth trigger, declared as `contract.triggers` and its settings field would declare it, reaches
the collector's queries and the report's columns without either being edited."""

import httpx

from capacity.measure.collector import collect, scaling_queries
from capacity.measure.envelope import EnvelopeRow
from capacity.measure.prometheus import PrometheusClient
from capacity.measure.report import markdown_report
from capacity.measure.sweep import PointResult
from contract.signals import Query, Scope, Vllm
from contract.triggers import TRIGGERS
from tests.sixth_trigger import SIX, SixTriggerAutoscaling, SixTriggers, WaitingNowTrigger

SCOPE = Scope("m")


def test_a_sixth_trigger_is_queried_with_its_own_settings_windows_shrunk_for_a_mock():
    policy = SixTriggerAutoscaling(triggers=SixTriggers(waiting_now=WaitingNowTrigger(window_seconds=120)))
    by_name = {s.name: s.query for s in scaling_queries(SCOPE, policy, time_scale=2, triggers=SIX)}
    assert by_name["waitingNow"] == Query(Vllm.REQUESTS_WAITING, "sum_avg_over_time", 60).promql(SCOPE)
    assert {t.key for t in TRIGGERS if t.query is not None} < set(by_name)


def test_a_sixth_trigger_is_read_from_prometheus_and_becomes_a_report_column():
    sixth = Query(Vllm.REQUESTS_WAITING, "sum_avg_over_time", 30).promql(SCOPE)

    def handler(request: httpx.Request) -> httpx.Response:
        value = "7" if request.url.params["query"] == sixth else "1"
        if request.url.path.endswith("query_range"):
            data = {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, value], [2, value]]}]}
        else:
            data = {"resultType": "vector", "result": [{"metric": {}, "value": [2, value]}]}
        return httpx.Response(200, json={"status": "success", "data": data})

    client = PrometheusClient("http://prom", transport=httpx.MockTransport(handler))
    readings = collect(client, scaling_queries(SCOPE, SixTriggerAutoscaling(), triggers=SIX), 0, 10)
    assert readings["waitingNow"].instant == 7 and readings["waitingNow"].mean == 7

    rows = [EnvelopeRow(1, 0.5, 500, 2, 3), EnvelopeRow(2, 0.9, 900, 2.5, 4)]
    report = markdown_report(rows, None, "t", "e.png", [PointResult(rows[0], {}, readings)], triggers=SIX)
    keda_table = report.split("## What the autoscaler would have seen")[1].splitlines()
    at = next(i for i, line in enumerate(keda_table) if line.startswith("| concurrency"))
    header, values = keda_table[at], keda_table[at + 2]
    assert header.startswith("| concurrency / replica | Queue depth / replica |")
    assert header.endswith("| Waiting now / replica |")
    assert values.startswith("| 1 | 1.00 |") and values.endswith("| 7.00 |")
