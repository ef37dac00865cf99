"""`python -m capacity tune` end to end on a short trace."""

import json
from pathlib import Path

import pytest

from capacity.__main__ import main

ROOT = Path(__file__).resolve().parents[3]
PROFILE = "8gb-qwen2.5-1.5b"
SHORT = "synthetic:step:base=2,peak=20,at=60,length=240,duration=420,prompt=512,output=128"


def test_tune_command_prints_before_after_against_the_oracle_and_the_config_set_lines(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["tune", "--stack", "dev", "--profile", PROFILE, "--trace", SHORT, "--json", "--workers", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    for side in ("before", "after"):
        summary = out[side]
        assert summary["oracle_ratio"] == pytest.approx(summary["gpu_hours"] / summary["oracle_gpu_hours"], abs=0.01)
    assert [c["path"] for c in out["changes"]] == [
        line.split("'")[1].split(".", 2)[2] for line in out["pulumi_config_set"]
    ]


def test_when_no_policy_meets_the_target_tune_says_why_prints_no_lines_and_exits_1(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    flood = "synthetic:step:base=120,peak=120,at=10,length=10,duration=30,prompt=512,output=64"  # past 3 replicas
    argv = ["tune", "--stack", "dev", "--profile", PROFILE, "--trace", flood, "--slo-attainment", "0.99"]
    assert main(argv) == 1
    out = " ".join(capsys.readouterr().out.split())  # rich folds long lines
    assert "no policy in the search space (maxReplicas up to 3, the pools' budget) meets the target" in out
    assert "its fleet is pinned at maxReplicas 3, the pools' replica budget for the model" in out
    assert "already the cheapest" not in out and "pulumi config set" not in out
