"""`python -m capacity plan` end to end on short traces: the JSON output contract, a seed that
fixes the plan, commands the stack accepts, and the binding limit when nothing meets the target."""

import json
from pathlib import Path

import pytest

from capacity.__main__ import main
from tests.html_page import Report, embeds
from capacity.sim.from_stack import ConfigRemove, apply_config_set, load_stack_model

ROOT = Path(__file__).resolve().parents[3]
STEP = "synthetic:step:base=2,peak=12,at=300,length=300,duration=900,prompt=512,output=128"
FLOOD = "synthetic:step:base=200,peak=200,at=0,length=60,duration=60,prompt=512,output=256"


def _typed(value: str):
    """A value as `pulumi config set --path` stores it: booleans and numbers typed, the rest strings."""
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def plan(capsys, tmp_path, *extra: str) -> dict:
    args = ["plan", "--stack", "dev", "--trials", "4", "--workers", "2", "--json", "--png", str(tmp_path / "f.png"), *extra]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_prints_the_output_contract_and_the_frontier_png(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", STEP)
    assert {"search", "validation", "frontier", "gpu_types", "config_set", "binding_limit"} <= set(out)
    assert set(out["validation"]) >= {"slo_attainment", "gpu_hours", "oracle_gpu_hours", "cost_usd", "scale_events"}
    assert [row["gpu"] for row in out["gpu_types"]] == ["a10g", "l4"]  # dev's pools allow g5 and g6
    assert (tmp_path / "f.png").stat().st_size > 10_000
    assert out["trials"] == 4


def test_plan_writes_one_html_report_with_the_frontier_table_and_png(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", STEP, "--html", str(tmp_path / "p.html"))
    report = Report(tmp_path / "p.html")
    assert out["html_report"] == str(tmp_path / "p.html")
    assert embeds(report, tmp_path / "f.png")
    assert [row["gpu"] for row in out["gpu_types"]] == [c for c in report.cells if c in ("a10g", "l4")][-2:]


def test_the_same_seed_gives_the_same_plan(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    first, second = (plan(capsys, tmp_path, "--trace", STEP, "--seed", "7") for _ in range(2))
    assert first["frontier"] == second["frontier"] and first["config_set"] == second["config_set"]


def test_every_printed_command_deploys_the_winner(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", STEP, "--slo-attainment", "0.5")
    assert out["config_set"] and out["binding_limit"] is None
    edits: list = []
    for line in out["config_set"]:
        assert line.endswith(" -s dev")
        if line.startswith("pulumi config rm --path '"):
            edits.append(ConfigRemove(line.removeprefix("pulumi config rm --path '").removesuffix("' -s dev")))
            continue
        assert line.startswith("pulumi config set --path '")
        path, value = line.removeprefix("pulumi config set --path '").removesuffix(" -s dev").split("' ")
        edits.append((path, _typed(value)))
    deployed = apply_config_set(load_stack_model("dev", root=ROOT), edits)
    winner = out["frontier"][-1]["params"] if out["frontier"][-1]["slo_attainment"] >= 0.5 else None
    assert deployed.policy.max_replicas <= 3  # the pools hold 3 GPUs
    assert winner is None or deployed.policy.min_replicas <= winner["maxReplicas"]


def test_when_nothing_meets_the_target_the_binding_limit_is_named_with_numbers(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", FLOOD, "--slo-attainment", "0.99")
    assert out["config_set"] == []
    assert out["binding_limit"].startswith(("pool GPU limit", "SLO below the idle-replica latency"))
    assert "%" in out["binding_limit"]


def test_a_bad_price_flag_is_one_line(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--stack", "dev", "--trace", STEP, "--price", "g6=cheap"])
    assert "is not FAMILY=USD_PER_GPU_HOUR" in capsys.readouterr().err


def test_gpu_restricts_the_search_to_that_type(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", STEP, "--gpu", "l4")
    assert [row["gpu"] for row in out["gpu_types"]] == ["l4"]
    assert all(row["gpu"] == "l4" for row in out["frontier"])


def test_a_gpu_the_pools_do_not_allow_is_one_line(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["plan", "--stack", "dev", "--trace", STEP, "--gpu", "h100"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--gpu h100" in err and "a10g, l4" in err


def test_the_target_defaults_to_the_stacks_attainment_target(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", STEP)
    assert out["target"] == load_stack_model("dev", root=ROOT).attainment_target
