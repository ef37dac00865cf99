"""The command table, and commands run as a user runs them (one clear line on bad input)."""

import json
import subprocess
import sys

import pytest

from capacity.__main__ import COMMANDS, build_parser
from tests.capacity.conftest import CALIBRATION_CSV, REPO
from tests.capacity.conftest import CONFIG_SET_LINE as LINE


def test_every_command_in_the_table_is_registered():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)


def test_model_command_prints_the_predicted_steady_state_as_json():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "capacity",
            "model",
            "--profile",
            "a10g-r1-14b-awq",
            "--concurrency",
            "20",
            "--prompt-tokens",
            "1024",
            "--output-tokens",
            "128",
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (state,) = json.loads(out)
    for key in (
        "rps",
        "total_tokens_per_s",
        "p50_latency_s",
        "p95_latency_s",
        "p99_latency_s",
        "ttft_p95_s",
        "avg_waiting",
        "avg_kv_usage",
    ):
        assert state[key] > 0, key


def test_model_command_names_the_bound_that_limits_each_point():
    out = subprocess.run(
        [sys.executable, "-m", "capacity", "model", "--profile", "a10g-r1-14b-awq", "--concurrency", "1,40", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    idle, busy = json.loads(out)
    assert (idle["concurrency"], busy["concurrency"]) == (1, 40)
    assert idle["bound"] == "memory"  # one sequence: every step reads the weights for one token
    assert busy["bound"] in ("compute", "kv-capacity") and busy["why"]


def test_bad_input_is_one_clear_line_not_a_traceback():
    run = subprocess.run(
        [sys.executable, "-m", "capacity", "model", "--profile", "nope", "--concurrency", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert "unknown engine profile 'nope'" in run.stderr and "Traceback" not in run.stderr


def recommend_cli(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    """`recommend` run from outside the repository (the stack files come from its root)."""
    return subprocess.run(
        [sys.executable, "-m", "capacity", "recommend", "--envelope", str(CALIBRATION_CSV), "--slo-p99", "30", *extra],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )


def test_cli_prints_ready_to_run_lines_for_the_calibration_file(tmp_path):
    out = recommend_cli(tmp_path, "--stack", "prod").stdout
    lines = [line for line in out.splitlines() if line.startswith("pulumi config set")]
    assert lines and all(LINE.match(line) and " -s prod " in line for line in lines)
    assert "planning capacity: 1.54 req/s per replica at concurrency 20" in out


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_recommend_prints_only_values_the_stack_accepts(tmp_path, stack):
    # recommend applies every line it prints and validates the stack as a deploy would: exit 0
    # means each `pulumi config set` line passes (dev's 1.0 s TTFT SLO once got a 1.0 s guardrail).
    run = recommend_cli(tmp_path, "--stack", stack)
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if line.startswith("pulumi config set")]
    assert lines and all(LINE.match(line) and f" -s {stack} " in line for line in lines)


def test_recommend_never_sizes_max_replicas_past_the_pools_gpu_limit(tmp_path):
    # 1.54 req/s per replica at the calibration's planning concurrency: 90 req/s is 59 replicas
    out = recommend_cli(tmp_path, "--stack", "prod", "--model", "qwen25-14b-awq", "--peak-rps", "90").stdout
    assert "# not printed: autoscaling.qwen25-14b-awq.maxReplicas 59: would not deploy" in out
    assert "must fit the gpuLimit of pools ['gpu-on-demand', 'gpu-spot'] (40 GPUs)" in out
    assert not [line for line in out.splitlines() if line.startswith("pulumi config set") and "maxReplicas" in line]


def test_recommend_refuses_a_model_or_stack_that_does_not_exist_by_name(tmp_path):
    model = recommend_cli(tmp_path, "--stack", "prod", "--model", "gpt-5")
    stack = recommend_cli(tmp_path, "--stack", "staging")
    assert model.returncode == stack.returncode == 2 and not model.stdout and not stack.stdout
    assert "model 'gpt-5' is not in stack Pulumi.prod.yaml" in model.stderr
    assert "Pulumi.staging.yaml does not exist" in stack.stderr
