"""A held-out window of one continuous run (`run.since`, `run.held_out`): scored and billed
from the cut, with the fleet the policy built before it."""

import math
from pathlib import Path

import numpy as np
import pytest

from capacity.planning import plan
from capacity.planning.run import RunOptions, feasible_requests, held_out, since
from capacity.planning.stack import apply_config_set, load_stack_model
from capacity.workload.traces import load
from tests.capacity.sim.test_sim_simulator import run

STEP = "synthetic:step:base=0.5,peak=12,at=120,length=600,duration=1500,prompt=256,output=64"


def test_billing_from_the_start_adds_up_to_the_whole_run():
    result = run()
    view, keep = since(result, 0.0)
    assert keep.all()
    assert view.cost_usd == pytest.approx(result.cost_usd)
    assert sum(view.gpu_seconds.values()) == pytest.approx(sum(result.gpu_seconds.values()))


def test_node_spans_bill_exactly_what_the_run_billed():
    result = run(spot_interruptions_per_hour=2.0, seed=3)
    assert sum(n.gpu_seconds for n in result.nodes) == pytest.approx(sum(result.gpu_seconds.values()))


def test_a_window_keeps_only_the_requests_arriving_in_it():
    result = run()
    view, keep = since(result, 700.0)
    assert np.array_equal(keep, result.arrival >= 700.0)
    assert len(view.outcome) == keep.sum() and (view.arrival >= 700.0).all()


def test_a_window_bills_only_gpu_time_after_its_start():
    result = run()
    view, _ = since(result, 700.0)
    expected = sum(max(0.0, n.end - max(n.start, 700.0)) * n.gpus for n in result.nodes)
    assert sum(view.gpu_seconds.values()) == pytest.approx(expected)
    assert 0 < view.cost_usd < result.cost_usd


def test_a_window_counts_only_its_own_scale_events():
    result = run()
    view, _ = since(result, 700.0)
    assert view.scale_events == sum(1 for t in result.scale_times if t >= 700.0) < result.scale_events


def test_a_window_starts_with_the_fleet_built_before_it():
    result = run()
    view, _ = since(result, 400.0)  # inside the peak: the policy has scaled out
    assert view.initial_replicas > 1


ROOT = Path(__file__).resolve().parents[3]
SHARED_TRACE = ROOT.parent / "shared" / "traces" / "azure-llm-2023-conv.csv"


def test_held_out_scores_the_tail_of_one_continuous_run():
    dev = load_stack_model("dev", root=ROOT)
    trace = load("synthetic:step:base=0.3,peak=2,at=120,length=300,duration=900,prompt=256,output=32")
    options = RunOptions()
    summary = held_out(dev, trace, 0.5, options)
    tail = trace.window(trace.duration * 0.5, math.inf)
    assert summary.requests == len(tail)
    assert summary.oracle_gpu_hours is not None and summary.oracle_gpu_hours > 0


def _with_behavior(sm, window: int, pods: int, period: int):
    scope = f"autoscaling.{sm.model.name}.behavior"
    edits = [
        (f"{scope}.scaleUp.stabilizationWindowSeconds", 0),
        (f"{scope}.scaleUp.policies[0].type", "Pods"),
        (f"{scope}.scaleUp.policies[0].value", 4),
        (f"{scope}.scaleUp.policies[0].periodSeconds", 60),
        (f"{scope}.scaleDown.stabilizationWindowSeconds", window),
        (f"{scope}.scaleDown.policies[0].type", "Pods"),
        (f"{scope}.scaleDown.policies[0].value", pods),
        (f"{scope}.scaleDown.policies[0].periodSeconds", period),
    ]
    return apply_config_set(sm, edits)


def test_the_planner_refuses_a_behaviour_the_policy_pack_would_refuse():
    prod = load_stack_model("prod", root=ROOT)
    assert plan.policy_problem(_with_behavior(prod, 600, 1, 300)) is None
    assert "is below 300s" in plan.policy_problem(_with_behavior(prod, 120, 1, 300))
    assert plan.policy_problem(_with_behavior(prod, 600, 8, 60))  # 8/min down, 4/min up


def test_the_policy_minimum_comes_from_the_stacks_policy_config():
    prod = load_stack_model("prod", root=ROOT)
    assert plan.policy_min_scale_down_window(prod) == 300  # policies/config/prod.json


def test_the_warm_replica_floor_comes_from_the_stacks_policy_config():
    assert plan.policy_min_warm_replicas(load_stack_model("prod", root=ROOT)) == 2  # policies/config/prod.json
    assert plan.policy_min_warm_replicas(load_stack_model("dev", root=ROOT)) == 1  # the policy's default


def test_the_planner_refuses_fewer_warm_replicas_than_the_policy_pack_keeps():
    prod = load_stack_model("prod", root=ROOT)
    scope = f"autoscaling.{prod.model.name}"
    lone = apply_config_set(prod, [(f"{scope}.minReplicas", 1), (f"{scope}.fallbackReplicas", 1)])
    assert "interactive-models-keep-a-warm-replica: minReplicas is 1" in plan.policy_problem(lone)
    pair = apply_config_set(prod, [(f"{scope}.minReplicas", 2), (f"{scope}.fallbackReplicas", 2)])
    assert plan.policy_problem(pair) is None


def test_the_search_draws_min_replicas_from_the_warm_replica_floor():
    from capacity.planning.space import distributions

    assert distributions(10, False, [300], min_warm=2)["minReplicas"].low == 2
    assert distributions(10, False, [300])["minReplicas"].low == 1


def test_a_window_with_an_end_bills_nothing_after_it():
    result = run()
    view, _ = since(result, 700.0, 1000.0)
    expected = sum(max(0.0, min(n.end, 1000.0) - max(n.start, 700.0)) * n.gpus for n in result.nodes)
    assert sum(view.gpu_seconds.values()) == pytest.approx(expected)
    assert sum(view.gpu_seconds.values()) < sum(since(result, 700.0)[0].gpu_seconds.values())


def test_every_gpu_type_is_scored_over_the_same_requests_those_some_type_serves():
    # On the shared trace's first 15 minutes the L4 (slower prefill: it sustains 55 dense TFLOPS,
    # the A10G 67; capacity/engine/data/gpus.yaml) cannot serve some 300 requests within the prod
    # 14B's TTFT SLO that the A10G can: an L4 candidate misses them, not drops them.
    prod = load_stack_model("prod", "qwen25-14b-awq", root=ROOT)
    types = {t.gpu: t for t in plan.gpu_types(prod)}
    trace = load(f"{SHARED_TRACE}@0:15m")
    own = {gpu: feasible_requests(plan.on_gpu(prod, kind), trace) for gpu, kind in types.items()}
    servable = plan.servable(prod, trace, types)
    assert (servable == (own["a10g"] | own["l4"])).all()
    assert int(servable.sum() - own["l4"].sum()) > 250 and (servable == own["a10g"]).all()


def test_a_gpu_type_the_stack_cannot_deploy_on_adds_no_servable_requests(monkeypatch):
    prod = load_stack_model("prod", "qwen25-14b-awq", root=ROOT)
    types = {t.gpu: t for t in plan.gpu_types(prod)}
    trace = load("synthetic:step:base=1,peak=1,at=0,length=60,duration=120,prompt=512,output=64")
    real = plan.on_gpu

    def a10g_refused(sm, kind):
        if kind.gpu == "a10g":
            raise ValueError("would not deploy: (test) the flags do not fit")
        return real(sm, kind)

    monkeypatch.setattr(plan, "on_gpu", a10g_refused)
    assert (plan.servable(prod, trace, types) == feasible_requests(real(prod, types["l4"]), trace)).all()
