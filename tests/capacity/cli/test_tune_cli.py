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
