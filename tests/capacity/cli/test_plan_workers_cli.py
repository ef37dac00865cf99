"""`python -m capacity plan-workers`: the docs' command prints a Job Kubernetes accepts, and a
wrong flag is one line naming it, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from capacity.__main__ import main
from tests.capacity.conftest import REPO
from tests.docs.pages import capacity_command
from tests.k8s_schemas import validate


def test_the_pages_plan_workers_command_prints_a_valid_job_of_its_workers():
    """docs/tasks/plan-on-many-machines.md's `plan-workers` command, run as the page shows it."""
    argv = capacity_command("tasks/plan-on-many-machines.md", "plan-workers")
    run = subprocess.run([sys.executable, *argv[1:]], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    (job,) = list(yaml.safe_load_all(run.stdout))
    assert validate(job) == []
    assert job["spec"]["parallelism"] == int(argv[argv.index("--workers") + 1])
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[-3:] == ["--storage", "$(OPTUNA_STORAGE)", "--join"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--workers", "0"], "--workers must be >= 1, got 0"),
        (["--image", "registry.example/capacity:latest"], "must be pinned by tag or digest (never latest)"),
        (["--namespace", "Bad_Name"], "--namespace 'Bad_Name' is not a Kubernetes name"),
        (["--active-deadline-seconds", "-5"], "--active-deadline-seconds must be >= 1, got -5"),
    ],
)
def test_a_bad_flag_is_one_line_naming_it(capsys, flags, message):
    argv = ["plan-workers", "--image", "registry.example/capacity:1", "--namespace", "capacity", *flags]
    assert main([*argv, "--", "--stack", "prod"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert message in err


def test_plan_arguments_that_the_job_sets_itself_are_refused_in_one_line(capsys):
    argv = ["plan-workers", "--image", "registry.example/capacity:1", "--namespace", "capacity"]
    assert main([*argv, "--", "--stack", "prod", "--storage", "sqlite:///x.db"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "plan arguments must not contain --storage: the Job sets it on every worker" in err
