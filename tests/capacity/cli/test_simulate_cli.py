"""`python -m capacity simulate` end to end on a short trace."""

import json
from pathlib import Path

from capacity.__main__ import main

ROOT = Path(__file__).resolve().parents[3]
PROFILE = "8gb-qwen2.5-1.5b"
SHORT = "synthetic:step:base=2,peak=30,at=120,length=300,duration=600,prompt=512,output=128"


def test_simulate_command_prints_the_documented_json(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    png = tmp_path / "t.png"
    assert main(["simulate", "--stack", "dev", "--profile", PROFILE, "--trace", SHORT, "--json", "--png", str(png)]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("requests", "slo_attainment", "ttft_p95_s", "e2e_p99_s", "gpu_hours", "cost_usd",
                "oracle_gpu_hours", "scale_events", "max_replicas_used"):  # fmt: skip
        assert key in out
    assert png.stat().st_size > 10_000


def test_bad_input_is_one_clear_error_line(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["simulate", "--stack", "dev", "--profile", "nope", "--trace", SHORT]) == 2
    assert "unknown engine profile 'nope'" in capsys.readouterr().err
