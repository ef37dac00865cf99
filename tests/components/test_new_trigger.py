"""Adding a trigger touches `contract/triggers.py` and its settings field, nothing in
`components/`: a throwaway sixth trigger, declared here with its settings, reaches the
ScaledObject and the capacity dashboard through the same builders the program uses."""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from components.autoscaling.objects import keda_triggers, scaled_object_spec
from components.monitored import MonitoredModel, monitored_models
from components.observability.dashboards import capacity_panels, dashboards, queries
from contract import signals
from contract.settings.autoscaling import ModelAutoscaling, QueueDepthTrigger, Triggers
from contract.settings.stack_file import load_stack
from contract.signals import Query, Vllm
from contract.triggers import TRIGGERS, Trigger
from tests.harness import ROOT

URL = "http://prometheus.test:9090"


class RunningRequestsTrigger(QueueDepthTrigger):
    """Requests in flight per replica, averaged over the window (shaped like the queue trigger)."""

    target_per_replica: float = Field(default=24.0, gt=0)


class TriggersWithRunning(Triggers):
    running_requests: RunningRequestsTrigger = Field(default_factory=RunningRequestsTrigger)


class PolicyWithRunning(ModelAutoscaling):
    triggers: TriggersWithRunning = Field(default_factory=TriggersWithRunning)


RUNNING = Trigger(
    key="runningRequests",
    keda_name="running-requests",
    metric_type="AverageValue",
    why="requests in flight add up across replicas",
    target_key="targetPerReplica",
    query=lambda t: Query(Vllm.REQUESTS_RUNNING, "sum_avg_over_time", t.window_seconds),
    label="Running requests",
    unit="short",
)
SIX = (*TRIGGERS, RUNNING)


def with_running(target: float = 24.0) -> MonitoredModel:
    """The prod stack's 14B model, its merged policy read into the widened settings model."""
    m = next(m for m in monitored_models(load_stack("prod", ROOT)) if m.name == "qwen25-14b-awq")
    raw = m.policy.model_dump(by_alias=True)
    raw["triggers"]["runningRequests"] = {"targetPerReplica": target}
    return replace(m, policy=PolicyWithRunning.model_validate(raw))


def test_the_sixth_trigger_reaches_the_scaled_object_after_the_five() -> None:
    m = with_running(target=20)
    found = scaled_object_spec(m, URL, SIX)["triggers"]
    assert [t["name"] for t in found] == [*(t["name"] for t in keda_triggers(m, URL)), "running-requests"]
    running = found[-1]
    assert running["type"] == "prometheus" and running["metricType"] == "AverageValue"
    assert running["metadata"]["threshold"] == "20"
    assert running["metadata"]["query"] == (
        'sum(avg_over_time(vllm:num_requests_running{namespace="inference",model_name="qwen25-14b-awq"}[60s]))'
    )


def test_a_disabled_sixth_trigger_is_left_out() -> None:
    m = with_running()
    raw = m.policy.model_dump(by_alias=True)
    raw["triggers"]["runningRequests"]["enabled"] = False
    m = replace(m, policy=PolicyWithRunning.model_validate(raw))
    assert "running-requests" not in {t["name"] for t in keda_triggers(m, URL, SIX)}


def test_the_sixth_trigger_gets_a_capacity_panel_per_replica_against_its_target() -> None:
    m = with_running(target=20)
    five, six = capacity_panels(m), capacity_panels(m, SIX)
    assert len(six) == len(five) + 1
    (panel,) = [p for p in six if p["title"] == "Running requests per replica (KEDA AverageValue)"]
    exprs = [t["expr"] for t in panel["targets"]]
    query = RUNNING.signal(m.policy).promql(m.scope)  # type: ignore[union-attr]
    assert exprs == [signals.per_replica(query, m.workload), signals.constant(20)]
    assert panel["fieldConfig"]["defaults"]["unit"] == "short"


def test_the_capacity_dashboard_carries_the_sixth_triggers_query() -> None:
    settings = load_stack("prod", ROOT)
    capacity = dashboards([with_running()], settings.observability, settings.gpu_capacity.pools, SIX)["capacity"]
    assert any(Vllm.REQUESTS_RUNNING in q and "avg_over_time" in q for q in queries(capacity))
