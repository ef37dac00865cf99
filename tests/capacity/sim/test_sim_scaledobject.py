"""Raw KEDA ScaledObjects become the simulator's plain data with KEDA v2.20.2's defaults
(`apis/keda/v1alpha1/scaledobject_types.go`, `withtriggers_types.go`, `scale_executor.go`,
`pkg/scalers/prometheus_scaler.go`) and the API server's HPA behavior defaults
(`pkg/apis/autoscaling/v2/defaults.go`); the reference policies replay; bad input names its key."""

from pathlib import Path

import pytest

from capacity.planning.run import RunOptions, feasible_requests, run_scaled_object, sim_config, summarize
from capacity.planning.stack import load_stack_model
from capacity.sim.control.hpa import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, HpaScalingPolicy
from capacity.sim.control.keda import KedaTrigger
from capacity.sim.scaledobject import read_scaled_object
from capacity.sim.simulator import Simulation
from capacity.workload.traces import load
from contract.signals import Query, Vllm

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
    assert (so.min_replicas, so.max_replicas, so.polling_interval_seconds, so.cooldown_period_seconds) == (
        1,
        6,
        15,
        180,
    )
    assert [(t.metric_type, t.target) for t in so.triggers] == [
        ("AverageValue", 2.0),
        ("AverageValue", 0.75),
        ("Value", 30.0),
    ]
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
        (
            ("sum(vllm:num_requests_waiting)", "sum by (pod) (vllm:num_requests_waiting)"),
            "spec.triggers[0].metadata.query",
        ),
        (("type: prometheus", "type: kafka"), "spec.triggers[0].type"),
        (('threshold: "4"', 'threshold: "four"'), "spec.triggers[0].metadata.threshold"),
        (("  triggers:", "  idleReplicaCount: 0\n  triggers:"), "spec.idleReplicaCount"),
        (
            ("  triggers:", "  advanced:\n    scalingModifiers: {formula: a}\n  triggers:"),
            "spec.advanced.scalingModifiers",
        ),
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


# --- label matchers: the series a query selects ------------------------------------------------
# A PromQL equality matcher keeps the series whose label has that value, and `label=""` those
# without the label (prometheus/model/labels/matcher.go `Matches`). A query selecting no series
# returns an empty result, which KEDA's Prometheus scaler reads as 0 with ignoreNullValues (its
# default, true) and as an error without it (pkg/scalers/prometheus_scaler.go `ExecutePromQuery`:
# "prometheus metrics 'prometheus' target may be lost, the result is empty").
STEP = "synthetic:step:base=2,peak=60,at=120,length=600,duration=1200,prompt=512,output=256"
SELECTED = MINIMAL.replace("sum(vllm:num_requests_waiting)", "sum(vllm:num_requests_waiting{model_name=MODEL})")


def replay(tmp_path, text: str):
    sm = load_stack_model("dev", profile="8gb-qwen2.5-1.5b", root=ROOT)
    return run_scaled_object(sm, read_scaled_object(manifest(tmp_path, text)), load(STEP), RunOptions())


def test_a_query_for_the_models_own_name_reads_its_series(tmp_path):
    result = replay(tmp_path, SELECTED.replace("MODEL", "'qwen25-1p5b'"))
    assert max(result.timeline.desired) > 1


def test_a_query_for_a_model_that_does_not_exist_reads_no_series_and_so_0(tmp_path):
    result = replay(tmp_path, SELECTED.replace("MODEL", "'no-such-model'"))
    assert max(result.timeline.desired) == 1  # minReplicaCount 0 -> one replica, never more


def test_a_query_selecting_no_series_fails_without_ignore_null_values(tmp_path):
    text = SELECTED.replace("MODEL", "'no-such-model'").replace(
        'threshold: "4"', 'threshold: "4", ignoreNullValues: "false"'
    )
    path = manifest(tmp_path, text)
    sm = load_stack_model("dev", profile="8gb-qwen2.5-1.5b", root=ROOT)
    so = read_scaled_object(path).scaled_object()
    config = sim_config(sm, RunOptions(), 1)
    readings = Simulation(config, load(STEP), so).read_scalers(0.0)
    assert readings["s0-prometheus"].error == "prometheus metrics 'prometheus' target may be lost, the result is empty"


def test_an_empty_label_matcher_selects_series_without_that_label(tmp_path):
    result = replay(tmp_path, SELECTED.replace("MODEL", "'qwen25-1p5b', pod_template=''"))
    assert max(result.timeline.desired) > 1


def test_a_matcher_on_a_label_the_simulated_series_do_not_carry_is_refused_by_name(tmp_path):
    with pytest.raises(
        ValueError,
        match=r"trigger 's0-prometheus' selects job='vllm': the simulated series carry only model_name='qwen25-1p5b', namespace=",
    ):
        replay(tmp_path, SELECTED.replace("MODEL", "'qwen25-1p5b', job='vllm'"))
