"""`python -m capacity schedule` end to end on light synthetic diurnal traces."""

import json
import shlex
import tempfile
from datetime import datetime
from pathlib import Path

import pytest

from capacity.__main__ import main
from capacity.cli.schedule import config_set_lines, cron_hour
from capacity.planning.schedule import Schedule
from capacity.planning.stack import apply_config_set, load_stack_model
from tests.html_page import Report, embeds
from tests.stacks import unplanned

ROOT = Path(__file__).resolve().parents[3]
PROFILE = "8gb-qwen2.5-3b-eager"
QUIET_DAY = "synthetic:diurnal:mean=0.01,amplitude=1,duration=86400"
# busy enough that its peak needs a second replica of the 3B reference (the oracle sizes it from the
# engine model: at mean 0.1 req/s one replica serves the whole day since the engine fit of issue 22)
BUSY_DAY = "synthetic:diurnal:mean=0.13,amplitude=1,duration=86400,prompt=500,output=1400"


def _schedule(capsys, trace: str, *extra: str) -> dict:
    folder = Path(tempfile.mkdtemp())
    stack = unplanned("dev", folder)  # dev's default scope: minReplicas 1, maxReplicas 3
    reports = [] if "--png" in extra else ["--png", str(folder / "schedule.png")]
    code = main(
        [
            "schedule",
            *reports,
            "--stack",
            str(stack),
            "--profile",
            PROFILE,
            "--trace",
            trace,
            "--oracle-interval",
            "7200",
            "--json",
            *extra,
        ]
    )
    assert code == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_a_one_day_synthetic_trace_is_judged_on_the_next_seed(capsys):
    out = _schedule(capsys, QUIET_DAY)
    assert out["split"] == "one-day synthetic trace: derived on seed 0, judged on seed 1"


def test_a_trace_needing_no_more_than_min_replicas_gets_no_schedule_and_says_why(capsys):
    out = _schedule(capsys, QUIET_DAY)
    assert (out["schedule"], out["recommended"], out["pulumi_config_set"]) == (None, False, [])
    assert out["reason"].startswith("no time of day needs more than minReplicas 1")


def test_a_two_day_trace_is_derived_on_day_one_and_judged_on_day_two(capsys):
    out = _schedule(capsys, QUIET_DAY.replace("86400", "172800"))
    assert out["split"] == "derived on day 1, judged on day 2"
    assert out["reactive"]["oracle_gpu_hours"] > 0


def test_a_window_is_simulated_beside_the_reactive_policy_and_printed_only_when_cheaper(capsys):
    out = _schedule(capsys, BUSY_DAY)
    assert out["schedule"]["desiredReplicas"] == 2 and out["schedule"]["timezone"] == "UTC"
    reactive, scheduled = out["reactive"], out["reactive_schedule"]
    cheaper = scheduled["cost_usd"] < reactive["cost_usd"]
    as_good = scheduled["slo_attainment"] >= reactive["slo_attainment"]
    assert out["recommended"] == (cheaper and as_good)
    assert bool(out["pulumi_config_set"]) == out["recommended"]
    assert (out["reason"] is None) == out["recommended"]


def test_the_table_names_the_window_and_the_verdict(capsys):
    assert (
        main(["schedule", "--stack", "dev", "--profile", PROFILE, "--trace", QUIET_DAY, "--oracle-interval", "7200"])
        == 0
    )
    out = capsys.readouterr().out
    assert "reactive (stack)" in out and "# not recommended: no time of day needs more" in out


def test_printed_lines_are_pulumi_config_set_commands_that_deploy():
    sm = load_stack_model("prod", root=ROOT)
    window = Schedule("50 8 * * 1-5", "0 17 * * 1-5", "UTC", 5, 425.0, 10.0, 0)
    lines = config_set_lines(window, sm)
    edits = []
    for line in lines:
        words = shlex.split(line)
        assert words[:4] == ["pulumi", "config", "set", "--path"] and words[-2:] == ["-s", "prod"]
        edits.append((words[4], {"true": True, "5": 5}.get(words[5], words[5])))
    cron = apply_config_set(sm, edits).policy.triggers.cron
    assert (cron.enabled, cron.start, cron.end, cron.timezone, cron.desired_replicas) == (
        True,
        "50 8 * * 1-5",
        "0 17 * * 1-5",
        "UTC",
        5,
    )


def test_a_trace_shorter_than_a_day_is_one_clear_error(capsys):
    code = main(["schedule", "--stack", "dev", "--trace", "synthetic:diurnal:duration=3600"])
    assert code == 2
    assert "spans 1.0 h; a schedule needs a day or more" in capsys.readouterr().err


def test_a_one_day_trace_file_is_refused_for_want_of_a_day_to_judge_on(capsys, tmp_path):
    day = tmp_path / "day.csv"
    day.write_text("offset_s,prompt_tokens,output_tokens\n0,100,10\n86399,100,10\n")
    assert main(["schedule", "--stack", "dev", "--trace", str(day)]) == 2
    assert "two days or more are needed" in capsys.readouterr().err


def test_an_oracle_interval_that_does_not_divide_a_day_is_one_clear_error(capsys):
    code = main(["schedule", "--stack", "dev", "--trace", QUIET_DAY, "--oracle-interval", "7000"])
    assert code == 2
    assert "--oracle-interval (7000 s) must divide a day" in capsys.readouterr().err


def test_the_html_report_holds_the_table_the_chart_and_how_it_was_made(capsys, tmp_path):
    png = tmp_path / "s.png"
    out = _schedule(capsys, BUSY_DAY, "--png", str(png))
    assert (out["schedule_png"], out["html_report"]) == (str(png), str(tmp_path / "s.html"))
    report = Report(tmp_path / "s.html")
    assert embeds(report, png)
    assert any(c.startswith("reactive (stack)") for c in report.cells)
    assert any(t.startswith("made by: python -m capacity schedule") for t in report.text)
    if out["pulumi_config_set"]:
        assert "\n".join(out["pulumi_config_set"]) in "".join(report.text)


def test_the_json_records_the_command_trace_seed_and_date(capsys):
    run = _schedule(capsys, QUIET_DAY, "--seed", "2")["run"]
    assert run["command"].startswith("python -m capacity schedule --png")
    assert (run["traces"], run["seed"]) == ([QUIET_DAY], 2)
    assert datetime.fromisoformat(run["date"]).tzinfo is not None


def test_a_png_path_in_a_missing_directory_is_one_line(capsys):
    assert main(["schedule", "--trace", QUIET_DAY, "--png", "/nonexistent/s.png"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--png /nonexistent/s.png: directory /nonexistent does not exist" in err


def test_cron_hours_read_the_minute_and_hour_fields():
    assert (cron_hour("53 5 * * *"), cron_hour("0 18 * * 1-5")) == (5 + 53 / 60, 18.0)
