"""Stack inputs, policy files, the oracle, tune and the three commands end to end (short traces)."""

import json
from pathlib import Path

import pytest
import yaml

from capacity.__main__ import main
from capacity.engine import get_profile
from capacity.oracle import fewest_replicas, oracle
from capacity.sim.run import RunOptions
from capacity.sim.stack import load_stack_model
from contract.settings.gpu_capacity import duration_seconds
from capacity.workload.traces import load
from capacity.tune import config_set_lines, set_path, tune

ROOT = Path(__file__).resolve().parents[3]
PROFILE = "8gb-qwen2.5-1.5b"
SHORT = "synthetic:step:base=2,peak=30,at=120,length=300,duration=600,prompt=512,output=128"


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


def test_oracle_needs_more_replicas_for_more_load():
    trace = load(SHORT)
    result = oracle(trace, get_profile(PROFILE), 1.0, 20.0, interval_s=120)
    assert result.replicas[0] < result.peak_replicas
    assert result.gpu_hours == pytest.approx(sum(result.replicas * 120) / 3600, rel=0.01)


def test_set_path_edits_only_the_model_block():
    raw = {"default": {"maxReplicas": 3}}
    edited = set_path(raw, "m", "triggers.queueDepth.targetPerReplica", 2)
    assert edited == {"default": {"maxReplicas": 3}, "m": {"triggers": {"queueDepth": {"targetPerReplica": 2}}}}
    assert raw == {"default": {"maxReplicas": 3}}


def test_tune_finds_a_policy_no_worse_than_the_stack_and_prints_config_set_lines():
    sm = dev()
    trace = load("synthetic:step:base=2,peak=20,at=60,length=240,duration=420,prompt=512,output=128")
    result = tune(sm, trace, target=0.9, options=RunOptions(), workers=2, max_passes=1)
    before, after = result.baseline.summary, result.best.summary
    assert (after["slo_attainment"] >= 0.9 and after["cost_usd"] <= before["cost_usd"]) or (
        after["slo_attainment"] >= before["slo_attainment"]
    )
    for line in config_set_lines(result, sm.model.name, "dev"):
        assert line.startswith(f"pulumi config set --path 'autoscaling.{sm.model.name}.") and line.endswith(" -s dev")


def test_simulate_command_prints_the_documented_json(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    png = tmp_path / "t.png"
    assert main(["simulate", "--stack", "dev", "--profile", PROFILE, "--trace", SHORT, "--json", "--png", str(png)]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("requests", "slo_attainment", "ttft_p95_s", "e2e_p99_s", "gpu_hours", "cost_usd",
                "oracle_gpu_hours", "scale_events", "max_replicas_used"):  # fmt: skip
        assert key in out
    assert png.stat().st_size > 10_000


def test_compare_command_includes_stack_static_and_oracle(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["compare", "--stack", "dev", "--profile", PROFILE, "--trace", SHORT, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = list(rows)
    assert names[0] == "stack dev" and names[1].startswith("static ") and names[2].startswith("oracle")


def test_bad_input_is_one_clear_error_line(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["simulate", "--stack", "dev", "--profile", "nope", "--trace", SHORT]) == 2
    assert "unknown engine profile 'nope'" in capsys.readouterr().err


def test_fewest_replicas_searches_down_from_a_passing_guess():
    assert fewest_replicas(lambda n: n >= 3, start=7) == (3, True)


def test_fewest_replicas_searches_up_from_a_failing_guess():
    assert fewest_replicas(lambda n: n >= 11, start=2) == (11, True)


def test_fewest_replicas_reports_an_unreachable_slo_at_the_cap():
    assert fewest_replicas(lambda n: False, start=2, cap=16) == (16, False)


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
