"""The benchmark scripts' stack edits deploy: a benchmark whose settings the program refuses
measures nothing (benchmarks/simulate_speed.py set maxReplicas 10 under prod's fallbackReplicas 11)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _benchmark(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_simulator_speed_benchmarks_reactive_stack_deploys_with_its_documented_fleet_bounds(tmp_path):
    speed = _benchmark("simulate_speed")
    sm = speed.stack_model("reactive", str(speed.pinned_stack_file(tmp_path)))
    assert (sm.policy.min_replicas, sm.policy.max_replicas) == (1, 34)


def test_the_simulator_speed_benchmark_times_the_policy_the_issue_measured_whatever_the_stack_holds_now(tmp_path):
    """Its cases read 56ad579's Pulumi.prod.yaml (the 14B at minReplicas 26), on both checkouts."""
    speed = _benchmark("simulate_speed")
    sm = speed.stack_model("committed", str(speed.pinned_stack_file(tmp_path)))
    assert (sm.policy.min_replicas, sm.policy.max_replicas) == (26, 34)


def test_the_evidence_replan_refuses_a_model_it_does_not_audit_by_name(capsys):
    replan = _benchmark("evidence_replan")
    with pytest.raises(SystemExit) as stop:
        replan.main(["--only", "prod/no-such-model"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--only prod/no-such-model: not one of dev/qwen25-1p5b, prod/qwen25-14b-awq, prod/qwen25-7b-awq" in err


def test_the_plan_speed_benchmarks_command_is_one_the_plan_accepts():
    from capacity.__main__ import build_parser

    speed = _benchmark("plan_speed")
    command = speed.plan_command(150, 2, "postgresql+psycopg://u@127.0.0.1:5432/optuna")
    args = build_parser("plan").parse_args(command[3:])  # after `python -m capacity`
    assert (args.trials, args.workers, args.holdout_days, args.gpu) == (150, 2, 1, ["a10g"])


def test_the_plan_speed_benchmark_says_when_runs_chose_different_winners():
    speed = _benchmark("plan_speed")
    held = {"slo_attainment": 0.9912, "cost_usd": 160.0}
    runs = [
        {"workers": 1, "winner_params": {"a": 1}, "held_out": held},
        {"workers": 2, "winner_params": {"a": 2}, "held_out": held},
    ]
    assert (
        speed.relation(runs)
        == "different winners: 1 worker(s): held out 99.12% at $160.00; 2 worker(s): held out 99.12% at $160.00"
    )
    assert speed.relation([runs[0], runs[0]]) == "every run chose the same winner"
