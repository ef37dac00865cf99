"""Adding a trigger touches `contract/triggers.py` and its settings field, nothing in
`components/`: a throwaway sixth trigger, declared here with its settings, reaches the
ScaledObject and the capacity dashboard through the same builders the program uses."""

from __future__ import annotations

from dataclasses import replace

from components.observability.dashboards import capacity_panels, dashboards, queries
from contract import signals
from contract.manifests.monitored import MonitoredModel, monitored_models
from contract.manifests.scaled_object import keda_triggers, scaled_object_spec
from contract.settings.stack_file import load_stack
from tests.harness import ROOT
from tests.sixth_trigger import SIX, WAITING_NOW, SixTriggerAutoscaling

URL = "http://prometheus.test:9090"


def with_sixth(target: float = 2.0) -> MonitoredModel:
    """The prod stack's 14B model under the built-in autoscaling defaults (not the planner's
    values), its policy read into the widened settings model. The defaults' 60 s queue-depth
    window keeps the five triggers' queries apart from the sixth's 30 s one."""
    stack = load_stack("prod", ROOT, autoscaling={})
    m = next(m for m in monitored_models(stack) if m.name == "qwen25-14b-awq")
    raw = m.policy.model_dump(by_alias=True)
    raw["triggers"]["waitingNow"] = {"targetPerReplica": target}
    return replace(m, policy=SixTriggerAutoscaling.model_validate(raw))


def test_the_sixth_trigger_reaches_the_scaled_object_after_the_five() -> None:
    m = with_sixth(target=20)
    found = scaled_object_spec(m, URL, SIX)["triggers"]
    assert [t["name"] for t in found] == [*(t["name"] for t in keda_triggers(m, URL)), "waiting-now"]
    running = found[-1]
    assert running["type"] == "prometheus" and running["metricType"] == "AverageValue"
    assert running["metadata"]["threshold"] == "20"
    assert running["metadata"]["query"] == (
        'sum(avg_over_time(vllm:num_requests_waiting{namespace="inference",model_name="qwen25-14b-awq"}[30s]))'
    )


def test_a_disabled_sixth_trigger_is_left_out() -> None:
    m = with_sixth()
    raw = m.policy.model_dump(by_alias=True)
    raw["triggers"]["waitingNow"]["enabled"] = False
    m = replace(m, policy=SixTriggerAutoscaling.model_validate(raw))
    assert "waiting-now" not in {t["name"] for t in keda_triggers(m, URL, SIX)}


def test_the_sixth_trigger_gets_a_capacity_panel_per_replica_against_its_target() -> None:
    m = with_sixth(target=20)
    five, six = capacity_panels(m), capacity_panels(m, SIX)
    assert len(six) == len(five) + 1
    (panel,) = [p for p in six if p["title"] == "Waiting now per replica (KEDA AverageValue)"]
    exprs = [t["expr"] for t in panel["targets"]]
    query = WAITING_NOW.signal(m.policy).promql(m.scope)  # type: ignore[union-attr]  # WAITING_NOW always reads a query
    assert exprs == [signals.per_replica(query, m.workload), signals.constant(20)]
    assert panel["fieldConfig"]["defaults"]["unit"] == "short"


def test_the_capacity_dashboard_carries_the_sixth_triggers_query() -> None:
    settings = load_stack("prod", ROOT)
    m = with_sixth()
    five = dashboards([m], settings.observability, settings.gpu_capacity.pools)["capacity"]
    six = dashboards([m], settings.observability, settings.gpu_capacity.pools, SIX)["capacity"]
    query = WAITING_NOW.signal(m.policy).promql(m.scope)  # type: ignore[union-attr]  # WAITING_NOW always reads a query
    assert signals.per_replica(query, m.workload) in set(queries(six)) - set(queries(five))
