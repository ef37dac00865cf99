"""`python -m capacity compare` end to end on a short trace."""

import json
from pathlib import Path

from capacity.__main__ import main
from tests.html_page import Report, embeds

ROOT = Path(__file__).resolve().parents[3]
PROFILE = "8gb-qwen2.5-1.5b"
SHORT = "synthetic:step:base=2,peak=30,at=120,length=300,duration=600,prompt=512,output=128"


def test_compare_command_includes_stack_references_static_and_oracle_with_its_infeasible_counts(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert main(["compare", "--stack", "dev", "--profile", PROFILE, "--trace", SHORT, "--json", "--html", str(tmp_path / "r.html")]) == 0
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
    names = [c for c in report.cells if c.startswith(("stack ", "reference ", "static ", "oracle"))]
    assert names[:4] == ["stack dev", "reference benchmark-derived", "reference karpenter-article", "reference local-lab"]
    assert names[-1].startswith("oracle")
