"""Create-only delivery (`--create-only`, what the model-sync Job runs): every write is
conditional on the key not existing (If-None-Match: *, S3 user guide "Enforce conditional writes
on Amazon S3 buckets"), nothing is deleted, so a published revision is never replaced; against a
real S3 API (moto_server on 127.0.0.1)."""

from __future__ import annotations

from typing import Any

import pytest
from modelsync_testkit import MODEL_ID, REVISION, TINY_MODEL, record_operations

from modelsync import MANIFEST_NAME
from modelsync.errors import SyncError
from modelsync.sync import sync_model

PREFIX = f"{MODEL_ID}/{REVISION}"
MANIFEST_KEY = f"{PREFIX}/{MANIFEST_NAME}"


def conditional_writes(s3: Any) -> list[tuple[str, dict[str, Any]]]:
    """(operation, params) of every object-creating call the client makes from now on."""
    seen: list[tuple[str, dict[str, Any]]] = []
    for operation in ("PutObject", "CompleteMultipartUpload"):
        s3.meta.events.register(
            f"provide-client-params.s3.{operation}",
            lambda params, op=operation, **_: seen.append((op, dict(params))),
        )
    return seen


def test_a_create_only_sync_makes_every_object_with_if_none_match(s3, bucket, make_config):
    writes = conditional_writes(s3)

    report = sync_model(make_config(create_only=True), s3)

    assert report.outcome == "published" and sorted(report.uploaded) == sorted(TINY_MODEL)
    assert {op for op, _ in writes} == {"PutObject", "CompleteMultipartUpload"}
    assert all(params.get("IfNoneMatch") == "*" for _, params in writes)


def test_a_create_only_rerun_of_a_published_revision_writes_nothing(s3, bucket, make_config):
    sync_model(make_config(create_only=True), s3)
    operations = record_operations(s3)

    report = sync_model(make_config(create_only=True), s3)

    assert report.outcome == "already-published"
    assert set(operations) <= {"ListObjectsV2", "GetObject", "HeadObject"}


def test_a_published_object_that_no_longer_verifies_fails_the_run_and_stays_published(s3, bucket, make_config):
    """Repairing would mean replacing it: the run names the object and who can act, deletes nothing."""
    sync_model(make_config(create_only=True), s3)
    s3.put_object(Bucket=bucket, Key=f"{PREFIX}/tokenizer.json", Body=b"X" * TINY_MODEL["tokenizer.json"])
    operations = record_operations(s3)

    with pytest.raises(SyncError, match=r"tokenizer\.json.*create-only.*removes the revision's prefix"):
        sync_model(make_config(create_only=True), s3)

    assert not {"DeleteObject", "PutObject", "CompleteMultipartUpload"} & set(operations)
    assert "Contents" in s3.list_objects_v2(Bucket=bucket, Prefix=MANIFEST_KEY)


def test_an_object_already_there_with_other_bytes_is_never_overwritten(s3, bucket, make_config):
    other = b"Y" * TINY_MODEL["config.json"]
    s3.put_object(Bucket=bucket, Key=f"{PREFIX}/config.json", Body=other)

    with pytest.raises(SyncError, match=r"config\.json already exists with other bytes; writes are create-only"):
        sync_model(make_config(create_only=True), s3)

    assert s3.get_object(Bucket=bucket, Key=f"{PREFIX}/config.json")["Body"].read() == other
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix=MANIFEST_KEY)


def test_a_multipart_object_already_there_is_never_overwritten(s3, bucket, make_config):
    shard = "model-00001-of-00002.safetensors"
    other = b"Z" * TINY_MODEL[shard]
    s3.put_object(Bucket=bucket, Key=f"{PREFIX}/{shard}", Body=other)

    with pytest.raises(SyncError, match=rf"{shard} already exists with other bytes"):
        sync_model(make_config(create_only=True), s3)

    assert s3.get_object(Bucket=bucket, Key=f"{PREFIX}/{shard}")["Body"].read() == other
