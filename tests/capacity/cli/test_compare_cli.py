"""`python -m capacity compare` end to end on a short trace."""

import json
from pathlib import Path

from capacity.__main__ import main

ROOT = Path(__file__).resolve().parents[3]
PROFILE = "8gb-qwen2.5-1.5b"
SHORT = "synthetic:step:base=2,peak=30,at=120,length=300,duration=600,prompt=512,output=128"


def test_compare_command_includes_stack_references_static_and_oracle_with_its_infeasible_counts(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["compare", "--stack", "dev", "--profile", PROFILE, "--trace", SHORT, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = list(rows)
    assert names[0] == "stack dev" and names[-2].startswith("static ") and names[-1].startswith("oracle")
    assert names[1:-2] == ["reference benchmark-derived", "reference karpenter-article", "reference local-lab"]
    assert rows[names[-1]]["infeasible_requests"] == 0 and rows[names[-1]]["oracle_infeasible_intervals"] == 0
