"""`python -m capacity compare` end to end on a short trace."""

import json
from pathlib import Path

from capacity.__main__ import main
from contract.settings.stack_file import load_stack
from tests.html_page import Report, embeds
from tests.stacks import unplanned

ROOT = Path(__file__).resolve().parents[3]
POOL_GPUS = sum(pool.gpu_limit for pool in load_stack("prod", ROOT).gpu_capacity.pools)  # what prod's pools launch
PROFILE = "8gb-qwen2.5-1.5b"
SHORT = "synthetic:step:base=2,peak=30,at=120,length=300,duration=600,prompt=512,output=128"


def test_compare_command_includes_stack_references_static_and_oracle_with_its_infeasible_counts(
    capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(ROOT)
    assert (
        main(
            [
                "compare",
                "--stack",
                "dev",
                "--profile",
                PROFILE,
                "--trace",
                SHORT,
                "--json",
                "--html",
                str(tmp_path / "r.html"),
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    names = list(rows)
    assert names[0] == "stack dev" and names[-2].startswith("static ") and names[-1].startswith("oracle")
    assert names[1:-2] == ["reference benchmark-derived", "reference karpenter-article", "reference local-lab"]
    assert rows[names[-1]]["infeasible_requests"] == 0 and rows[names[-1]]["oracle_infeasible_intervals"] == 0


def test_compare_writes_one_html_report_with_every_policy_and_the_chart(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    html = tmp_path / "r.html"
    assert main(["compare", "--stack", "dev", "--profile", PROFILE, "--trace", SHORT, "--html", str(html)]) == 0
    assert f"report: {html}" in capsys.readouterr().out
    report = Report(html)
    assert embeds(report, tmp_path / "r.png")
    # a policy whose fleet reached its ceiling is named with a " (pinned at ...)" note
    names = [
        c.split(" (pinned at ")[0] for c in report.cells if c.startswith(("stack ", "reference ", "static ", "oracle"))
    ]
    assert names[:4] == [
        "stack dev",
        "reference benchmark-derived",
        "reference karpenter-article",
        "reference local-lab",
    ]
    assert names[-1].startswith("oracle")


def compare_rows(capsys, *extra: str) -> dict:
    assert main(["compare", "--profile", PROFILE, "--trace", SHORT, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_references_written_for_smaller_fleets_also_run_at_the_pools_limit(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    rows = compare_rows(capsys, "--stack", "prod", "--html", str(tmp_path / "r.html"))
    for name, written in (("benchmark-derived", 6), ("karpenter-article", 10), ("local-lab", 5)):
        assert f"reference {name}" in rows
        assert rows[f"reference {name} at the pools' limit ({POOL_GPUS})"]["max_replicas_used"] > 0
        assert rows[f"reference {name}"]["max_replicas_used"] <= written


def test_score_after_counts_only_the_requests_after_the_cut(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    whole = compare_rows(capsys, "--stack", "dev", "--html", str(tmp_path / "a.html"))
    tail = compare_rows(capsys, "--stack", "dev", "--score-after", "0.5", "--html", str(tmp_path / "b.html"))
    assert 0 < tail["stack dev"]["requests"] < whole["stack dev"]["requests"]
    assert tail["stack dev"]["gpu_hours"] < whole["stack dev"]["gpu_hours"]
    oracle = next(name for name in tail if name.startswith("oracle"))
    assert tail[oracle]["gpu_hours"] < whole[oracle]["gpu_hours"]


def test_a_stricter_oracle_attainment_never_needs_fewer_gpu_hours(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    default = compare_rows(capsys, "--stack", "dev", "--no-references", "--html", str(tmp_path / "a.html"))
    strict = compare_rows(
        capsys, "--stack", "dev", "--no-references", "--oracle-attainment", "0.999", "--html", str(tmp_path / "b.html")
    )
    assert (
        strict["oracle (300 s intervals, sized for 99.9%)"]["gpu_hours"]
        >= (default["oracle (300 s intervals, sized for 95%)"]["gpu_hours"])
    )


def test_score_after_outside_zero_to_one_is_refused_in_one_line(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["compare", "--stack", "dev", "--trace", SHORT, "--score-after", "1"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--score-after must be in [0, 1)" in err


def test_a_policy_file_restating_one_stack_value_simulates_exactly_as_the_stack(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    policy = tmp_path / "same.yaml"
    policy.write_text("qwen25-1p5b: {maxReplicas: 3}\n")  # dev's own ceiling: the overlay changes nothing
    args = ["--json", "--policy", str(policy), "--html", str(tmp_path / "r.html")]
    assert main(["compare", "--stack", "dev", "--profile", PROFILE, "--trace", SHORT, "--no-references", *args]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[str(policy)] == rows["stack dev"]


def test_a_policy_file_judged_by_another_slo_says_so_in_its_row(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    policy = tmp_path / "slo.yaml"
    policy.write_text("qwen25-1p5b: {slo: {ttftP95Seconds: 2.5}}\n")
    html = tmp_path / "r.html"
    assert (
        main(
            [
                "compare",
                "--stack",
                "dev",
                "--profile",
                PROFILE,
                "--trace",
                SHORT,
                "--no-references",
                "--policy",
                str(policy),
                "--html",
                str(html),
            ]
        )
        == 0
    )
    assert any(c.startswith(f"{policy} (SLO TTFT/TPOT 2.5/0.1 s; stack 1/0.1 s)") for c in Report(html).cells)


def test_the_header_says_where_a_scaledobject_starts_when_it_is_not_the_stacks_start(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    so = tmp_path / "so.yaml"
    so.write_text(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: pinned-one}\n"
        "spec:\n  scaleTargetRef: {name: p}\n  minReplicaCount: 1\n  maxReplicaCount: 1\n  triggers:\n"
        '    - type: prometheus\n      metadata: {serverAddress: "http://p:9090", '
        'query: "sum(vllm:num_requests_waiting)", threshold: "4"}\n'
    )
    args = ["--no-references", "--scaledobject", str(so), "--html", str(tmp_path / "r.html")]
    assert (
        main(["compare", "--stack", str(unplanned("dev", tmp_path)), "--profile", PROFILE, "--trace", SHORT, *args])
        == 0
    )
    out = " ".join(capsys.readouterr().out.split())
    assert "starts from 3 warm replicas" in out  # the oracle's first interval, within dev's 1..3
    assert "other ScaledObjects start within their own bounds: pinned-one 1" in out


def test_the_html_report_records_the_command_trace_seed_and_date(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    html = tmp_path / "r.html"
    args = ["compare", "--stack", "dev", "--profile", PROFILE, "--trace", SHORT, "--no-references", "--html", str(html)]
    assert main(args) == 0
    (line,) = [t for t in Report(html).text if t.startswith("made by: ")]
    assert line.startswith(f"made by: python -m capacity {' '.join(args)} (seed 0, ")


def test_the_default_static_fleet_is_the_oracles_peak_within_what_the_pools_hold(capsys, monkeypatch, tmp_path):
    # dev's pools hold 3 replicas; a minute at 120 req/s needs more
    monkeypatch.chdir(ROOT)
    heavy = SHORT.replace("peak=30,at=120,length=300", "peak=120,at=120,length=60")
    args = ["compare", "--stack", "dev", "--profile", PROFILE, "--trace", heavy, "--no-references", "--json"]
    assert main([*args, "--html", str(tmp_path / "r.html")]) == 0
    rows = json.loads(capsys.readouterr().out)
    (static,) = [name for name in rows if name.startswith("static ")]
    oracle = next(row for name, row in rows.items() if name.startswith("oracle"))
    assert static == f"static 3 (the pools' limit; the whole trace's oracle peaks at {oracle['max_replicas_used']})"
    assert oracle["max_replicas_used"] > 3 and rows[static]["max_replicas_used"] <= 3
