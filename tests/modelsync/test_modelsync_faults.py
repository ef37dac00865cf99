"""modelsync under fault injection: a real S3 API (moto_server on 127.0.0.1) behind a proxy that
holds a request (to land a signal inside a given call), corrupts a body, or drops a connection."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from modelsync_testkit import MODEL_ID, REVISION, TINY_MODEL, Fault, FaultProxy

from modelsync import MANIFEST_NAME
from modelsync.cli import main, s3_client
from modelsync.errors import SyncError
from modelsync.manifest import parse_manifest
from modelsync.sync import sync_model

PREFIX = f"{MODEL_ID}/{REVISION}"
MANIFEST_KEY = f"{PREFIX}/{MANIFEST_NAME}"
ROOT = Path(__file__).resolve().parents[2]
EXIT_WITHIN_SECONDS = 5.0


def manifest_version_ids(s3: Any, bucket: str) -> list[str]:
    versions = s3.list_object_versions(Bucket=bucket, Prefix=MANIFEST_KEY).get("Versions", [])
    return sorted(v["VersionId"] for v in versions)


def incomplete_uploads(s3: Any, bucket: str) -> list[dict[str, Any]]:
    return s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])


def through(cli_args: list[str], endpoint: str, *extra: str) -> list[str]:
    """The CLI arguments with the S3 endpoint swapped for the proxy's."""
    swapped = list(cli_args)
    swapped[swapped.index("--endpoint-url") + 1] = endpoint
    return [*swapped, *extra]


def start_cli(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "modelsync", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def publish_with_a_tampered_object(s3: Any, bucket: str, make_config: Any) -> None:
    """A published revision whose tokenizer.json was overwritten in place: a rerun must repair it."""
    sync_model(make_config(), s3)
    size = TINY_MODEL["tokenizer.json"]
    s3.put_object(Bucket=bucket, Key=f"{PREFIX}/tokenizer.json", Body=b"X" * size, ChecksumAlgorithm="SHA256")


# Every S3 call a run makes, as (method, path suffix, query) of the request held when SIGTERM lands.
LANDING_POINTS = {
    "stale-upload-listing": ("GET", "", "uploads"),
    "initial-listing": ("GET", "", "list-type=2"),
    "manifest-read": ("GET", MANIFEST_NAME, ""),
    "verification-head": ("HEAD", "", ""),
    "manifest-withdrawal": ("DELETE", MANIFEST_NAME, ""),
    "single-put": ("PUT", "config.json", ""),
    "create-multipart": ("POST", "", "uploads"),
    "upload-part": ("PUT", "", "partNumber=2"),
    "complete-multipart": ("POST", "", "uploadId="),
    "publish": ("PUT", MANIFEST_NAME, ""),
}


def hold_at(landing: str) -> Fault:
    method, path_suffix, query = LANDING_POINTS[landing]
    return Fault(method, path_suffix, query, action="hold")


NEEDS_PUBLISHED_REVISION = {"manifest-read", "verification-head", "manifest-withdrawal"}


@pytest.mark.parametrize("landing", sorted(LANDING_POINTS))
def test_sigterm_anywhere_exits_non_zero_within_seconds_publishing_nothing_leaving_no_upload(
    landing, s3, s3_endpoint, bucket, make_config, cli_args
):
    if landing in NEEDS_PUBLISHED_REVISION:
        publish_with_a_tampered_object(s3, bucket, make_config)
    published_before = manifest_version_ids(s3, bucket)

    with FaultProxy(s3_endpoint, hold_at(landing)) as proxy:
        run = start_cli(through(cli_args, proxy.endpoint, "--concurrency", "1", "--abort-stale-uploads-after", "3600"))
        try:
            assert proxy.held.wait(30), run.communicate(timeout=30)
            run.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            _, stderr = run.communicate(timeout=30)
            exited_after = time.monotonic() - signalled
        finally:
            run.kill()

    assert run.returncode == 1, stderr
    assert exited_after < EXIT_WITHIN_SECONDS, f"exited {exited_after:.1f}s after SIGTERM"
    assert "interrupted: received SIGTERM" in stderr
    assert "Traceback" not in stderr
    assert manifest_version_ids(s3, bucket) == published_before
    assert incomplete_uploads(s3, bucket) == []


def test_after_sigterm_a_rerun_publishes_the_verified_model(s3, s3_endpoint, bucket, make_config, cli_args, model_dir):
    with FaultProxy(s3_endpoint, hold_at("upload-part")) as proxy:
        run = start_cli(through(cli_args, proxy.endpoint, "--concurrency", "1"))
        assert proxy.held.wait(30), run.communicate(timeout=30)
        run.send_signal(signal.SIGTERM)
        run.communicate(timeout=30)

    report = sync_model(make_config(), s3)

    assert report.outcome == "published"
    for name in TINY_MODEL:
        body = s3.get_object(Bucket=bucket, Key=f"{PREFIX}/{name}")["Body"].read()
        assert body == (model_dir / name).read_bytes()


def test_sigkill_then_rerun_of_a_published_revision_leaves_no_incomplete_upload(
    s3, s3_endpoint, bucket, make_config, cli_args
):
    with FaultProxy(s3_endpoint, hold_at("upload-part")) as proxy:
        run = start_cli(through(cli_args, proxy.endpoint, "--concurrency", "1"))
        assert proxy.held.wait(30), run.communicate(timeout=30)
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=30)
    assert len(incomplete_uploads(s3, bucket)) == 1  # the killed run could not clean up
    assert sync_model(make_config(), s3).outcome == "published"  # another run publishes meanwhile
    assert len(incomplete_uploads(s3, bucket)) == 1

    rerun = start_cli([*cli_args, "--abort-stale-uploads-after", "1"])
    out, err = rerun.communicate(timeout=60)

    assert rerun.returncode == 0, err
    summary = json.loads(out)
    assert summary["outcome"] == "already-published"
    assert summary["staleUploadsAborted"] == 1  # moto dates every upload 2010-11-10, so it is stale
    assert incomplete_uploads(s3, bucket) == []


@pytest.mark.parametrize(
    "corruption",
    [
        pytest.param(lambda raw: raw[: len(raw) // 2], id="truncated-json"),
        pytest.param(lambda raw: raw.replace(b'"files": [', b'"files": "x", "was": ['), id="files-not-a-list"),
        pytest.param(lambda raw: b"\xff\xfe not utf-8", id="not-text"),
    ],
)
def test_an_unreadable_manifest_is_withdrawn_and_the_verified_model_republished(s3, bucket, make_config, corruption):
    sync_model(make_config(), s3)
    raw = s3.get_object(Bucket=bucket, Key=MANIFEST_KEY)["Body"].read()
    s3.put_object(Bucket=bucket, Key=MANIFEST_KEY, Body=corruption(raw))

    report = sync_model(make_config(), s3)

    assert report.outcome == "published"
    assert report.uploaded == ()  # every object verified in place
    healed = parse_manifest(s3.get_object(Bucket=bucket, Key=MANIFEST_KEY)["Body"].read(), "test")
    assert {f.path: f.size for f in healed.files} == TINY_MODEL
    assert sync_model(make_config(), s3).outcome == "already-published"


def test_a_single_put_corrupted_in_transit_is_caught_and_repaired_by_the_rerun(
    s3, s3_endpoint, bucket, make_config, model_dir
):
    # moto stores the body and echoes the checksum header it was sent: only the read-back can tell.
    with FaultProxy(s3_endpoint, Fault("PUT", path_suffix="config.json", action="corrupt")) as proxy:
        with pytest.raises(SyncError, match=r"checksum mismatch: .*config.json serves bytes with SHA-256"):
            sync_model(make_config(), s3_client(proxy.endpoint, "us-east-1", 4))
        assert proxy.applied and proxy.applied[0].startswith("corrupt PUT")
    assert manifest_version_ids(s3, bucket) == []

    report = sync_model(make_config(), s3)

    assert "config.json" in report.uploaded
    assert (
        s3.get_object(Bucket=bucket, Key=f"{PREFIX}/config.json")["Body"].read()
        == (model_dir / "config.json").read_bytes()
    )


def test_a_multipart_part_corrupted_in_transit_is_caught(s3, s3_endpoint, bucket, make_config):
    with FaultProxy(s3_endpoint, Fault("PUT", query="partNumber=1", action="corrupt")) as proxy:
        with pytest.raises(SyncError, match="checksum mismatch"):
            sync_model(make_config(), s3_client(proxy.endpoint, "us-east-1", 4))
    assert manifest_version_ids(s3, bucket) == []


def test_a_dropped_connection_is_retried_and_the_model_still_verifies(s3, s3_endpoint, bucket, make_config):
    with FaultProxy(s3_endpoint, Fault("PUT", query="partNumber=", action="drop", times=2)) as proxy:
        report = sync_model(make_config(), s3_client(proxy.endpoint, "us-east-1", 4))
        assert len(proxy.applied) == 2

    assert report.outcome == "published"
    assert sync_model(make_config(), s3).outcome == "already-published"


@pytest.mark.parametrize("kind", ["single-put", "multipart"])
def test_a_file_zeroed_between_hashing_and_upload_is_reported_as_changed(
    kind, s3, bucket, make_config, model_dir, monkeypatch
):
    import modelsync.sync as sync_module

    victim = "config.json" if kind == "single-put" else "model-00001-of-00002.safetensors"
    digest_file = sync_module.digest_file

    def digest_then_zero(path: Path, part_size: int) -> Any:
        digest = digest_file(path, part_size)
        if path.name == victim:
            path.write_bytes(b"\0" * path.stat().st_size)
        return digest

    monkeypatch.setattr(sync_module, "digest_file", digest_then_zero)

    with pytest.raises(SyncError, match=f"{victim} changed after it was hashed"):
        sync_model(make_config(concurrency=1), s3)
    assert manifest_version_ids(s3, bucket) == []
    assert incomplete_uploads(s3, bucket) == []


def test_a_file_truncated_between_hashing_and_upload_is_reported_as_changed_not_entity_too_small(
    s3, bucket, make_config, monkeypatch
):
    import modelsync.sync as sync_module

    victim = "model-00001-of-00002.safetensors"
    digest_file = sync_module.digest_file

    def digest_then_truncate(path: Path, part_size: int) -> Any:
        digest = digest_file(path, part_size)
        if path.name == victim:
            with path.open("r+b") as handle:
                handle.truncate(part_size + 10)
        return digest

    monkeypatch.setattr(sync_module, "digest_file", digest_then_truncate)

    with pytest.raises(SyncError, match=f"{victim} changed after it was hashed") as failure:
        sync_model(make_config(concurrency=1), s3)
    assert "EntityTooSmall" not in str(failure.value)
    assert incomplete_uploads(s3, bucket) == []


def test_a_part_size_below_the_s3_minimum_is_rejected_before_any_request(cli_args, capsys):
    args = through(cli_args, "http://127.0.0.1:9")  # nothing listens: any request would fail differently
    args[args.index("--part-size") + 1] = "1MiB"

    assert main(args) == 2
    assert "--part-size 1048576 must be between S3's part size limits, 5242880 (5 MiB)" in capsys.readouterr().err


def test_object_lock_keeps_the_published_version_but_does_not_stop_an_in_place_overwrite(s3):
    """Why the gate hashes: with Object Lock (compliance mode, the strictest) a same-size overwrite by
    anyone allowed s3:PutObject (the writer must be) still succeeds as a new current version, and the
    current version is what Mountpoint serves. The lock only keeps the original version recoverable."""
    import uuid

    name = f"locked-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    s3.put_object_lock_configuration(
        Bucket=name,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 1}},
        },
    )
    key = f"{PREFIX}/model.safetensors"
    original = s3.put_object(Bucket=name, Key=key, Body=b"1234", ChecksumAlgorithm="SHA256")

    s3.put_object(Bucket=name, Key=key, Body=b"4321", ChecksumAlgorithm="SHA256")

    assert s3.get_object(Bucket=name, Key=key)["Body"].read() == b"4321"  # what a mount would serve
    assert s3.get_object(Bucket=name, Key=key, VersionId=original["VersionId"])["Body"].read() == b"1234"
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError, match="AccessDenied"):
        s3.delete_object(Bucket=name, Key=key, VersionId=original["VersionId"], BypassGovernanceRetention=True)
