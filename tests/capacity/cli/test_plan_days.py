"""`python -m capacity plan` on a trace of days: searched on the days after the first (history
only), validated on the last and on an extra trace, each day reported, and the fewest static
replicas meeting the target held out beside the winner. One plan, shared by every test here (one
xdist group, so one worker builds it)."""

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from capacity.__main__ import main
from capacity.cli.plan import evidence_block
from capacity.planning.evidence import Evidence
from tests.html_page import Report

ROOT = Path(__file__).resolve().parents[3]
STEP = "synthetic:step:base=2,peak=12,at=300,length=300,duration=900,prompt=512,output=128"
pytestmark = pytest.mark.xdist_group("plan-days")

DAYS = "synthetic:diurnal:mean=0.02,amplitude=0.8,duration=345600,prompt=256,output=64"  # four quiet days


@pytest.fixture(scope="module")
def planned_on_days(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("days")
    args = ["plan", "--stack", "dev", "--gpu", "l4", "--trace", DAYS, "--validate-trace", STEP, "--trials", "2"]
    args += ["--workers", "1", "--json", "--png", str(tmp / "f.png")]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        out = _captured_json(args)
    finally:
        os.chdir(cwd)
    return out


def _captured_json(args: list[str]) -> dict:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(args) == 0
    return json.loads(buffer.getvalue())


def test_a_four_day_trace_is_searched_on_two_days_after_its_history_and_validated_on_the_last_and_the_extra_trace(
    planned_on_days,
):
    search, validation = planned_on_days["search"], planned_on_days["validation"]
    assert [d["label"] for d in search["days"]] == ["synthetic:diurnal day 2 of 4", "synthetic:diurnal day 3 of 4"]
    assert [d["label"] for d in validation["days"]] == ["synthetic:diurnal day 4 of 4", "synthetic:step"]
    assert all("oracle_ratio" in d for d in validation["days"])  # held out: beside the oracle, day by day


def test_the_worst_day_is_the_one_of_lowest_attainment_and_sets_the_summarys(planned_on_days):
    validation = planned_on_days["validation"]
    worst = min(validation["days"], key=lambda d: d["slo_attainment"])
    assert validation["worst_day"]["slo_attainment"] == worst["slo_attainment"] == validation["slo_attainment"]
    assert validation["costliest_day"]["cost_usd"] == max(d["cost_usd"] for d in validation["days"])


def test_the_evidence_names_the_held_out_days_and_each_day_in_a_form_the_audit_reads(planned_on_days):
    block = "\n".join(evidence_block(planned_on_days, "l4-qwen2.5-1.5b"))
    assert "validation (synthetic:diurnal day 4 of 4, synthetic:step, never searched)" in block.replace("\n", " ")
    assert "worst day" in block and "per day:" in block
    recorded = Evidence(block, None, None, None).held_out()
    assert recorded is not None and recorded.gpu_hours == pytest.approx(
        planned_on_days["validation"]["gpu_hours"], abs=0.01
    )


def test_the_plan_shows_static_fleets_planned_ahead_and_in_hindsight_beside_the_winner(planned_on_days):
    static = planned_on_days["static"]
    assert [static[k]["chosen_on"] for k in ("ahead", "hindsight")] == ["searched", "held out"]
    for fleet in static.values():
        assert fleet["replicas"] is not None and fleet["replicas"] <= fleet["pools_replicas"]
        assert [d["label"] for d in fleet["validation"]["days"]] == [
            d["label"] for d in planned_on_days["validation"]["days"]
        ]
    target = f"{planned_on_days['target']:.1%}"
    assert any(f"the fewest replicas meeting {target} on the searched traffic" in n for n in planned_on_days["notes"])
    assert any(
        n.startswith(f"in hindsight, the fewest static replicas meeting {target}") for n in planned_on_days["notes"]
    )


def test_the_static_fleets_are_rows_of_the_winners_table(planned_on_days):
    report = Report(Path(planned_on_days["html_report"]))
    static = planned_on_days["static"]
    assert f"static {static['ahead']['replicas']} (ahead)" in report.cells
    assert f"static {static['hindsight']['replicas']} (hindsight)" in report.cells


def test_the_evidence_records_the_static_fleets_the_winner_was_weighed_against(planned_on_days):
    block = " ".join(evidence_block(planned_on_days, "l4-qwen2.5-1.5b"))
    ahead = planned_on_days["static"]["ahead"]
    assert f"Static fleet planned ahead: {ahead['replicas']} replicas (the fewest meeting it searched) attain" in block
