"""`python -m capacity explain` on both stacks: the JSON contract, the table, traffic taken
from the evidence comment, and one clear line without evidence or --trace."""

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from capacity.__main__ import main
from capacity.cli.explain import unchanged_note
from capacity.planning import sensitivity
from capacity.planning.days import plan_parts
from capacity.planning.run import held_out_parts, validation_options
from capacity.planning.stack import load_stack_model
from capacity.workload import traces
from contract.settings.autoscaling import ModelAutoscaling
from tests.html_page import Report, embeds
from tests.stacks import edited
from tests.summaries import RUN

ROOT = Path(__file__).resolve().parents[3]
TRACE = "synthetic:step:base=1,peak=3,at=150,length=150,duration=450,prompt=256,output=64"
EVIDENCE = (
    "    # Evidence: planned 2026-12-01 on engine profile 8gb-qwen2.5-1.5b\n"
    f"    #   python -m capacity plan --stack dev --trace {TRACE} --search-fraction 0.6 --seed 3\n"
)


def explain(capsys, tmp_path, *args: str) -> dict:
    assert main(["explain", "--workers", "2", "--json", "--html", str(tmp_path / "explain.html"), *args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def min_replicas_only(monkeypatch):
    """Explain only minReplicas (a test of the command's wiring, not of every threshold's variants)."""


@pytest.mark.parametrize("stack, models", [("dev", ["qwen25-1p5b"]), ("prod", ["qwen25-14b-awq", "qwen25-7b-awq"])])
def test_every_model_of_the_stack_is_explained(capsys, monkeypatch, stack, models, tmp_path):
    monkeypatch.chdir(ROOT)
    out = explain(capsys, tmp_path, "--stack", stack, "--trace", TRACE)
    assert [m["model"] for m in out["models"]] == models
    for model in out["models"]:
        assert set(model["committed"]) == {"slo_attainment", "cost_usd", "gpu_hours"}
        committed = load_stack_model(stack, model["model"], root=ROOT)
        assert [t["name"] for t in model["thresholds"]] == [t.name for t in sensitivity.thresholds(committed)]


def test_each_variant_has_numbers_or_a_reason(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    (model,) = explain(capsys, tmp_path, "--stack", "dev", "--trace", TRACE)["models"]
    variants = [v for t in model["thresholds"] for v in t["variants"]]
    assert all((v["result"] is None) != (v["reason"] is None) for v in variants)
    assert any(v["result"] for v in variants) and any(v["reason"] for v in variants)


def test_model_picks_one_model(capsys, monkeypatch, tmp_path, min_replicas_only):
    monkeypatch.chdir(ROOT)
    out = explain(capsys, tmp_path, "--stack", "prod", "--model", "qwen25-7b-awq", "--trace", TRACE)
    assert [m["model"] for m in out["models"]] == ["qwen25-7b-awq"]


def measured_dev(tmp_path: Path, evidence: str = "") -> Path:
    """Dev with its model unpinned on the measured 8gb-qwen2.5-1.5b (whose engine flags are not varied), one
    autoscaling block, `default`, and no evidence comment but `evidence` above it (YAML drops the stack's)."""
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    config = stack["config"]
    (model,) = config["inference-platform:models"]
    model.pop("instanceFamilies", None)
    model["capacityProfile"] = "8gb-qwen2.5-1.5b"
    default = config["inference-platform:autoscaling"]["default"]
    config["inference-platform:autoscaling"] = {"default": {**default, "minReplicas": 1}}  # a threshold set under it
    anchor = "  inference-platform:autoscaling:\n    default:\n"
    text = yaml.safe_dump(stack, sort_keys=False)
    assert anchor in text
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text.replace(anchor, anchor.replace("    default:\n", evidence + "    default:\n")))
    return path


def explain_table(capsys, tmp_path, *extra: str) -> str:
    """The text explain prints for a measured dev stack on TRACE."""
    args = ["explain", "--stack", str(measured_dev(tmp_path)), "--workers", "2", "--trace", TRACE, *extra]
    assert main([*args, "--html", str(tmp_path / "e.html")]) == 0
    return capsys.readouterr().out


def test_the_table_names_each_threshold_and_the_committed_result(capsys, tmp_path):
    out = explain_table(capsys, tmp_path, "--wide")
    assert "explain dev/qwen25-1p5b (8gb-qwen2.5-1.5b): held out synthetic:step last 30%," in out
    assert "committed: SLO attained" in out
    assert "triggers.queueDepth.targetPerReplica" in out and "built-in default" in out
    assert "engine flags not varied: engine profile 8gb-qwen2.5-1.5b" in out


def test_the_piped_table_fits_100_columns_without_cutting_a_value(capsys, tmp_path):
    out = explain_table(capsys, tmp_path)
    table = out[: out.index("└")]
    assert max(len(line) for line in table.splitlines()) <= 100 and "…" not in table
    assert "built-in default" not in table  # the 'set in' column is --wide's


def test_the_traffic_comes_from_the_evidence_command(capsys, tmp_path, min_replicas_only):
    (model,) = explain(capsys, tmp_path, "--stack", str(measured_dev(tmp_path, EVIDENCE)))["models"]
    assert model["traffic_from_evidence_of"] == "autoscaling.default"
    assert (model["trace"], model["search_fraction"], model["seed"]) == (TRACE, 0.6, 3)
    (minimum,) = [t for t in model["thresholds"] if t["name"] == "minReplicas"]
    assert minimum["evidence"] == "autoscaling.default"
    assert model["evidence"]["autoscaling.default"]["date"] == "2026-12-01"


def test_a_flag_overrides_the_evidence_command(capsys, tmp_path, min_replicas_only):
    (model,) = explain(capsys, tmp_path, "--stack", str(measured_dev(tmp_path, EVIDENCE)), "--search-fraction", "0.5")[
        "models"
    ]
    assert (model["search_fraction"], model["seed"]) == (0.5, 3)


def test_no_evidence_and_no_trace_is_one_line(capsys, tmp_path):
    assert main(["explain", "--stack", str(measured_dev(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no evidence comment of dev/qwen25-1p5b names a --trace" in err


def test_a_bad_search_fraction_is_one_line(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["explain", "--stack", "dev", "--trace", TRACE, "--search-fraction", "1"]) == 2
    assert "--search-fraction must be in (0, 1), got 1.0" in capsys.readouterr().err


def _explanation(baseline, *summaries):
    threshold = sensitivity.Threshold("minReplicas", "autoscaling.m.minReplicas", 2, "warm", None, 0)
    variant = sensitivity.Variant("half", 1, ())
    return sensitivity.Explanation(
        baseline, [(threshold, [sensitivity.Outcome(variant, s, None) for s in summaries])], None
    )


def test_variants_identical_to_the_committed_result_say_the_fleet_sat_at_its_ceiling():
    policy = ModelAutoscaling(min_replicas=2, max_replicas=4)
    pinned = replace(RUN, max_replicas_used=4, scale_events=3)
    note = unchanged_note(policy, _explanation(pinned, pinned, replace(pinned, cost_usd=2.0)))
    assert note.startswith("1 of 2 simulated variants give exactly the committed result")
    assert "pinned at its ceiling, maxReplicas 4" in note


def test_variants_identical_to_a_fleet_that_never_scaled_say_so():
    policy = ModelAutoscaling(min_replicas=2, max_replicas=4)
    still = replace(RUN, initial_replicas=2, max_replicas_used=2, scale_events=0)
    note = unchanged_note(policy, _explanation(still, still))
    assert "never scaled: 2 replicas (minReplicas 2)" in note
    assert unchanged_note(policy, _explanation(still, replace(still, cost_usd=3.0))) is None


def test_explain_writes_one_html_report_with_every_column_and_a_chart_per_model(
    capsys, monkeypatch, tmp_path, min_replicas_only
):
    monkeypatch.chdir(ROOT)
    html = tmp_path / "prod.html"
    assert main(["explain", "--stack", "prod", "--workers", "2", "--trace", TRACE, "--json", "--html", str(html)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["html_report"] == str(html)
    report = Report(html)
    assert {"set in", "what it is for", "half, or flipped", "double"} <= set(report.headers)
    for model in out["models"]:
        png = Path(model["png"])
        assert png == tmp_path / f"prod-{model['model']}.png" and embeds(report, png)
    assert any(t.startswith("made by: python -m capacity explain --stack prod") for t in report.text)


def test_the_json_records_the_command_trace_seed_and_date(capsys, monkeypatch, tmp_path, min_replicas_only):
    monkeypatch.chdir(ROOT)
    run = explain(capsys, tmp_path, "--stack", "dev", "--trace", TRACE, "--seed", "4")["run"]
    assert run["command"].startswith("python -m capacity explain --workers 2 --json --html")
    assert (run["traces"], run["seed"]) == ([TRACE], 4)
    assert datetime.fromisoformat(run["date"]).tzinfo is not None


def test_one_model_gets_its_chart_beside_the_report_under_the_same_name(
    capsys, monkeypatch, tmp_path, min_replicas_only
):
    monkeypatch.chdir(ROOT)
    (model,) = explain(capsys, tmp_path, "--stack", "prod", "--model", "qwen25-7b-awq", "--trace", TRACE)["models"]
    assert model["png"] == str(tmp_path / "explain.png")


def test_an_html_path_in_a_missing_directory_is_one_line(capsys):
    assert main(["explain", "--stack", "dev", "--trace", TRACE, "--html", "/nonexistent/e.html"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--html /nonexistent/e.html: directory /nonexistent does not exist" in err


DAYS = "synthetic:diurnal:mean=0.02,amplitude=0.5,period=86400,duration=172800,prompt=256,output=64,seed=1"


def test_a_trace_of_days_is_explained_on_its_held_out_day_as_the_plan_validated(
    capsys, monkeypatch, tmp_path, min_replicas_only
):
    monkeypatch.chdir(ROOT)
    (model,) = explain(capsys, tmp_path, "--stack", "dev", "--trace", DAYS, "--rate-scale", "1")["models"]
    day_two = traces.load(DAYS).window(86_400.0, float("inf"))
    assert model["held_out"] == ["synthetic:diurnal day 2 of 2"]
    assert model["held_out_requests"] == len(day_two.arrivals)


def test_the_committed_result_is_what_plan_validation_scores_on_the_same_held_out_traffic(
    capsys, monkeypatch, tmp_path, min_replicas_only
):
    """The same warm start as `plan` (the oracle sized at the stack's attainment target, not the
    SLO's objective), so the committed numbers read beside the evidence's. On this traffic the two
    warm starts differ: 3 replicas at 99.9%, 2 at 95%."""
    monkeypatch.chdir(ROOT)
    busy = "synthetic:step:base=10,peak=10,at=0,length=10,duration=300,prompt=2000,output=128"
    stack = edited("dev", tmp_path, [("capacityPlanning.attainmentTarget", 0.999)])
    (model,) = explain(capsys, tmp_path, "--stack", str(stack), "--trace", busy, "--rate-scale", "1")["models"]
    dev = load_stack_model(str(stack), None)
    held = plan_parts(traces.load(busy), 1, 0.7)[1]
    validated = held_out_parts(dev, held, validation_options(dev, 0), oracle=False)
    assert model["committed"] == {k: getattr(validated, k) for k in ("slo_attainment", "cost_usd", "gpu_hours")}
