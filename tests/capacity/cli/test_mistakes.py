"""A new user's first mistakes, each answered by one clear line naming the file and line, the
flag, the port or the URL: a non-zero exit and no traceback (issue 16's battery)."""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from capacity.__main__ import main
from capacity.planning.stack import load_stack_model
from tests.capacity.conftest import CALIBRATION_CSV, REPO
from tests.terminal import start_in_terminal

TRACE = "synthetic:step:duration=600"


@pytest.fixture
def fails(capsys):
    """Run a command in-process; assert it failed with one line and no traceback; that line."""

    def run(*argv: str) -> str:
        try:
            rc = main(list(argv))
        except SystemExit as exit_:  # argparse's own usage errors
            rc = exit_.code
        err = capsys.readouterr().err
        assert rc not in (0, None), err
        assert "Traceback" not in err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        return lines[0]

    return run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _closed_port() -> int:
    return _free_port()  # nothing listens on it once the probe socket is closed


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


# --- traces: the file and the line -------------------------------------------------------------


def test_a_token_count_that_is_not_an_integer_names_the_file_line_and_column(fails, tmp_path):
    path = _write(tmp_path, "t.csv", "offset_s,prompt_tokens,output_tokens\n0,10,5\n1,abc,5\n")
    line = fails("simulate", "--trace", str(path))
    assert f"{path}: line 3: prompt_tokens must be a whole number of tokens, got 'abc'" in line


def test_a_bad_timestamp_names_the_file_and_line(fails, tmp_path):
    path = _write(
        tmp_path,
        "t.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\nyesterday,396,109\n",
    )
    assert f"{path}: line 3: TIMESTAMP 'yesterday' is not a date-time" in fails("simulate", "--trace", str(path))


def test_a_header_only_trace_says_it_has_no_requests(fails, tmp_path):
    path = _write(tmp_path, "t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n")
    assert f"{path}: no requests in the trace" in fails("simulate", "--trace", str(path))


def test_a_short_row_names_its_line_and_the_missing_column(fails, tmp_path):
    path = _write(tmp_path, "t.csv", "offset_s,prompt_tokens,output_tokens\n0,10,5\n1,10\n")
    assert f"{path}: line 3: 3 columns expected" in (line := fails("simulate", "--trace", str(path)))
    assert "output_tokens is missing" in line


def test_a_broken_jsonl_line_is_numbered_as_in_the_file(fails, tmp_path):
    good = json.dumps({"timestamp": 0, "input_length": 5, "output_length": 6})
    path = _write(tmp_path, "t.jsonl", good + '\n{"timestamp": 1, "input_length": \n')
    assert f"{path}: line 2: not JSON" in fails("simulate", "--trace", str(path))


def test_jsonl_that_is_not_objects_names_the_line(fails, tmp_path):
    path = _write(tmp_path, "t.jsonl", "[0, 5, 6]\n")
    assert f"{path}: line 1: expected a JSON object" in fails("simulate", "--trace", str(path))


def test_zero_token_requests_are_refused_not_simulated_as_rejections(fails, tmp_path):
    path = _write(tmp_path, "t.csv", "offset_s,prompt_tokens,output_tokens\n0,10,5\n1,10,0\n")
    line = fails("simulate", "--trace", str(path))
    assert f"{path}: line 3: output_tokens must be >= 1 token" in line


def test_load_refuses_a_trace_with_negative_tokens_before_sending_anything(fails, tmp_path):
    path = _write(tmp_path, "t.csv", "offset_s,prompt_tokens,output_tokens\n0,-4,5\n")
    line = fails("load", "--url", f"http://127.0.0.1:{_closed_port()}", "--trace", str(path), "--out", str(tmp_path))
    assert f"{path}: line 2: prompt_tokens must be >= 1 token" in line


# --- policy files --------------------------------------------------------------------------------


def test_a_missing_policy_file_is_named(fails, tmp_path):
    missing = tmp_path / "nope.yaml"
    assert f"policy file {missing}: no such file or directory" in fails(
        "simulate", "--trace", TRACE, "--policy", str(missing)
    )


def test_a_malformed_policy_file_names_the_file_and_line(fails, tmp_path):
    path = _write(tmp_path, "p.yaml", "default:\n  minReplicas: [1,\n")
    assert f"policy file {path}: not YAML at line 3" in fails("compare", "--trace", TRACE, "--policy", str(path))


# --- load: the URL -----------------------------------------------------------------------------


def test_load_against_a_closed_port_names_the_url(fails, tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}"
    line = fails("load", "--url", url, "--concurrency", "1", "--out", str(tmp_path))
    assert f"--url {url}: cannot connect" in line and "refused" in line


def test_a_url_without_a_scheme_is_named(fails, tmp_path):
    line = fails("load", "--url", "127.0.0.1:8000", "--concurrency", "1", "--out", str(tmp_path))
    assert "--url 127.0.0.1:8000: expected http://HOST:PORT" in line


# --- serve: the port and the host --------------------------------------------------------------


def test_serve_on_a_port_in_use_names_the_port(fails):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in fails("serve", "--port", str(port))


def test_serve_on_port_70000_names_the_valid_range(fails):
    assert "--port: port 70000 is not in 1..65535" in fails("serve", "--port", "70000")


def test_serve_on_an_unresolvable_host_names_the_host(fails):
    assert "--host nope.invalid: cannot resolve it" in fails("serve", "--host", "nope.invalid")


def test_serve_refuses_a_negative_stream_interval(fails):
    assert "--stream-interval must be >= 1 token, got -1" in fails("serve", "--stream-interval", "-1")


# --- Prometheus: the URL, before any measurement ----------------------------------------------


def test_collect_with_prometheus_unreachable_names_the_url(fails):
    url = f"http://127.0.0.1:{_closed_port()}"
    assert f"Prometheus {url} unreachable" in fails("collect", "--prometheus", url, "--model", "m")


@pytest.fixture
def mock_replica():
    """One mock replica in a child process; its URL once it says it listens."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "capacity", "serve", "--port", str(port), "--speedup", "50"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 20)
        assert ready and "mock vLLM" in process.stdout.readline(), process.stderr.read()
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_sweep_with_prometheus_unreachable_fails_before_its_first_level(mock_replica, tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "capacity",
            "sweep",
            "--url",
            mock_replica,
            "--prometheus",
            url,
            "--concurrency",
            "1,2",
            "--warmup",
            "0",
            "--duration",
            "60",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        f"python -m capacity sweep: error: Prometheus {url} unreachable (GET /-/ready did not answer 200)"
    ]
    assert "concurrency" not in run.stdout  # no level ran


# --- lab: Ctrl-C ------------------------------------------------------------------------------


def test_ctrl_c_in_lab_is_one_line_and_stops_what_it_started(tmp_path):
    lab = start_in_terminal(
        [
            sys.executable,
            "-m",
            "capacity",
            "lab",
            "--replicas",
            "1",
            "--speedup",
            "20",
            "--concurrency",
            "1,2",
            "--duration",
            "600",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    printed, deadline = "", time.monotonic() + 60
    try:
        # The lab's own lines, up to the start of the sweep, read from the pipe's descriptor: a
        # readline() would leave a second line that arrived with the first in Python's buffer,
        # where select() cannot see it, and wait for the sweep's first level (~30 s) instead.
        while "lab: sweeping" not in printed and time.monotonic() < deadline:
            ready, _, _ = select.select([lab.stdout], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(lab.stdout.fileno(), 65536).decode() if ready else ""
            if not chunk:
                break
            printed += chunk
        replicas = [line for line in printed.splitlines() if "mock replica(s)" in line]
        assert replicas and "lab: sweeping" in printed, lab.stderr.read()
        replica_port = int(replicas[0].rsplit(":", 1)[1])
        os.killpg(lab.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
        _, err = lab.communicate(timeout=30)
    finally:
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait()
    assert lab.returncode == 130 and "Traceback" not in err
    assert err.strip().splitlines() == ["lab: interrupted; the mock replicas and Prometheus it started are stopped"]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", replica_port), timeout=2).close()


# --- the simulator's flags ---------------------------------------------------------------------


def test_compare_static_zero_is_refused_not_turned_into_the_oracle_peak(fails):
    assert "--static must be >= 1 replica, got 0" in fails("compare", "--trace", TRACE, "--static", "0")


def test_compare_static_negative_is_refused(fails):
    assert "--static must be >= 1 replica, got -2" in fails("compare", "--trace", TRACE, "--static", "-2")


def prod_max_replicas() -> int:
    """maxReplicas of the default stack's first model, which --initial-replicas is checked against."""
    return load_stack_model("prod", root=REPO).policy.max_replicas


def test_initial_replicas_below_zero_is_refused(fails):
    line = fails("simulate", "--trace", TRACE, "--initial-replicas", "-1")
    assert f"--initial-replicas must be within 0..maxReplicas ({prod_max_replicas()})" in line


def test_initial_replicas_above_max_replicas_is_refused(fails):
    line = fails("tune", "--trace", TRACE, "--initial-replicas", "1000")
    assert (
        f"--initial-replicas must be within 0..maxReplicas ({prod_max_replicas()}) of prod/qwen25-14b-awq, got 1000"
        in line
    )


def test_a_png_in_a_directory_that_does_not_exist_is_refused_not_created(fails, tmp_path):
    png = tmp_path / "nonexistent" / "dir" / "x.png"
    assert f"--png {png}: directory {png.parent} does not exist" in fails(
        "simulate", "--trace", TRACE, "--png", str(png)
    )
    assert not png.parent.exists()


def test_recommend_with_a_missing_stack_file_does_not_fall_back_to_another(fails):
    line = fails("recommend", "--envelope", str(CALIBRATION_CSV), "--stack", "/nope.yaml")
    assert "stack file /nope.yaml does not exist" in line


def test_recommend_refuses_an_envelope_without_a_plateau(fails, tmp_path):
    path = _write(tmp_path, "e.csv", "concurrency,successful_rps,p99_latency_s\n1,0.3,3\n2,0.6,3.1\n4,1.2,3.3\n")
    line = fails("recommend", "--envelope", str(path), "--slo-p99", "30", "--stack", "prod")
    assert "throughput still grows at concurrency 4: extend the sweep to find the knee" in line
