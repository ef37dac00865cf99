"""The predictor gate, run exactly as the init container runs it: `python3 -c <script> ...`."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from modelsync.manifest import ManifestFile, build_manifest, dump_manifest
from modelsync_testkit import MODEL_ID, REVISION

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
        out_line = waiting.stdout.readline()  # type: ignore[union-attr]
        assert "waiting for the model" in out_line
        publish_locally(tmp_path, {"config.json": b"{}"})
        assert waiting.wait(timeout=20) == 0
    finally:
        waiting.kill()
