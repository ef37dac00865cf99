"""modelsync against a real S3 API (moto_server on 127.0.0.1), with a local directory as the hub."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from modelsync_testkit import MODEL_ID, REVISION, TINY_MODEL, record_operations

from modelsync import MANIFEST_NAME
from modelsync.cli import main
from modelsync.errors import SyncError
from modelsync.manifest import parse_manifest
from modelsync.sync import sync_model

PREFIX = f"{MODEL_ID}/{REVISION}"
MANIFEST_KEY = f"{PREFIX}/{MANIFEST_NAME}"
ROOT = Path(__file__).resolve().parents[2]


def manifest_versions(s3: Any, bucket: str) -> list[dict[str, Any]]:
    return s3.list_object_versions(Bucket=bucket, Prefix=MANIFEST_KEY).get("Versions", [])


def has_manifest(s3: Any, bucket: str) -> bool:
    return "Contents" in s3.list_objects_v2(Bucket=bucket, Prefix=MANIFEST_KEY)


def incomplete_uploads(s3: Any, bucket: str) -> list[dict[str, Any]]:
    return s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])


def test_first_sync_uploads_every_file_and_publishes_a_verified_manifest(s3, bucket, make_config):
    report = sync_model(make_config(), s3)

    assert report.outcome == "published"
    assert sorted(report.uploaded) == sorted(TINY_MODEL)
    manifest = parse_manifest(s3.get_object(Bucket=bucket, Key=MANIFEST_KEY)["Body"].read(), "test")
    assert (manifest.model_id, manifest.revision) == (MODEL_ID, REVISION)
    assert {f.path: f.size for f in manifest.files} == TINY_MODEL
    for entry in manifest.files:
        head = s3.head_object(Bucket=bucket, Key=f"{PREFIX}/{entry.path}", ChecksumMode="ENABLED")
        assert head["ContentLength"] == entry.size
        assert head["Metadata"]["sha256"] == entry.sha256
        assert head["ChecksumSHA256"].split("-")[0] == entry.s3_checksum.split("-")[0]


def test_multipart_files_get_a_composite_sha256_checksum(s3, bucket, make_config):
    sync_model(make_config(), s3)

    manifest = parse_manifest(s3.get_object(Bucket=bucket, Key=MANIFEST_KEY)["Body"].read(), "test")
    checksums = {f.path: f.s3_checksum for f in manifest.files}
    assert checksums["model-00001-of-00002.safetensors"].endswith("-4")  # 3 full parts + a tail
    assert "-" not in checksums["config.json"]


def test_second_sync_of_an_unchanged_model_only_lists_and_heads(s3, bucket, make_config):
    sync_model(make_config(), s3)
    operations = record_operations(s3)

    report = sync_model(make_config(), s3)

    assert report.outcome == "already-published"
    assert report.uploaded == ()
    assert set(operations) <= {"ListObjectsV2", "GetObject", "HeadObject"}
    assert len(manifest_versions(s3, bucket)) == 1


def test_sync_without_manifest_skips_files_already_verified_in_s3(s3, bucket, make_config):
    sync_model(make_config(), s3)
    s3.delete_object(Bucket=bucket, Key=MANIFEST_KEY)
    operations = record_operations(s3)

    report = sync_model(make_config(), s3)

    assert report.outcome == "published"
    assert report.uploaded == ()
    assert sorted(report.skipped) == sorted(TINY_MODEL)
    assert operations.count("PutObject") == 1  # the manifest
    assert not {"CreateMultipartUpload", "UploadPart"} & set(operations)


def test_corrupted_object_is_detected_replaced_and_the_model_republished(s3, bucket, make_config, model_dir):
    sync_model(make_config(), s3)
    victim = "tokenizer.json"
    original = (model_dir / victim).read_bytes()
    manifest = parse_manifest(s3.get_object(Bucket=bucket, Key=MANIFEST_KEY)["Body"].read(), "test")
    recorded = {f.path: f.sha256 for f in manifest.files}[victim]
    # Same size, different bytes, and even the original sha256 forged into the metadata.
    s3.put_object(
        Bucket=bucket,
        Key=f"{PREFIX}/{victim}",
        Body=b"X" * len(original),
        ChecksumAlgorithm="SHA256",
        Metadata={"sha256": recorded},
    )

    report = sync_model(make_config(), s3)

    assert report.outcome == "published"
    assert report.uploaded == (victim,)
    assert s3.get_object(Bucket=bucket, Key=f"{PREFIX}/{victim}")["Body"].read() == original


def test_a_failed_upload_aborts_its_multipart_upload_and_leaves_no_manifest(s3, bucket, make_config):
    def fail_second_part(params: dict[str, Any], **_: Any) -> None:
        if params["PartNumber"] == 2:
            raise ConnectionError("network dropped")

    s3.meta.events.register("before-parameter-build.s3.UploadPart", fail_second_part)

    with pytest.raises(ConnectionError):
        sync_model(make_config(concurrency=1), s3)

    assert not has_manifest(s3, bucket)
    assert incomplete_uploads(s3, bucket) == []


def test_bytes_corrupted_in_transit_fail_the_sync_with_a_checksum_mismatch_and_no_manifest(s3, bucket, make_config):
    # Real S3 rejects the part (BadDigest); moto stores it and reports the composite of what it got.
    def corrupt_part(params: dict[str, Any], **_: Any) -> None:
        if params["PartNumber"] == 1:
            params["Body"] = b"\0" * len(params["Body"])

    s3.meta.events.register("before-parameter-build.s3.UploadPart", corrupt_part)

    with pytest.raises(SyncError, match="checksum mismatch"):
        sync_model(make_config(), s3)

    assert not has_manifest(s3, bucket)


def test_two_concurrent_runs_publish_exactly_one_manifest(s3, bucket, make_config):
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def run() -> None:
        barrier.wait()
        outcomes.append(sync_model(make_config(), s3).outcome)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    # Which one loses depends on the scheduler: the other run either finds the manifest already there
    # or loses the conditional publish (the deterministic interleaving is the next test's).
    assert len(outcomes) == 2 and outcomes.count("published") == 1
    assert set(outcomes) - {"published"} <= {"published-by-concurrent-run", "already-published"}
    assert len(manifest_versions(s3, bucket)) == 1


def test_a_run_that_loses_the_publish_race_accepts_the_winners_identical_manifest(s3, bucket, make_config):
    # Deterministic interleaving: the other run publishes after this run checked, before it writes.
    def publish_first(params: dict[str, Any], **_: Any) -> None:
        if params["Key"] == MANIFEST_KEY and "IfNoneMatch" in params and not has_manifest(s3, bucket):
            other = params["Body"]
            s3.put_object(Bucket=bucket, Key=MANIFEST_KEY, Body=other)

    s3.meta.events.register("before-parameter-build.s3.PutObject", publish_first)

    report = sync_model(make_config(), s3)

    assert report.outcome == "published-by-concurrent-run"
    assert len(manifest_versions(s3, bucket)) == 1


def test_a_manifest_for_another_revision_at_the_prefix_is_an_error(s3, bucket, make_config):
    sync_model(make_config(), s3)
    other = "f" * 40

    with pytest.raises(SyncError, match="each revision needs its own --prefix"):
        sync_model(make_config(revision=other), s3)


def test_stale_multipart_uploads_of_dead_runs_are_aborted(s3, bucket, make_config):
    s3.create_multipart_upload(
        Bucket=bucket, Key=f"{PREFIX}/model-00001-of-00002.safetensors", ChecksumAlgorithm="SHA256"
    )
    from datetime import timedelta

    report = sync_model(make_config(stale_upload_age=timedelta(hours=1)), s3)

    assert report.stale_uploads_aborted == 1  # moto dates every upload 2010-11-10, so it is stale
    assert incomplete_uploads(s3, bucket) == []


KILL_DRIVER = """
import sys, time, pathlib
import modelsync.cli as cli
marker, operation, after = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
make_client, calls = cli.s3_client, []

def hanging_client(*args, **kwargs):
    client = make_client(*args, **kwargs)
    def hang(**_):
        calls.append(1)
        if len(calls) == after:
            marker.write_text("hung")
            time.sleep(600)
    client.meta.events.register("after-call.s3." + operation, hang)
    return client

cli.s3_client = hanging_client
sys.exit(cli.main(sys.argv[4:]))
"""


def test_a_run_killed_mid_upload_is_resumed_without_reuploading_finished_files(
    s3, bucket, make_config, cli_args, tmp_path
):
    driver, marker = tmp_path / "driver.py", tmp_path / "hung"
    driver.write_text(KILL_DRIVER)
    # One file at a time in name order: config.json, model-00001 (4 parts), ... Freeze after part 2 of model-00001.
    run = subprocess.Popen(
        [sys.executable, str(driver), str(marker), "UploadPart", "2", *cli_args, "--concurrency", "1"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "the sync never reached the second part"
        time.sleep(0.05)
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=10)
    assert len(incomplete_uploads(s3, bucket)) == 1
    from datetime import timedelta

    report = sync_model(make_config(stale_upload_age=timedelta(hours=1)), s3)

    assert report.skipped == ("config.json",)
    assert sorted(report.uploaded) == sorted(set(TINY_MODEL) - {"config.json"})
    assert report.stale_uploads_aborted == 1
    assert incomplete_uploads(s3, bucket) == []
    assert report.outcome == "published"


def test_sigterm_aborts_the_in_flight_multipart_upload_and_exits_non_zero(s3, bucket, cli_args, tmp_path):
    driver, marker = tmp_path / "driver.py", tmp_path / "hung"
    driver.write_text(KILL_DRIVER.replace("time.sleep(600)", "time.sleep(2)"))
    run = subprocess.Popen(
        [sys.executable, str(driver), str(marker), "UploadPart", "1", *cli_args, "--concurrency", "1"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=30)

    assert run.returncode == 1
    assert "interrupted: received SIGTERM" in stderr
    assert incomplete_uploads(s3, bucket) == []
    assert not has_manifest(s3, bucket)


def test_cli_prints_a_json_summary_and_exits_zero(cli_args, capsys):
    assert main(cli_args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["outcome"] == "published"
    assert summary["uploadedFiles"] == len(TINY_MODEL)


def test_cli_exits_non_zero_naming_a_missing_bucket(cli_args, bucket, capsys):
    args = [a if a != bucket else "no-such-bucket-here" for a in cli_args]

    assert main(args) == 1
    err = capsys.readouterr().err
    assert "no-such-bucket-here" in err and "does not exist" in err


def test_cli_rejects_a_branch_name_as_revision(cli_args, capsys):
    args = [a if a != REVISION else "main" for a in cli_args]

    assert main(args) == 2
    assert "--revision 'main' must be a 40-character lowercase hex commit id" in capsys.readouterr().err


def test_empty_include_match_fails_before_uploading_anything(s3, bucket, make_config):
    with pytest.raises(SyncError, match="no files under"):
        sync_model(make_config(include=["*.gguf"]), s3)

    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_include_patterns_select_the_published_files(s3, bucket, make_config):
    report = sync_model(make_config(include=["*.json"]), s3)

    assert sorted(report.uploaded) == ["config.json", "tokenizer.json"]


def test_a_writer_not_allowed_to_list_multipart_uploads_still_syncs(s3, bucket, make_config):
    from datetime import timedelta

    from botocore.exceptions import ClientError

    def deny(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "ListMultipartUploads")

    s3.meta.events.register("before-call.s3.ListMultipartUploads", deny)

    report = sync_model(make_config(stale_upload_age=timedelta(hours=1)), s3)

    assert report.outcome == "published" and report.stale_uploads_aborted == 0


def test_two_concurrent_cli_processes_leave_one_published_manifest(s3, bucket, cli_args):
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "modelsync", *cli_args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for _ in range(2)
    ]
    results = [run.communicate(timeout=60) for run in runs]

    assert [run.returncode for run in runs] == [0, 0], [err for _, err in results]
    outcomes = sorted(json.loads(out)["outcome"] for out, _ in results)
    # The loser either lost the conditional write or started after the winner had published.
    assert outcomes.count("published") == 1
    assert len(manifest_versions(s3, bucket)) == 1
