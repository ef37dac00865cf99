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


def _dry_run(*args: str, path: str | None = None) -> str:
    done = subprocess.run(
        [shutil.which("make") or "make", "-C", str(ROOT), "--no-print-directory", "-n", *args],
        env={"PATH": path or os.environ["PATH"], "HOME": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("target", ["up", "preview"])
def test_up_and_preview_need_only_the_venv_and_the_pulumi_cli(target):
    """Issue 37: both ran `apt-get install prometheus` first, which stops at `apt-get: not found` on macOS."""
    recipe = _dry_run(target, "STACK=dev", "-W", "requirements.txt")  # the venv rebuilt too: its recipe shows
    assert "pulumi up --stack dev" in recipe or "pulumi preview --stack dev" in recipe
    assert "-m venv .venv" in recipe
    assert "apt-get" not in recipe and "prometheus" not in recipe.replace("kube-prometheus", "")


def _pythons(tmp_path: Path, versions: dict[str, bool]) -> str:
    """A PATH holding only fake interpreters: each answers the Makefile's version probe (>= 3.11 or not)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, new_enough in versions.items():
        (folder / name).write_text(f"#!/bin/sh\nexit {0 if new_enough else 1}\n")
        (folder / name).chmod(0o755)
    return str(folder)


def test_the_venv_is_made_with_the_first_python_of_3_11_or_newer(tmp_path):
    path = _pythons(tmp_path, {"python3": False, "python3.13": True, "python3.11": True})
    assert "python3.13 -m venv .venv" in _dry_run("-W", "requirements.txt", ".venv/.installed", path=path)


def test_without_a_python_of_3_11_or_newer_the_venv_recipe_stops_with_one_line(tmp_path):
    path = _pythons(tmp_path, {"python3": False})
    done = subprocess.run(
        [
            shutil.which("make") or "make",
            "-C",
            str(ROOT),
            "--no-print-directory",
            "-W",
            "requirements.txt",
            ".venv/.installed",
        ],
        env={"PATH": path, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0
    assert (
        "Python >= 3.11 is needed: none of python3 python3.14 python3.13 python3.12 python3.11 on PATH is"
        in done.stderr
    )
    assert "-m venv" not in done.stdout


def test_prometheus_is_unpacked_from_its_package_never_installed_as_a_service():
    """`dpkg-deb -x` extracts files and runs no maintainer script (dpkg-deb(1)): the package's postinst,
    which enables and starts prometheus.service, never runs; nor does its node-exporter Recommends come."""
    recipe = " ".join(_dry_run("prometheus-tools").split())
    assert "apt-get download -qq prometheus && dpkg-deb -x prometheus_" in recipe
    assert "apt-get install" not in recipe and "systemctl" not in recipe
    assert "install -y -qq prometheus" not in _dry_run("system-packages")
