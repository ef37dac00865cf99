"""Half and double of each committed threshold on the held-out traffic: which leaves are
thresholds, how a value is varied, that the contract decides what deploys, and the runs."""

from pathlib import Path

import pytest

from capacity.planning import sensitivity
from capacity.planning.days import plan_parts
from capacity.planning.run import RunOptions, held_out_parts
from capacity.planning.stack import apply_config_set, load_stack_model
from capacity.workload import traces
from contract.settings.config_path import ConfigRemove
from tests.stacks import unplanned

ROOT = Path(__file__).resolve().parents[3]
TRACE = "synthetic:step:base=1,peak=4,at=200,length=200,duration=600,prompt=256,output=64"
MEASURED = "8gb-qwen2.5-1.5b"  # a measured profile of dev's model: its engine flags are not varied


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    # dev's default scope only (minReplicas 1, maxReplicas 3, TTFT off), on the measured profile
    return load_stack_model(str(unplanned("dev", tmp_path_factory.mktemp("dev"))), profile=MEASURED, root=ROOT)


@pytest.fixture(scope="module")
def prod():
    return load_stack_model("prod", root=ROOT)


def threshold(sm, name: str) -> sensitivity.Threshold:
    return next(t for t in sensitivity.thresholds(sm) if t.name == name)


def test_the_slo_and_a_disabled_triggers_settings_are_not_thresholds(dev):
    names = {t.name for t in sensitivity.thresholds(dev)}
    assert not any(n.startswith("slo.") for n in names)
    assert "triggers.ttft.enabled" in names and "triggers.ttft.thresholdSeconds" not in names


def test_engine_flags_are_thresholds_at_the_models_config_path(prod):
    seven = load_stack_model("prod", "qwen25-7b-awq", root=ROOT)
    seqs = threshold(seven, "engine.maxNumSeqs")
    assert (seqs.path, seqs.value, seqs.set_in) == (
        "models[1].engine.maxNumSeqs",
        seven.model.engine.max_num_seqs,
        "models[1].engine.maxNumSeqs",
    )
    assert threshold(prod, "engine.maxNumSeqs").path == "models[0].engine.maxNumSeqs"


def test_a_value_is_set_in_the_models_block_the_default_block_or_built_in(prod):
    blocks = apply_config_set(
        prod,
        [
            ("autoscaling.default.minReplicas", 2),
            ("autoscaling.qwen25-14b-awq.maxReplicas", 10),
            ConfigRemove("autoscaling.qwen25-14b-awq.minReplicas"),
            ConfigRemove("autoscaling.qwen25-14b-awq.fallbackReplicas"),
            ConfigRemove("autoscaling.default.pollingIntervalSeconds"),
            ConfigRemove("autoscaling.qwen25-14b-awq.pollingIntervalSeconds"),
        ],
    )
    assert threshold(blocks, "maxReplicas").set_in == "autoscaling.qwen25-14b-awq.maxReplicas"
    assert threshold(blocks, "minReplicas").set_in == "autoscaling.default.minReplicas"
    assert threshold(blocks, "pollingIntervalSeconds").set_in is None


def test_a_triggers_target_says_what_it_is_for_and_why_its_metric_type(dev):
    purpose = threshold(dev, "triggers.e2eLatency.thresholdSeconds").purpose
    assert purpose.startswith("end-to-end latency at that quantile") and "Value: a quantile is not additive" in purpose


def test_a_boolean_is_flipped_not_halved(dev):
    (variant,) = sensitivity.variants(dev, threshold(dev, "triggers.kvCache.enabled"))
    assert (variant.label, variant.value) == ("flipped", False)


def test_an_integer_is_rounded_and_never_below_its_fields_floor(dev):
    half, double = sensitivity.variants(dev, threshold(dev, "fallbackReplicas"))  # 1, ge=1
    assert (half.value, double.value) == (1, 2)
    half, _ = sensitivity.variants(dev, threshold(dev, "minReplicas"))  # 1, ge=0
    assert half.value == 0


def test_a_leaf_inside_a_list_sets_the_whole_merged_list_and_deploys(dev):
    _, double = sensitivity.variants(dev, threshold(dev, "behavior.scaleUp.policies[0].value"))
    ((path, value),) = double.edits
    merged = [
        {"type": p.type, "value": p.value, "periodSeconds": p.period_seconds}
        for p in dev.policy.behavior.scale_up.policies
    ]
    merged[0]["value"] *= 2
    assert path == "autoscaling.qwen25-1p5b.behavior.scaleUp.policies"
    assert value == merged
    assert apply_config_set(dev, double.edits).policy.behavior.scale_up.policies[0].value == merged[0]["value"]


def test_a_measured_engine_profile_keeps_its_flags(dev):
    assert f"{MEASURED} is measured" in sensitivity.engine_refusal(dev)


def test_a_physics_profile_varies_its_flags():
    assert sensitivity.engine_refusal(load_stack_model("prod", "qwen25-7b-awq", root=ROOT)) is None


@pytest.fixture(scope="module")
def explained(dev):
    return sensitivity.explain(dev, plan_parts(traces.load(TRACE), 1, 0.5)[1], RunOptions(), workers=2)


def outcomes(explained, name: str) -> list[sensitivity.Outcome]:
    return next(o for t, o in explained.rows if t.name == name)


def test_a_refused_half_value_shows_the_contracts_reason_instead_of_numbers(explained):
    half, _ = outcomes(explained, "minReplicas")  # 1 -> 0: nothing wakes a model at zero without cron
    assert half.summary is None and half.reason.startswith("would not deploy: ")
    assert "minReplicas (0) needs triggers.cron.enabled" in half.reason


def test_every_simulated_variant_reports_attainment_cost_and_gpu_hours(explained):
    ran = [o.summary for _, row in explained.rows for o in row if o.summary]
    assert ran and all({"slo_attainment", "cost_usd", "gpu_hours"} <= set(s.as_dict()) for s in ran)
    assert {"slo_attainment", "cost_usd", "gpu_hours"} <= set(explained.baseline.as_dict())


def test_a_value_that_rounds_to_itself_is_not_simulated(explained):
    half, double = outcomes(explained, "behavior.scaleUp.stabilizationWindowSeconds")  # 0
    assert half.reason == double.reason == sensitivity.SAME_VALUE


def test_more_replicas_at_once_cost_no_less_on_a_step(explained):
    _, double = outcomes(explained, "minReplicas")
    assert double.summary.gpu_hours >= explained.baseline.gpu_hours


def test_an_engine_flag_variant_carries_the_refusal_when_the_profile_cannot_be_varied(explained):
    assert all(o.reason == explained.engine_refusal for o in outcomes(explained, "engine.maxNumSeqs"))


def test_an_engine_flag_variant_runs_on_the_profile_rederived_with_it():
    seven = load_stack_model("prod", "qwen25-7b-awq", root=ROOT)  # a physics profile
    busy = traces.load("synthetic:step:base=4,peak=16,at=200,length=300,duration=700,prompt=1024,output=256")
    half, _ = sensitivity.variants(seven, threshold(seven, "engine.maxNumSeqs"))  # half the sequences per replica
    held = plan_parts(busy, 1, 0.3)[1]
    run = sensitivity.outcome(seven, half, held, RunOptions())
    assert run.reason is None
    assert apply_config_set(seven, half.edits).profile.max_num_seqs == seven.model.engine.max_num_seqs // 2
    assert run.summary != held_out_parts(seven, held, RunOptions(), oracle=False)
