"""A sixth trigger, declared only as a `contract.triggers.Trigger` plus its settings field, is
simulated, plotted and tuned without editing the simulator, its report or the tuner."""

import pytest

from capacity.planning.report import plot_timeline
from capacity.planning.stack import scaled_object
from capacity.planning.tune import _knobs
from capacity.sim.cluster.startup import Pool, Startup
from capacity.sim.simulator import SimConfig, simulate
from capacity.workload.traces import load
from contract.signals import Query, Vllm
from contract.triggers import TRIGGERS, Trigger
from tests.capacity.sim.toy import STEP, TOY
from tests.sixth_trigger import SIX, WAITING_NOW, SixTriggerAutoscaling


def only_the_sixth(**overrides) -> SixTriggerAutoscaling:
    """The five declared triggers off, the sixth on (no fallback: it needs the queue trigger)."""
    off = {t.key: {"enabled": False} for t in TRIGGERS}
    return SixTriggerAutoscaling.model_validate(
        {
            "minReplicas": 1,
            "maxReplicas": 6,
            "fallbackReplicas": None,
            "triggers": {**off, WAITING_NOW.key: {"targetPerReplica": 2}},
            "behavior": {
                "scaleDown": {
                    "stabilizationWindowSeconds": 60,
                    "policies": [{"type": "Pods", "value": 1, "periodSeconds": 30}],
                }
            },
            **overrides,
        }
    )


def run(policy, triggers=SIX):
    config = SimConfig(
        profile=TOY, pools=(Pool("gpu-spot", "spot", 100, 6, 0.5),), startup=Startup((60, 60), (60, 60), 10.0, (20, 20))
    )
    return simulate(config, load(STEP), scaled_object(policy, triggers))


def test_the_sixth_trigger_becomes_a_keda_trigger_with_its_query():
    (trigger,) = scaled_object(only_the_sixth(), SIX).triggers
    assert (trigger.name, trigger.metric_type, trigger.target) == ("waiting-now", "AverageValue", 2.0)
    assert trigger.source == Query(Vllm.REQUESTS_WAITING, "sum_avg_over_time", 30)


def test_the_sixth_trigger_alone_scales_a_load_step_out_and_back_in(tmp_path):
    result = run(only_the_sixth())
    tl = result.timeline
    assert set(tl.signals) == {"waiting-now"}
    assert max(tl.signals["waiting-now"]) > 2  # waiting requests summed over the pods
    assert max(tl.desired) > 1 and tl.desired[-1] < max(tl.desired)
    png = plot_timeline(
        result, tmp_path / "t.png", "sixth trigger", {"ttft_p95_s": 2.0, "tpot_p95_s": 0.1, "e2e_p99_s": None}
    )
    assert png.stat().st_size > 10_000


def test_the_tuner_searches_the_sixth_triggers_target():
    paths = [path for path, _, _ in _knobs(only_the_sixth(), SIX)]
    assert paths[0] == "triggers.waitingNow.targetPerReplica"
    _, candidates, current = _knobs(only_the_sixth(), SIX)[0]
    assert list(candidates(only_the_sixth())) == [1, 2, 4] and current(only_the_sixth()) == 2.0


def test_a_query_on_a_metric_the_simulator_does_not_record_is_refused_by_name():
    preemptions = Trigger(
        key="waitingNow",
        keda_name="waiting-now",
        metric_type="AverageValue",
        why="-",
        target_key="targetPerReplica",
        query=lambda t: Query(Vllm.PREEMPTIONS, "sum"),
        label="Preemptions",
        unit="short",
    )
    with pytest.raises(
        ValueError, match=r"reads vllm:num_preemptions_total \(sum\), which the simulator does not record"
    ):
        run(only_the_sixth(), (*TRIGGERS, preemptions))
