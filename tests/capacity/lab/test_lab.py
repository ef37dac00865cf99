"""The lab end to end (small and fast): mock replicas, Prometheus, a sweep, the commands."""

import subprocess
import sys

from tests.capacity.conftest import REPO


def test_lab_runs_the_whole_loop_and_prints_commands_for_the_stacks_slo(tmp_path):
    run = subprocess.run(
        # the 3B profile saturates at a few dozen sequences: a plateau by 128 clients even when a busy
        # machine slows the load generator (the 1.5B one needs 256+ streams to flatten)
        [
            sys.executable,
            "-m",
            "capacity",
            "lab",
            "--profile",
            "8gb-qwen2.5-3b-eager",
            "--model",
            "qwen25-1p5b",
            "--replicas",
            "1",
            "--speedup",
            "40",
            "--concurrency",
            "1,32,128",
            "--prompt-tokens",
            "200",
            "--output-tokens",
            "100",
            "--warmup",
            "5",
            "--duration",
            "30",
            "--stack",
            "dev",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Prometheus http://127.0.0.1:" in run.stdout
    assert "<= SLO 1s" in run.stdout  # dev's slo.ttftP95Seconds (no e2e target), no --slo-* flag given
    # --model names the block the commands retune
    assert "pulumi config set --path 'autoscaling.qwen25-1p5b.triggers.queueDepth.targetPerReplica'" in run.stdout
    assert (tmp_path / "envelope.csv").is_file() and (tmp_path / "report.md").is_file()
    assert "SLO attained" in run.stdout  # each level judged per request against dev's TTFT/TPOT SLO
    assert "## SLO attained per level" in (tmp_path / "report.md").read_text()
    assert "What the autoscaler would have seen" in (tmp_path / "report.md").read_text()
