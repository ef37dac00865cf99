"""The stack file as the simulator reads it: thresholds, pools, startup, policy files, errors."""

from pathlib import Path

import pytest
import yaml

from capacity.sim.from_stack import load_stack_model
from contract.settings.gpu_capacity import duration_seconds

ROOT = Path(__file__).resolve().parents[3]
PROFILE = "8gb-qwen2.5-1.5b"


def dev(**kwargs):
    return load_stack_model("dev", profile=PROFILE, root=ROOT, **kwargs)


def test_thresholds_come_from_the_stack_file_through_the_settings_models():
    sm = dev()
    raw = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]["inference-platform:autoscaling"]["default"]
    assert sm.policy.max_replicas == raw["maxReplicas"]
    assert sm.policy.triggers.queue_depth.target_per_replica == raw["triggers"]["queueDepth"]["targetPerReplica"]


def test_startup_prices_and_pools_come_from_the_stack(tmp_path):
    sm = dev()
    assert sm.startup.weight_load_s == pytest.approx(sm.model.size_gib / 0.5)
    assert {p.name: p.price_per_gpu_hour for p in sm.pools} == {"gpu-spot": 0.45, "gpu-on-demand": 1.006}


def test_a_policy_file_replaces_the_stack_autoscaling_section(tmp_path):
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump({"default": {"maxReplicas": 2, "triggers": {"queueDepth": {"targetPerReplica": 1}}}}))
    sm = dev(policy_file=policy)
    assert sm.policy.max_replicas == 2
    assert sm.policy.triggers.queue_depth.target_per_replica == 1
    assert sm.policy.triggers.kv_cache.target_per_replica == 0.7  # the stack's 0.6 is replaced, not merged


def test_a_policy_that_would_not_deploy_is_refused_with_its_key_path(tmp_path):
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump({"default": {"minReplicas": 3, "maxReplicas": 2}}))
    with pytest.raises(ValueError, match=r"autoscaling.default.maxReplicas \(2\) must be >= minReplicas \(3\)"):
        dev(policy_file=policy)


def test_unknown_model_lists_the_stack_models():
    with pytest.raises(ValueError, match=r"model 'nope' is not in stack Pulumi.dev.yaml; models: \['qwen25-1p5b'\]"):
        dev(model="nope")


def test_an_unknown_capacity_profile_in_the_stack_names_its_key(tmp_path):
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    stack["config"]["inference-platform:models"][0]["capacityProfile"] = "no-such-profile"
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(yaml.safe_dump(stack))
    with pytest.raises(ValueError, match=r"models\[0\].capacityProfile \('no-such-profile'\): unknown engine profile"):
        load_stack_model(str(path))


def test_consolidate_after_comes_from_each_nodepool():
    sm = load_stack_model("prod", profile=PROFILE, root=ROOT)
    prod = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]["inference-platform:gpuCapacity"]["pools"]
    expected = {p["name"]: duration_seconds(p.get("consolidateAfter", "10m")) for p in prod}
    assert {p.name: p.consolidate_after_s for p in sm.pools} == expected


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("15m", 900), ("1h30m", 5400), ("Never", float("inf"))])
def test_karpenter_durations_in_seconds(text, seconds):
    assert duration_seconds(text) == seconds
