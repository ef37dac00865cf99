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


def test_simulate_replays_a_raw_scaledobject(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    reference = "capacity/policies/reference/karpenter-article.yaml"
    args = ["simulate", "--stack", "dev", "--profile", PROFILE, "--trace", SHORT, "--json", "--scaledobject", reference,
            "--png", str(tmp_path / "t.png")]  # fmt: skip
    assert main(args) == 0
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
