"""The stack file as the simulator reads it: thresholds, pools, startup, policy files, errors."""

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from capacity.engine.hardware import gpus
from capacity.planning.run import RunOptions, feasible_requests, run_policy, sim_config, summarize
from capacity.planning.stack import (
    StackModel,
    apply_config_set,
    gpu_type_edits,
    load_stack_model,
    pool_families,
    with_headroom,
    with_start_features,
)
from capacity.workload.traces import load
from contract.gpu import GPU_OF_FAMILY
from contract.settings.config_path import ConfigRemove
from contract.settings.gpu_capacity import duration_seconds
from tests.docs.pages import read

ROOT = Path(__file__).resolve().parents[3]
PROFILE = "8gb-qwen2.5-1.5b"


def dev(**kwargs):
    return load_stack_model("dev", profile=PROFILE, root=ROOT, **kwargs)


def dev_config() -> dict:
    return yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())


def stack_file(tmp_path: Path, config: dict) -> str:
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_thresholds_come_from_the_stack_file_through_the_settings_models(tmp_path):
    stack = dev_config()
    autoscaling = stack["config"]["inference-platform:autoscaling"]
    autoscaling["default"] = {"maxReplicas": 2, "triggers": {"queueDepth": {"targetPerReplica": 6}}}
    autoscaling["qwen25-1p5b"] = {"triggers": {"queueDepth": {"targetPerReplica": 5}}}
    sm = load_stack_model(stack_file(tmp_path, stack), profile=PROFILE)
    assert sm.policy.max_replicas == 2  # the default block's
    assert sm.policy.triggers.queue_depth.target_per_replica == 5  # the model's block over the default's


def test_startup_prices_and_pools_come_from_the_stack():
    sm = dev()
    planning = dev_config()["config"]["inference-platform:capacityPlanning"]
    engine = planning["startup"]["engineInitSeconds"]  # the one startup figure dev sets itself
    assert sm.startup.engine_init_s == (engine["min"], engine["max"])
    prices = planning["gpuHourlyPriceUsd"]
    assert {p.name: p.price_per_gpu_hour for p in sm.pools} == {
        "gpu-spot": prices["spot"],
        "gpu-on-demand": prices["onDemand"],
    }


def test_a_policy_file_is_laid_over_the_stack_section_key_by_key(tmp_path):
    policy = tmp_path / "p.yaml"
    own = load_stack_model("prod", "qwen25-7b-awq", root=ROOT).policy
    assert own.max_replicas > own.min_replicas
    policy.write_text(yaml.safe_dump({"qwen25-7b-awq": {"maxReplicas": own.min_replicas}}))
    overlaid = load_stack_model("prod", "qwen25-7b-awq", policy_file=policy, root=ROOT).policy
    assert overlaid.max_replicas == own.min_replicas
    # one key changed = one key changed: bounds, triggers, behaviour and SLO stay the stack's
    assert overlaid.model_dump(exclude={"max_replicas"}) == own.model_dump(exclude={"max_replicas"})


def test_a_compared_policy_file_may_carry_config_edits_beside_its_autoscaling_section(tmp_path):
    """compare's files: `config:` edits (warm headroom here) applied before the policy overlay."""
    policy = tmp_path / "p.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "config": {
                    "gpuCapacity.headroom.placeholders": 2,
                    "gpuCapacity.headroom.model": "qwen25-14b-awq",
                    "autoscaling.qwen25-14b-awq.maxReplicas": 32,
                },
                "autoscaling": {"qwen25-14b-awq": {"minReplicas": 5}},
            }
        )
    )
    edited = load_stack_model("prod", "qwen25-14b-awq", root=ROOT).with_policy_file(policy)
    assert (edited.headroom, edited.policy.max_replicas, edited.policy.min_replicas) == (2, 32, 5)


def test_config_edits_that_would_not_deploy_are_refused_naming_the_file(tmp_path):
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump({"config": {"gpuCapacity.headroom.placeholders": 3}}))
    with pytest.raises(
        ValueError, match=r"policy file .*p.yaml does not validate against stack prod: would not deploy"
    ):
        load_stack_model("prod", "qwen25-14b-awq", root=ROOT).with_policy_file(policy)


def test_a_plans_policy_file_refuses_config_edits_by_name(tmp_path):
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump({"config": {"gpuCapacity.headroom.placeholders": 1}}))
    with pytest.raises(ValueError, match="`config:` edits are read by compare only"):
        dev(policy_file=policy)


def test_a_policy_file_without_slo_is_judged_by_the_stack_slo(tmp_path):
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump({"default": {"triggers": {"queueDepth": {"targetPerReplica": 1}}}}))
    assert dev(policy_file=policy).policy.slo == dev().policy.slo
    assert dev().policy.slo.ttft_p95_seconds == 1.0  # dev's own, not the built-in 2.5 s


def test_a_policy_file_replaces_lists_whole_as_the_stack_file_does(tmp_path):
    policy = tmp_path / "p.yaml"
    scale_up = [{"type": "Percent", "value": 100, "periodSeconds": 30}]
    policy.write_text(yaml.safe_dump({"qwen25-1p5b": {"behavior": {"scaleUp": {"policies": scale_up}}}}))
    rules = dev(policy_file=policy).policy.behavior.scale_up.policies
    assert [r.model_dump(by_alias=True, mode="json") for r in rules] == scale_up


def test_a_policy_that_would_not_deploy_is_refused_with_its_key_path(tmp_path):
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump({"default": {"minReplicas": 3, "maxReplicas": 2}}))
    with pytest.raises(ValueError, match=r"autoscaling.default.maxReplicas \(2\) must be >= minReplicas \(3\)"):
        dev(policy_file=policy)


def test_unknown_model_lists_the_stack_models():
    with pytest.raises(ValueError, match=r"model 'nope' is not in stack Pulumi.dev.yaml; models: \['qwen25-1p5b'\]"):
        dev(model="nope")


def test_an_unknown_capacity_profile_in_the_stack_names_its_key(tmp_path):
    stack = dev_config()
    model = stack["config"]["inference-platform:models"][0]
    model.pop("instanceFamilies", None)  # unpinned: no GPU for the profile's name to match
    model["capacityProfile"] = "no-such-profile"
    with pytest.raises(ValueError, match=r"models\[0\].capacityProfile \('no-such-profile'\): unknown engine profile"):
        load_stack_model(stack_file(tmp_path, stack))


def test_consolidate_after_comes_from_each_nodepool():
    sm = load_stack_model("prod", profile=PROFILE, root=ROOT)
    prod = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]["inference-platform:gpuCapacity"]["pools"]
    expected = {p["name"]: duration_seconds(p.get("consolidateAfter", "10m")) for p in prod}
    assert {p.name: p.consolidate_after_s for p in sm.pools} == expected


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("15m", 900), ("1h30m", 5400), ("Never", float("inf"))])
def test_karpenter_durations_in_seconds(text, seconds):
    assert duration_seconds(text) == seconds


def pinned_dev(*families: str) -> StackModel:
    """Dev with its model pinned to `families` and no capacity profile (the simulator's is PROFILE);
    both pools also launch g6e."""
    edits = [(f"models[0].instanceFamilies[{k}]", f) for k, f in enumerate(families)]
    edits += [(f"gpuCapacity.pools[{i}].instanceFamilies[2]", "g6e") for i in (0, 1)]
    edits.append(ConfigRemove("models[0].capacityProfile"))
    return apply_config_set(dev(), edits)


def raw_families(sm: StackModel) -> list[str] | None:
    return sm.source.config["inference-platform:models"][0].get("instanceFamilies")


def test_every_gpu_a_family_carries_has_an_engine_datasheet():
    assert set(GPU_OF_FAMILY.values()) <= set(gpus())


def test_gpu_type_edits_set_the_family_and_the_profile_of_an_unpinned_model():
    edits = gpu_type_edits(dev(), "g6", "l4-qwen2.5-1.5b")
    assert edits == [("models[0].instanceFamilies[0]", "g6"), ("models[0].capacityProfile", "l4-qwen2.5-1.5b")]
    deployed = apply_config_set(dev(), edits)
    assert raw_families(deployed) == deployed.model.instance_families == ["g6"]
    assert deployed.model.capacity_profile == "l4-qwen2.5-1.5b"


def test_gpu_type_edits_shorten_a_longer_pin_from_its_end():
    # Removing [1] first would shift the tail down and leave [g6e, g6e].
    sm = pinned_dev("g5", "g6", "g6e")
    edits = gpu_type_edits(sm, "g6e", "l40s-qwen2.5-1.5b")
    assert edits[:3] == [
        ("models[0].instanceFamilies[0]", "g6e"),
        ConfigRemove("models[0].instanceFamilies[2]"),
        ConfigRemove("models[0].instanceFamilies[1]"),
    ]
    assert raw_families(apply_config_set(sm, edits)) == ["g6e"]


def test_gpu_type_edits_that_would_not_deploy_are_refused_naming_the_key():
    with pytest.raises(ValueError, match=r"models\[0\].capacityProfile \('a10g-qwen2.5-1.5b'\) must model the GPU"):
        apply_config_set(dev(), gpu_type_edits(dev(), "g6", "a10g-qwen2.5-1.5b"))


def test_config_rm_of_a_missing_path_changes_nothing():
    sm = apply_config_set(dev(), [ConfigRemove("models[0].instanceFamilies[3]"), ConfigRemove("network.nothing")])
    assert sm.source.config == dev().source.config


def test_a_pool_that_launches_none_of_the_pinned_families_never_hosts_the_model():
    # On-demand launches only g5: a g6-pinned model runs on spot alone (2 GPUs, so maxReplicas 2).
    sm = apply_config_set(
        dev(),
        [
            ConfigRemove("gpuCapacity.pools[1].instanceFamilies[1]"),
            ("autoscaling.qwen25-1p5b.maxReplicas", 2),
            *gpu_type_edits(dev(), "g6", "l4-qwen2.5-1.5b"),
        ],
    )
    assert [p.name for p in sm.pools] == ["gpu-spot"]


def test_pool_families_offer_every_family_the_pools_allow_whatever_the_pin():
    prod = load_stack_model("prod", profile=PROFILE, root=ROOT)
    prod = apply_config_set(prod, gpu_type_edits(prod, "g5", "a10g-r1-14b-awq"))
    assert prod.model.instance_families == ["g5"]
    assert pool_families(prod) == {"gpu-spot": ("g5", "g6"), "gpu-on-demand": ("g5", "g6")}
    assert [p.name for p in prod.pools] == ["gpu-spot", "gpu-on-demand"]


def test_the_documented_example_policy_changes_only_the_keys_it_sets():
    example = ROOT / "docs" / "examples" / "candidate-policy.yaml"
    assert example.name in read("tasks/simulate-and-compare.md")
    own = load_stack_model("prod", "qwen25-14b-awq", root=ROOT).policy
    overlaid = load_stack_model("prod", "qwen25-14b-awq", policy_file=example, root=ROOT).policy
    assert own.triggers.trend.enabled and not overlaid.triggers.trend.enabled
    trend_off = own.model_copy(update={"triggers": own.triggers.model_copy(update={"trend": overlaid.triggers.trend})})
    assert overlaid.model_dump() == trend_off.model_dump()


# --- start features and warm headroom (docs/tasks/fast-starts-and-headroom.md) --------------------------

STARTUP_KEYS = ("nodeProvisioningSeconds", "imagePullSeconds", "weightLoadGiBPerSecond", "engineInitSeconds")


def without_startup_keys(sm: StackModel) -> StackModel:
    """The stack with no measured startup figure of its own: every one follows from its features."""
    return apply_config_set(sm, [ConfigRemove(f"capacityPlanning.startup.{key}") for key in STARTUP_KEYS])


def with_room_for_headroom(sm: StackModel) -> StackModel:
    """dev with one more spot GPU (gpuLimit 3): room for one placeholder beside maxReplicas 3."""
    return apply_config_set(sm, [("gpuCapacity.pools[0].gpuLimit", 3)])


def test_startup_follows_the_start_features_when_the_stack_measured_none():
    sm = without_startup_keys(dev())
    # dev runs Auto Mode: its own SOCI parallel pull on Bottlerocket (karpenter-blueprints figures).
    assert sm.startup.image_pull_s == (23.2, 45.0)
    assert sm.startup_figures is not None and sm.startup_figures.image_pull_s.trust == "extrapolated"
    assert sm.startup.weight_load_s == pytest.approx(sm.model.size_gib / 0.5)


def test_the_run_ai_streamer_and_a_compile_cache_shorten_the_derived_startup():
    sm = without_startup_keys(dev())
    fast = with_start_features(sm, weight_loader="runai-streamer", compile_cache_storage_class="efs-sc")
    assert fast.startup.weight_load_s == pytest.approx(sm.startup.weight_load_s * 14.34 / 47.99)
    assert fast.startup.engine_init_s == (10.0, 30.0)


def test_a_stacks_own_startup_figures_override_the_derived_ones(tmp_path):
    config = dev_config()
    config["config"]["inference-platform:capacityPlanning"]["startup"]["weightLoadGiBPerSecond"] = 0.25
    sm = load_stack_model(stack_file(tmp_path, config), profile=PROFILE, root=ROOT)
    fast = with_start_features(sm, weight_loader="runai-streamer")
    assert fast.startup == sm.startup
    assert fast.startup_figures is not None and fast.startup_figures.weight_load_gib_per_s.trust == "stack"


def test_a_start_feature_the_stack_does_not_override_shortens_its_start():
    sm = dev()  # dev sets only engineInitSeconds: the weight loader's figure is derived
    fast = with_start_features(sm, weight_loader="runai-streamer")
    assert fast.startup.weight_load_s < sm.startup.weight_load_s


def test_a_stacks_headroom_reaches_the_simulator():
    sm = with_headroom(with_room_for_headroom(dev()), 1)
    assert sm.headroom == 1
    assert sim_config(sm, RunOptions(), 1).headroom == 1


def test_headroom_beyond_the_pools_gpu_limits_does_not_deploy():
    with pytest.raises(ValueError, match=r"\(maxReplicas \+ gpuCapacity.headroom.placeholders\) x gpusPerReplica = 4"):
        with_headroom(dev(), 1)  # dev's maxReplicas 3 already fills its 3 GPUs


def test_turning_soci_off_under_auto_mode_does_not_deploy():
    with pytest.raises(ValueError, match=r"gpuCapacity.nodeClass.sociParallelPull \(False\) cannot be turned off"):
        with_start_features(dev(), soci_parallel_pull=False)


def test_a_runs_summary_bills_the_warm_nodes_apart_and_within_its_gpu_hours():
    sm = with_headroom(with_room_for_headroom(dev()), 1)
    trace = load("synthetic:step:base=0.2,peak=0.2,at=60,length=60,duration=1800,prompt=128,output=32")
    summary = summarize(run_policy(sm, trace), sm, feasible_requests(sm, trace))
    bare = summarize(run_policy(replace(sm, headroom=0), trace), sm, feasible_requests(sm, trace))
    assert summary.headroom_gpu_hours == pytest.approx(0.5, abs=0.01)  # one GPU held for the half hour
    assert summary.gpu_hours == pytest.approx(bare.gpu_hours + summary.headroom_gpu_hours, abs=0.01)
    assert summary.headroom_cost_usd > 0
