"""Sweep outputs, the command table, and the lab end to end (small and fast)."""

import asyncio
import json
import subprocess
import sys

from capacity.__main__ import COMMANDS, build_parser
from capacity.engine import get_profile
from capacity.envelope import COLUMNS, read_envelope
from capacity.loadgen import LoadConfig
from capacity.mock.server import serve_replicas
from capacity.sweep import SweepOptions, run_sweep, write_outputs
from tests.capacity.conftest import REPO

FAST = get_profile("8gb-qwen2.5-1.5b")


def test_sweep_writes_envelope_csv_plot_and_report(tmp_path):
    async def sweep():
        async with serve_replicas(FAST, speedup=10) as [replica]:
            base = LoadConfig(urls=(replica.url,), concurrency=1, warmup_s=1, duration_s=8, time_scale=10,
                              prompt_tokens=100, output_tokens=50, stream=True)  # fmt: skip
            return await run_sweep(base, SweepOptions([1, 8], sample_interval_s=0.1))

    points = asyncio.run(sweep())
    paths = write_outputs(points, tmp_path, "test envelope", slo_p99=30, recommendations=["# none"])
    rows = read_envelope(paths["csv"])
    assert [r.concurrency for r in rows] == [1, 8]
    assert paths["csv"].read_text().splitlines()[0] == ",".join(COLUMNS)
    assert rows[1].successful_rps > rows[0].successful_rps
    assert rows[1].avg_kv_usage > rows[0].avg_kv_usage > 0  # sampled from /metrics
    assert rows[0].ttft_p95_s > 0
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| 8 |" in paths["md"].read_text() or "| 8 **(knee)** |" in paths["md"].read_text()


def test_every_command_in_the_table_is_registered():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)


def test_model_command_prints_the_predicted_steady_state_as_json():
    out = subprocess.run([sys.executable, "-m", "capacity", "model", "--profile", "a10g-r1-14b-awq",
                          "--concurrency", "20", "--prompt-tokens", "1024", "--output-tokens", "128", "--json"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout  # fmt: skip
    state = json.loads(out)
    for key in ("rps", "total_tokens_per_s", "p50_latency_s", "p95_latency_s", "p99_latency_s", "ttft_p95_s",
                "avg_waiting", "avg_kv_usage"):  # fmt: skip
        assert state[key] > 0, key


def test_bad_input_is_one_clear_line_not_a_traceback():
    run = subprocess.run([sys.executable, "-m", "capacity", "model", "--profile", "nope", "--concurrency", "2"],
                         cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 2
    assert "unknown engine profile 'nope'" in run.stderr and "Traceback" not in run.stderr


def test_lab_runs_the_whole_loop_and_prints_commands(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "capacity", "lab", "--profile", "8gb-qwen2.5-1.5b", "--replicas", "1",
         "--speedup", "40", "--concurrency", "1,32", "--prompt-tokens", "200", "--output-tokens", "100",
         "--warmup", "5", "--duration", "30", "--slo-p99", "30", "--stack", "dev", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Prometheus http://127.0.0.1:" in run.stdout
    # dev serves qwen25-1p5b with this profile, so the commands retune that model's block
    assert "pulumi config set --path 'autoscaling.qwen25-1p5b.triggers.queueDepth.targetPerReplica'" in run.stdout
    assert (tmp_path / "envelope.csv").is_file() and (tmp_path / "report.md").is_file()
    assert "What the autoscaler would have seen" in (tmp_path / "report.md").read_text()


def test_lab_targets_the_stack_model_served_with_its_profile() -> None:
    from capacity.lab import model_served_with

    assert model_served_with("prod", "a10g-r1-14b-awq") == "qwen25-14b-awq"
    assert model_served_with("dev", "a10g-r1-14b-awq") is None
