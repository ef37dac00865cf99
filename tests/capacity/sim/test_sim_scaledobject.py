"""Raw KEDA ScaledObjects become the simulator's plain data with KEDA v2.20.2's defaults
(`apis/keda/v1alpha1/scaledobject_types.go`, `withtriggers_types.go`, `scale_executor.go`,
`pkg/scalers/prometheus_scaler.go`) and the API server's HPA behavior defaults
(`pkg/apis/autoscaling/v2/defaults.go`); the reference policies replay; bad input names its key."""

from pathlib import Path

import numpy as np
import pytest

from capacity.sim.control.hpa import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, HpaScalingPolicy
from capacity.sim.control.keda import KedaTrigger
from capacity.planning.stack import load_stack_model
from capacity.planning.run import RunOptions, feasible_requests, run_scaled_object, summarize
from capacity.sim.scaledobject import read_scaled_object
from capacity.sim.simulator import READY, SimConfig, Simulation, _Pod
from capacity.workload.traces import load
from contract.signals import Query, Vllm
from tests.capacity.sim.test_sim_sixth_trigger import TOY

ROOT = Path(__file__).resolve().parents[3]
REFERENCES = ROOT / "capacity" / "policies" / "reference"
MINIMAL = """
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: minimal}
spec:
  scaleTargetRef: {name: predictor}
  triggers:
    - type: prometheus
      metadata: {serverAddress: "http://p:9090", query: "sum(vllm:num_requests_waiting)", threshold: "4"}
"""


def manifest(tmp_path, text: str) -> Path:
    path = tmp_path / "so.yaml"
    path.write_text(text)
    return path


def test_unset_fields_take_keda_and_kubernetes_defaults(tmp_path):
    so = read_scaled_object(manifest(tmp_path, MINIMAL))
    assert (so.min_replicas, so.max_replicas) == (0, 100)
    assert (so.polling_interval_seconds, so.cooldown_period_seconds) == (30, 300)
    assert so.behavior.scale_up == DEFAULT_SCALE_UP and so.behavior.scale_down == DEFAULT_SCALE_DOWN
    assert so.fallback is None
    (trigger,) = so.triggers
    assert trigger == KedaTrigger("s0-prometheus", "AverageValue", 4.0, 0.0, Query(Vllm.REQUESTS_WAITING, "sum"), True)


def test_a_rule_set_with_only_a_window_keeps_the_default_policies(tmp_path):
    text = MINIMAL.replace(
        "  triggers:",
        "  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n        scaleDown: {stabilizationWindowSeconds: 60}\n  triggers:",
    )
    down = read_scaled_object(manifest(tmp_path, text)).behavior.scale_down
    assert down.stabilization_window_seconds == 60 and down.policies == DEFAULT_SCALE_DOWN.policies


def test_the_benchmark_derived_reference_reads_as_the_issue_states_it():
    so = read_scaled_object(REFERENCES / "benchmark-derived.yaml")
    assert (so.min_replicas, so.max_replicas, so.polling_interval_seconds, so.cooldown_period_seconds) == (1, 6, 15, 180)
    assert [(t.metric_type, t.target) for t in so.triggers] == [("AverageValue", 2.0), ("AverageValue", 0.75), ("Value", 30.0)]
    assert so.behavior.scale_up.policies == (HpaScalingPolicy("Percent", 100, 30),)
    assert so.behavior.scale_down.stabilization_window_seconds == 300


@pytest.mark.parametrize("name", ["benchmark-derived", "local-lab", "karpenter-article"])
def test_each_reference_policy_scales_the_stack_model_on_a_load_step(name):
    sm = load_stack_model("dev", profile="8gb-qwen2.5-1.5b", root=ROOT)
    trace = load("synthetic:step:base=2,peak=60,at=120,length=600,duration=1200,prompt=512,output=256")
    result = run_scaled_object(sm, read_scaled_object(REFERENCES / f"{name}.yaml"), trace, RunOptions())
    assert max(result.timeline.desired) > 1
    assert summarize(result, sm, feasible_requests(sm, trace)).slo_attainment > 0


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (("sum(vllm:num_requests_waiting)", "count(vllm:num_requests_waiting)"), "spec.triggers[0].metadata.query"),
        (("sum(vllm:num_requests_waiting)", "sum by (pod) (vllm:num_requests_waiting)"), "spec.triggers[0].metadata.query"),
        (("type: prometheus", "type: kafka"), "spec.triggers[0].type"),
        (('threshold: "4"', 'threshold: "four"'), "spec.triggers[0].metadata.threshold"),
        (("  triggers:", "  idleReplicaCount: 0\n  triggers:"), "spec.idleReplicaCount"),
        (("  triggers:", "  advanced:\n    scalingModifiers: {formula: a}\n  triggers:"), "spec.advanced.scalingModifiers"),
        (("  triggers:", "  minReplicaCount: 5\n  maxReplicaCount: 2\n  triggers:"), "spec.minReplicaCount"),
    ],
)
def test_what_the_simulator_cannot_replay_is_one_line_naming_the_key(tmp_path, edit, key):
    path = manifest(tmp_path, MINIMAL.replace(*edit))
    with pytest.raises(ValueError) as error:
        read_scaled_object(path)
    assert str(error.value).startswith(f"ScaledObject {path}: {key}") and "\n" not in str(error.value)


def test_a_file_without_a_scaledobject_is_refused(tmp_path):
    with pytest.raises(ValueError, match="exactly one document of kind ScaledObject"):
        read_scaled_object(manifest(tmp_path, "kind: Deployment\n"))


def two_pods(kv: tuple[float, float]) -> Simulation:
    """A simulation with two ready pods whose last scrape recorded these KV fractions."""
    config = SimConfig(profile=TOY, pools=(), startup=None)  # type: ignore[arg-type]
    sim = Simulation(config, load("synthetic:step:base=1,peak=1,at=0,length=1,duration=10"), None)
    for i, value in enumerate(kv):
        pod = _Pod(i)
        pod.phase, pod.t, pod.kv, pod.waiting = READY, [0.0, 15.0], [0.0, value], [float(i), 3.0]
        sim.pods.append(pod)
    return sim


@pytest.mark.parametrize(("aggregation", "value"), [("sum", 1.0), ("avg", 0.5), ("max", 0.8), ("min", 0.2)])
def test_an_aggregation_across_replicas_is_evaluated_like_prometheus(aggregation, value):
    sim = two_pods((0.2, 0.8))
    read = sim._reader(KedaTrigger("kv", "AverageValue", 1.0, source=Query(Vllm.KV_CACHE_USAGE, "sum", aggregation=aggregation)))
    assert read(20.0) == pytest.approx(value)


def test_max_over_time_holds_the_peak_of_each_series_in_the_window():
    sim = two_pods((0.2, 0.8))
    read = sim._reader(KedaTrigger("q", "AverageValue", 1.0, source=Query(Vllm.REQUESTS_WAITING, "sum_max_over_time", 60)))
    assert read(20.0) == 6.0  # max(0, 3) + max(1, 3)


def test_an_empty_result_fails_unless_ignore_null_values_reads_it_as_zero():
    sim = two_pods((0.2, 0.8))
    query = Query(Vllm.E2E_LATENCY, "quantile", 60, 0.99, zero_when_empty=False)
    sim.pods[0].e2e_counts = sim.pods[1].e2e_counts = [(0,) * 22, (0,) * 22]
    assert np.isnan(sim._reader(KedaTrigger("e2e", "Value", 30.0, source=query))(20.0))
    assert sim._reader(KedaTrigger("e2e", "Value", 30.0, source=query, ignore_null_values=True))(20.0) == 0.0
