"""One stack resolver for every command: `--stack` as a name (`dev`), as a path (absolute, or
relative like `Pulumi.prod.yaml`), or a name with `--stack-dir DIR`; from the checkout or from any
other directory. Measured profiles come from `--profiles-dir` besides the shipped ones, and an
installed `profile --from-sweep` never writes into the package."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from capacity.__main__ import build_parser, main
from capacity.engine import measured
from contract.settings import stack_file
from contract.settings.stack_file import find_stack_file
from tests.capacity.conftest import CALIBRATION_CSV, REPO

RECOMMEND = ["recommend", "--envelope", str(CALIBRATION_CSV)]


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _capacity(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m capacity` run from `cwd`, with this checkout importable (as an install would be)."""
    return subprocess.run(
        [sys.executable, "-m", "capacity", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )


def _retuned(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("# retunes "))


@pytest.mark.parametrize(
    "name",
    ["lab", "sweep", "recommend", "simulate", "compare", "tune", "schedule", "plan", "explain", "collect", "profile"],
)
def test_every_command_with_a_stack_takes_a_stack_dir(name):
    dests = {a.dest for a in _commands()[name]._actions}
    assert {"stack", "stack_dir"} <= dests


@pytest.mark.parametrize(
    "name",
    [
        "lab",
        "sweep",
        "recommend",
        "simulate",
        "compare",
        "tune",
        "schedule",
        "plan",
        "explain",
        "profile",
        "model",
        "serve",
    ],
)
def test_every_command_that_names_a_profile_takes_a_profiles_dir(name):
    assert "profiles_dir" in {a.dest for a in _commands()[name]._actions}


def test_a_relative_stack_file_path_is_a_path_not_a_name(monkeypatch):
    """It once looked for Pulumi.Pulumi.prod.yaml.yaml."""
    monkeypatch.chdir(REPO)
    assert find_stack_file("Pulumi.prod.yaml") == Path("Pulumi.prod.yaml")


def test_a_name_is_looked_up_in_the_stack_dir_only(tmp_path):
    shutil.copy(REPO / "Pulumi.dev.yaml", tmp_path / "Pulumi.qa.yaml")
    assert find_stack_file("qa", tmp_path) == tmp_path / "Pulumi.qa.yaml"
    with pytest.raises(ValueError, match=r"stack 'dev': .*Pulumi.dev.yaml does not exist \(pass --stack-dir DIR"):
        find_stack_file("dev", tmp_path)


def test_from_another_directory_a_name_falls_back_to_the_checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert find_stack_file("dev") == stack_file.CHECKOUT / "Pulumi.dev.yaml"


def test_an_installed_package_never_looks_for_a_stack_inside_itself(tmp_path, monkeypatch):
    """Installed, the package's parent is site-packages (no Pulumi.yaml): only the working directory."""
    monkeypatch.setattr(stack_file, "CHECKOUT", tmp_path / "site-packages")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"stack 'dev': Pulumi.dev.yaml does not exist"):
        find_stack_file("dev")


def test_recommend_reads_an_absolute_stack_path_from_another_directory(tmp_path):
    done = _capacity(tmp_path, *RECOMMEND, "--stack", str(REPO / "Pulumi.dev.yaml"))
    assert done.returncode == 0, done.stderr
    assert "of dev " in _retuned(done.stdout)


def test_recommend_reads_a_name_in_a_stack_dir_from_another_directory(tmp_path):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    shutil.copy(REPO / "Pulumi.dev.yaml", stacks / "Pulumi.qa.yaml")
    done = _capacity(tmp_path, *RECOMMEND, "--stack", "qa", "--stack-dir", str(stacks))
    assert done.returncode == 0, done.stderr
    assert "of qa " in _retuned(done.stdout)
    assert all(
        line.endswith(("-s qa", "")) or "-s qa " in line
        for line in done.stdout.splitlines()
        if line.startswith("pulumi")
    )


def test_a_stack_dir_that_is_not_a_folder_is_one_line(capsys, tmp_path):
    assert main([*RECOMMEND, "--stack", "dev", "--stack-dir", str(tmp_path / "nope")]) == 2
    assert f"--stack-dir {tmp_path / 'nope'} is not a directory" in capsys.readouterr().err


def test_simulate_reads_a_relative_stack_path_where_it_runs(capsys, monkeypatch, tmp_path):
    shutil.copy(REPO / "Pulumi.dev.yaml", tmp_path / "Pulumi.dev.yaml")
    monkeypatch.chdir(tmp_path)
    trace = "synthetic:step:base=1,peak=2,at=60,length=60,duration=180,prompt=256,output=64"
    assert main(["simulate", "--stack", "Pulumi.dev.yaml", "--trace", trace, "--json"]) == 0
    assert '"policy": "stack dev"' in capsys.readouterr().out


def test_an_installed_profile_command_writes_outside_the_package(monkeypatch):
    monkeypatch.setattr(measured, "IN_CHECKOUT", False)
    monkeypatch.delenv(measured.PROFILES_DIR_ENV, raising=False)
    assert measured.write_dir() == Path("profiles")
    assert not measured.write_dir().resolve().is_relative_to(measured.MEASURED_DIR.resolve())


def test_a_profiles_dir_is_where_profiles_are_written_and_found_first(tmp_path, monkeypatch):
    monkeypatch.setenv(measured.PROFILES_DIR_ENV, str(tmp_path))
    assert measured.write_dir() == tmp_path
    assert measured.profile_dirs() == [tmp_path, measured.MEASURED_DIR]


def test_the_profiles_dir_flag_is_set_only_while_the_command_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(measured.PROFILES_DIR_ENV, raising=False)
    assert main(["model", "--profiles-dir", str(tmp_path), "--profile", "no-such-profile", "--concurrency", "1"]) == 2
    assert "unknown engine profile 'no-such-profile'" in capsys.readouterr().err
    assert measured.operator_dir() is None
