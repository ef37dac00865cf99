"""`python -m capacity simulate` end to end on a short trace."""

import json
from datetime import datetime
from pathlib import Path

from capacity.__main__ import main
from tests.html_page import Report, embeds
from tests.stacks import unplanned

ROOT = Path(__file__).resolve().parents[3]
PROFILE = "8gb-qwen2.5-1.5b"
SHORT = "synthetic:step:base=2,peak=30,at=120,length=300,duration=600,prompt=512,output=128"


def simulate(*extra: str, stack: str = "dev", trace: str = SHORT) -> int:
    """`python -m capacity simulate` on the small physics profile, with the given extra flags."""
    return main(["simulate", "--stack", stack, "--profile", PROFILE, "--trace", trace, *extra])


def test_simulate_command_prints_the_documented_json(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    png = tmp_path / "t.png"
    assert simulate("--json", "--png", str(png)) == 0
    out = json.loads(capsys.readouterr().out)
    for key in (
        "requests",
        "slo_attainment",
        "infeasible_requests",
        "ttft_p95_s",
        "tpot_p95_s",
        "e2e_p99_s",
        "gpu_hours",
        "cost_usd",
        "oracle_gpu_hours",
        "oracle_infeasible_intervals",
        "scale_events",
        "max_replicas_used",
    ):
        assert key in out
    assert set(out["slo"]) == {"ttft_p95_s", "tpot_p95_s", "e2e_p99_s", "objective"}
    assert png.stat().st_size > 10_000


def test_bad_input_is_one_clear_error_line(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["simulate", "--stack", "dev", "--profile", "nope", "--trace", SHORT]) == 2
    assert "unknown engine profile 'nope'" in capsys.readouterr().err


def test_the_table_explains_attainment_and_infeasible_requests_and_intervals(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert simulate("--png", str(tmp_path / "t.png")) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "infeasible: requests no fleet serves within the SLO" in out
    assert "orc infeasible int: intervals whose feasible requests miss the objective" in out


def test_the_piped_table_fits_100_columns_and_keeps_every_number_whole(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert simulate("--png", str(tmp_path / "t.png")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert not any("…" in line for line in lines)


def test_wide_shows_every_column(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert simulate("--wide", "--png", str(tmp_path / "t.png")) == 0
    out = capsys.readouterr().out
    header = out[: out.index("┡")]  # the headers, wrapped over their lines
    assert "e2e" in header and "failed" in header and "infeasible" in header


OVERLOAD = "synthetic:step:base=10,peak=80,at=30,length=120,duration=180,prompt=512,output=128"


def test_the_table_says_how_many_warm_replicas_the_run_starts_from_and_why(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert simulate("--png", str(tmp_path / "t.png"), stack=str(unplanned("dev", tmp_path))) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "warm replicas: the oracle's fleet for the first 300 s within minReplicas 1..maxReplicas 3" in out


def test_initial_replicas_given_is_the_start_the_table_names(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert simulate("--initial-replicas", "1", "--png", str(tmp_path / "t.png")) == 0
    assert "starts from 1 warm replicas (--initial-replicas)" in " ".join(capsys.readouterr().out.split())


def test_a_fleet_pinned_at_max_replicas_is_named_in_the_table(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert simulate("--png", str(tmp_path / "t.png"), stack=str(unplanned("dev", tmp_path)), trace=OVERLOAD) == 0
    assert "stack dev (pinned at maxReplicas 3)" in capsys.readouterr().out


def test_simulate_replays_a_raw_scaledobject(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    reference = "capacity/policies/reference/karpenter-article.yaml"
    assert simulate("--json", "--scaledobject", reference, "--png", str(tmp_path / "t.png")) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["policy"] == reference and summary["scale_events"] > 0


def test_a_scaledobject_query_outside_the_subset_is_one_line_naming_it(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    text = (ROOT / "capacity/policies/reference/local-lab.yaml").read_text()
    path = tmp_path / "so.yaml"
    path.write_text(text.replace("max(vllm:kv_cache_usage_perc)", "quantile(0.9, vllm:kv_cache_usage_perc)"))
    assert main(["simulate", "--stack", "dev", "--trace", SHORT, "--scaledobject", str(path)]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "spec.triggers[1].metadata.query" in error and "'quantile'" in error


def test_simulate_writes_one_html_report_with_the_table_and_the_timeline(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    png, html = tmp_path / "t.png", tmp_path / "r.html"
    assert simulate("--png", str(png), "--html", str(html)) == 0
    assert f"report: {html}" in capsys.readouterr().out.replace("\n", "")
    report = Report(html)
    assert embeds(report, png)
    assert "stack dev" in [c.split(" (pinned at ")[0] for c in report.cells]  # pinned or not, the stack's row


def test_the_html_report_defaults_to_next_to_the_png(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert simulate("--json", "--png", str(tmp_path / "t.png")) == 0
    assert json.loads(capsys.readouterr().out)["html_report"] == str(tmp_path / "t.html")
    assert (tmp_path / "t.html").is_file()


def test_an_html_path_in_a_missing_directory_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert simulate("--html", str(tmp_path / "no" / "r.html")) == 2
    assert f"--html {tmp_path / 'no' / 'r.html'}: directory {tmp_path / 'no'} does not exist" in capsys.readouterr().err


def test_the_json_and_the_html_record_the_command_trace_seed_and_date(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert simulate("--json", "--seed", "3", "--png", str(tmp_path / "t.png")) == 0
    run = json.loads(capsys.readouterr().out)["run"]
    assert run["command"] == f"python -m capacity simulate --stack dev --profile {PROFILE} --trace {SHORT} " + (
        f"--json --seed 3 --png {tmp_path / 't.png'}"
    )
    assert (run["traces"], run["seed"]) == ([SHORT], 3) and datetime.fromisoformat(run["date"]).tzinfo is not None
    assert f"made by: {run['command']} (seed 3, {run['date']})" in Report(tmp_path / "t.html").text
