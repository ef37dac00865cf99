"""The predictor gate, run exactly as the init container runs it: `python3 -c <script> ...`."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from modelsync_testkit import MODEL_ID, REVISION

from modelsync.manifest import ManifestFile, build_manifest, dump_manifest

SCRIPT = (Path(__file__).resolve().parents[2] / "modelsync" / "mounted_check.py").read_text()


def publish_locally(root: Path, files: dict[str, bytes], revision: str = REVISION) -> Path:
    entries = []
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
        entries.append(ManifestFile(name, len(data), hashlib.sha256(data).hexdigest(), "x"))
    (root / "_MANIFEST.json").write_bytes(dump_manifest(build_manifest(MODEL_ID, revision, entries)))
    return root


def gate(model_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    # -I: isolated, like the serving image, so nothing from this repo is importable.
    return subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            SCRIPT,
            "--dir",
            str(model_dir),
            "--revision",
            REVISION,
            "--model-id",
            MODEL_ID,
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_complete_model_passes(tmp_path: Path):
    result = gate(publish_locally(tmp_path, {"config.json": b"{}", "w/model.safetensors": b"1234"}))

    assert result.returncode == 0, result.stderr
    assert "complete for revision" in result.stdout


def test_missing_manifest_fails_saying_the_sync_job_has_not_published(tmp_path: Path):
    (tmp_path / "config.json").write_bytes(b"{}")

    result = gate(tmp_path)

    assert result.returncode == 1
    assert "refusing to serve a partial model" in result.stderr and "has not published" in result.stderr


def test_manifest_of_another_revision_fails(tmp_path: Path):
    result = gate(publish_locally(tmp_path, {"config.json": b"{}"}, revision="f" * 40))

    assert result.returncode == 1
    assert f"the predictor pins '{REVISION}'" in result.stderr


def test_listed_file_missing_or_truncated_fails_naming_it(tmp_path: Path):
    publish_locally(tmp_path, {"a.bin": b"1234", "b.bin": b"5678"})
    (tmp_path / "a.bin").unlink()
    (tmp_path / "b.bin").write_bytes(b"56")

    result = gate(tmp_path)

    assert result.returncode == 1
    assert "'a.bin' is listed in the manifest but missing" in result.stderr
    assert "'b.bin' has 2 bytes, the manifest says 4" in result.stderr


def test_gate_waits_for_the_manifest_to_appear(tmp_path: Path):
    waiting = subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-c",
            SCRIPT,
            "--dir",
            str(tmp_path),
            "--revision",
            REVISION,
            "--timeout-seconds",
            "20",
            "--interval-seconds",
            "0.1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out_line = waiting.stdout.readline()  # type: ignore[union-attr]  # started with stdout=PIPE
        assert "waiting for the model" in out_line
        publish_locally(tmp_path, {"config.json": b"{}"})
        assert waiting.wait(timeout=20) == 0
    finally:
        waiting.kill()


def rewrite_manifest(root: Path, change) -> None:
    doc = json.loads((root / "_MANIFEST.json").read_text())
    change(doc)
    (root / "_MANIFEST.json").write_text(json.dumps(doc))


def assert_refused_in_one_line(result: subprocess.CompletedProcess[str], reason: str) -> None:
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("refusing to serve") and reason in result.stderr, result.stderr


def test_a_manifest_listing_no_files_is_refused(tmp_path: Path):
    publish_locally(tmp_path, {"config.json": b"{}"})
    rewrite_manifest(tmp_path, lambda doc: doc.update(files=[], totalSize=0))

    assert_refused_in_one_line(gate(tmp_path, "--timeout-seconds", "20"), "lists no files")


@pytest.mark.parametrize("escape", ["../../etc/hostname", "/etc/hostname", "w/../../outside.bin"])
def test_a_file_entry_escaping_the_mount_is_refused(tmp_path: Path, escape: str):
    model = publish_locally(tmp_path / "model", {"config.json": b"{}"})
    (tmp_path / "outside.bin").write_bytes(b"x")
    rewrite_manifest(model, lambda doc: doc["files"][0].update(path=escape))

    assert_refused_in_one_line(gate(model), f"{escape!r} escapes the model directory")


def test_a_symlink_out_of_the_mount_is_refused(tmp_path: Path):
    model = publish_locally(tmp_path / "model", {"config.json": b"{}"})
    (tmp_path / "secret").write_bytes(b"{}")
    (model / "config.json").unlink()
    (model / "config.json").symlink_to(tmp_path / "secret")

    assert_refused_in_one_line(gate(model), "'config.json' escapes the model directory")


def test_a_file_entry_that_is_not_an_object_is_refused_without_a_traceback(tmp_path: Path):
    publish_locally(tmp_path, {"config.json": b"{}"})
    rewrite_manifest(tmp_path, lambda doc: doc["files"].append("weights.bin"))

    assert_refused_in_one_line(gate(tmp_path), "files[1] is str 'weights.bin', not an object")


def test_a_size_written_as_a_string_is_refused_saying_so(tmp_path: Path):
    publish_locally(tmp_path, {"config.json": b"x" * 300})
    rewrite_manifest(tmp_path, lambda doc: doc["files"][0].update(size="300"))

    result = gate(tmp_path)

    assert_refused_in_one_line(result, "files[0].size '300' is not a byte count")
    assert "has 300 bytes, the manifest says 300" not in result.stderr


def test_an_object_overwritten_in_place_with_the_same_size_is_refused(tmp_path: Path):
    publish_locally(tmp_path, {"config.json": b"{}", "w/model.safetensors": b"1234"})
    (tmp_path / "w/model.safetensors").write_bytes(b"4321")

    result = gate(tmp_path, "--timeout-seconds", "20")  # no waiting: this is not a sync in progress

    assert_refused_in_one_line(result, "'w/model.safetensors' does not match its published SHA-256")


@pytest.mark.parametrize("verify", ["sha256", "size"])
def test_a_file_the_manifest_does_not_list_is_refused(tmp_path: Path, verify: str):
    """A key created under a published prefix after publishing (a create-only writer still may):
    vLLM would load an extra shard or a trust_remote_code module."""
    publish_locally(tmp_path, {"config.json": b"{}", "w/model.safetensors": b"1234"})
    (tmp_path / "w/model-extra.safetensors").write_bytes(b"evil")

    result = gate(tmp_path, "--verify", verify, "--timeout-seconds", "20")

    assert_refused_in_one_line(result, "holds files the manifest does not list: 'w/model-extra.safetensors'")


def test_size_only_verification_is_the_documented_trade_off_it_serves_same_size_tampering(tmp_path: Path):
    publish_locally(tmp_path, {"w/model.safetensors": b"1234"})
    (tmp_path / "w/model.safetensors").write_bytes(b"4321")

    result = gate(tmp_path, "--verify", "size")

    assert result.returncode == 0, result.stderr
    assert "sizes checked" in result.stdout


def test_a_verified_model_passes_saying_how_it_was_checked(tmp_path: Path):
    files = {f"model-{i}.safetensors": bytes([i]) * (1024 * 1024 + i) for i in range(6)}
    result = gate(publish_locally(tmp_path, files), "--parallel-reads", "3")

    assert result.returncode == 0, result.stderr
    assert "SHA-256 verified" in result.stdout


def test_check_mounted_help_and_documented_flags_work_through_the_package(tmp_path: Path):
    root = Path(__file__).resolve().parents[2]
    helped = subprocess.run(
        [sys.executable, "-m", "modelsync", "check-mounted", "--help"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert helped.returncode == 0, helped.stderr
    for flag in ("--dir", "--revision", "--model-id", "--verify", "--parallel-reads", "--timeout-seconds"):
        assert flag in helped.stdout

    publish_locally(tmp_path, {"config.json": b"{}"})
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "modelsync",
            "check-mounted",
            "--dir",
            str(tmp_path),
            "--revision",
            REVISION,
            "--model-id",
            MODEL_ID,
            "--verify",
            "sha256",
            "--timeout-seconds",
            "0",
            "--interval-seconds",
            "1",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert checked.returncode == 0, checked.stderr
    assert "complete for revision" in checked.stdout
