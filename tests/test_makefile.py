"""The Makefile's deploy targets check what they are given before they touch Pulumi (issue 25, item 10)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def make(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`make ARGS` with a fake `pulumi` first on PATH that records every call it gets."""
    calls = tmp_path / "pulumi-calls"
    fake = tmp_path / "bin" / "pulumi"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("STACK", "MAKEFLAGS")}
    env["PATH"] = f"{fake.parent}:{env['PATH']}"
    done = subprocess.run(
        ["make", "-C", str(ROOT), "--no-print-directory", *args], env=env, capture_output=True, text=True, timeout=30
    )
    return done, calls


def test_up_with_a_misspelled_stack_stops_before_pulumi_creates_it(tmp_path):
    done, calls = make(tmp_path, "up", "STACK=prdo")
    assert done.returncode != 0
    assert "No stack file Pulumi.prdo.yaml: STACK must be one of: dev prod" in done.stderr
    assert not calls.exists()  # `pulumi stack select --create prdo` never ran


def test_preview_with_a_misspelled_stack_stops_before_pulumi(tmp_path):
    done, calls = make(tmp_path, "preview", "STACK=dve")
    assert "No stack file Pulumi.dve.yaml" in done.stderr and not calls.exists()


def test_destroy_without_a_stack_asks_for_one_before_anything_else(tmp_path):
    env_path = os.environ["PATH"]
    done = subprocess.run(
        ["make", "-C", str(ROOT), "--no-print-directory", "destroy"],
        env={"PATH": env_path, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0
    assert done.stderr.splitlines()[0] == "Name the stack to delete: make destroy STACK=dev"


def test_system_packages_go_through_sudo_when_not_root(tmp_path):
    fake_id = tmp_path / "bin" / "id"
    fake_id.parent.mkdir()
    fake_id.write_text("#!/bin/sh\necho 1000\n")  # `id -u` of an ordinary user
    fake_id.chmod(0o755)
    env = {"PATH": f"{fake_id.parent}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    done = subprocess.run(
        ["make", "-C", str(ROOT), "--no-print-directory", "-n", "system-packages"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "sudo apt-get update" in done.stdout and "sudo apt-get install" in done.stdout


def test_postgresql_is_installed_only_after_its_main_cluster_is_switched_off(tmp_path):
    """Debian's server package creates and starts a `main` cluster on install unless
    /etc/postgresql-common/createcluster.conf (which includes createcluster.d/) says
    `create_main_cluster = false` (postgresql-common's maintscripts-functions, configure_version);
    the tests start their own server instead."""
    done = subprocess.run(
        ["make", "-C", str(ROOT), "--no-print-directory", "-n", "system-packages"],
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    recipe = " ".join(done.stdout.split())  # `$(SUDO)` is empty as root
    switched_off = recipe.index(
        "echo 'create_main_cluster = false' | tee /etc/postgresql-common/createcluster.d/no-main-cluster.conf"
    )
    assert switched_off < recipe.index("apt-get install -y -qq postgresql >")
