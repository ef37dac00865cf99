"""Pure pieces of modelsync: hashing, manifest schema, sources, hub arguments and errors."""

from __future__ import annotations

import base64
import errno
import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from modelsync_testkit import MODEL_ID, REVISION

from modelsync.errors import SyncError
from modelsync.hashing import MAX_PARTS, composite_checksum, digest_file, part_size_for
from modelsync.manifest import ManifestFile, build_manifest, dump_manifest, parse_manifest
from modelsync.source import download_from_hub, hub_download_kwargs, list_files
from modelsync.store import checksum_matches, stale_uploads

MIB = 1024 * 1024


def test_digest_file_hashes_whole_file_and_each_part(tmp_path: Path):
    data = bytes(range(256)) * 40  # 10240 bytes -> parts of 4096, 4096, 2048
    path = tmp_path / "f"
    path.write_bytes(data)

    digest = digest_file(path, 4096)

    assert digest.sha256_hex == hashlib.sha256(data).hexdigest()
    assert digest.part_digests == tuple(hashlib.sha256(data[i : i + 4096]).digest() for i in (0, 4096, 8192))


def test_composite_checksum_is_sha256_of_concatenated_part_digests_with_part_count():
    parts = [hashlib.sha256(b"a").digest(), hashlib.sha256(b"b").digest()]
    expected = base64.b64encode(hashlib.sha256(parts[0] + parts[1]).digest()).decode() + "-2"

    assert composite_checksum(parts) == expected


def test_single_part_file_uses_the_full_object_checksum(tmp_path: Path):
    path = tmp_path / "f"
    path.write_bytes(b"hello")

    digest = digest_file(path, part_size_for(5, 8 * MIB, 8 * MIB))

    assert not digest.is_multipart
    assert digest.s3_checksum == base64.b64encode(hashlib.sha256(b"hello").digest()).decode()


def test_empty_file_has_one_part(tmp_path: Path):
    path = tmp_path / "empty"
    path.write_bytes(b"")

    assert digest_file(path, part_size_for(0, MIB, MIB)).part_digests == (hashlib.sha256(b"").digest(),)


def test_part_size_grows_in_whole_mib_to_stay_within_s3_part_limit():
    size = 8 * MIB * MAX_PARTS + 1

    chosen = part_size_for(size, 8 * MIB, 8 * MIB)

    assert chosen % MIB == 0 and -(-size // chosen) <= MAX_PARTS and chosen == 9 * MIB


def test_checksum_comparison_accepts_missing_part_suffix_but_not_a_different_count():
    assert checksum_matches("abc=-3", "abc=-3")
    assert checksum_matches("abc=", "abc=-3")
    assert not checksum_matches("abc=-2", "abc=-3")
    assert not checksum_matches(None, "abc=")


def test_only_uploads_older_than_the_age_limit_are_stale():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    uploads = [
        {"Key": "old", "Initiated": now - timedelta(hours=3)},
        {"Key": "new", "Initiated": now - timedelta(minutes=5)},
    ]

    assert [u["Key"] for u in stale_uploads(uploads, now, timedelta(hours=1))] == ["old"]


def test_manifest_round_trips_sorted_with_total_size():
    files = [ManifestFile("b.bin", 2, "b" * 64, "x-2"), ManifestFile("a.json", 1, "a" * 64, "y")]
    manifest = build_manifest(MODEL_ID, REVISION, files, now=datetime(2026, 1, 1, tzinfo=UTC))

    parsed = parse_manifest(dump_manifest(manifest), "m")

    assert parsed == manifest
    assert [f.path for f in parsed.files] == ["a.json", "b.bin"]
    assert b'"totalSize": 3' in dump_manifest(manifest)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(schemaVersion=2), "schemaVersion 2 is not the supported 1"),
        (lambda d: d["files"][0].update(sha256="ABC"), r"files\[0\].sha256 'ABC' must be 64 lowercase hex"),
        (
            lambda d: d["files"][0].update(path="../etc/passwd"),
            r"files\[0\].path '../etc/passwd' must be a non-empty relative",
        ),
        (lambda d: d.update(totalSize=99), "totalSize 99 is not the sum of file sizes 1"),
    ],
)
def test_manifest_parse_rejects_bad_fields_naming_them(mutate, message):
    import json

    manifest = build_manifest(MODEL_ID, REVISION, [ManifestFile("a", 1, "a" * 64, "y")])
    doc = json.loads(dump_manifest(manifest))
    mutate(doc)

    with pytest.raises(SyncError, match=message):
        parse_manifest(json.dumps(doc).encode(), "m")


def test_list_files_applies_include_and_exclude_globs(tmp_path: Path):
    for name in ("a.safetensors", "b.bin", "sub/c.json", "original/d.pth"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)

    found = list_files(tmp_path, ["*.safetensors", "*.json", "*.pth"], ["original/*"])

    assert [f.rel_path for f in found] == ["a.safetensors", "sub/c.json"]


def test_list_files_refuses_a_source_file_named_like_the_manifest(tmp_path: Path):
    (tmp_path / "_MANIFEST.json").write_text("{}")

    with pytest.raises(SyncError, match=r"reserved name _MANIFEST.json"):
        list_files(tmp_path, [], [])


def test_list_files_reports_a_broken_symlink(tmp_path: Path):
    (tmp_path / "weights.bin").symlink_to(tmp_path / "gone")

    with pytest.raises(SyncError, match="broken symlink"):
        list_files(tmp_path, [], [])


def test_hub_download_pins_the_commit_and_never_uses_a_cached_token(tmp_path: Path):
    kwargs = hub_download_kwargs(MODEL_ID, REVISION, tmp_path, ["*.json"], [], None, 4)

    assert kwargs["revision"] == REVISION and kwargs["repo_id"] == MODEL_ID
    assert kwargs["local_dir"] == str(tmp_path)
    assert kwargs["allow_patterns"] == ["*.json"] and kwargs["ignore_patterns"] is None
    assert kwargs["token"] is False


def test_hub_download_kwargs_match_snapshot_download_signature(tmp_path: Path):
    import inspect

    from huggingface_hub import snapshot_download

    accepted = inspect.signature(snapshot_download).parameters
    assert set(hub_download_kwargs(MODEL_ID, REVISION, tmp_path, [], [], "t", 4)) <= set(accepted)


def _hub_error(cls: type) -> Exception:
    import httpx2

    return cls("hub said no", response=httpx2.Response(404, request=httpx2.Request("GET", "https://hub.invalid/x")))


@pytest.mark.parametrize(
    "error, message",
    [
        (
            lambda: _hub_error(__import__("huggingface_hub.errors", fromlist=["x"]).RevisionNotFoundError),
            f"revision {REVISION} does not exist in {MODEL_ID}",
        ),
        (lambda: _hub_error(__import__("huggingface_hub.errors", fromlist=["x"]).GatedRepoError), "is gated"),
        (
            lambda: _hub_error(__import__("huggingface_hub.errors", fromlist=["x"]).RepositoryNotFoundError),
            "not found on the hub, or private",
        ),
        (lambda: OSError(errno.ENOSPC, "No space left on device"), "disk full while writing under"),
    ],
)
def test_hub_failures_become_clear_sync_errors(monkeypatch, tmp_path: Path, error, message):
    import huggingface_hub

    def fail(**_):
        raise error()

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fail)

    with pytest.raises(SyncError, match=message):
        download_from_hub(MODEL_ID, REVISION, tmp_path, [], [], None, 2)


def test_access_denied_names_the_operation_the_object_and_the_writer_identity():
    from botocore.exceptions import ClientError

    from modelsync.store import describe

    err = ClientError(
        {"Error": {"Code": "AccessDenied", "Message": "denied"}, "ResponseMetadata": {"HTTPStatusCode": 403}},
        "PutObject",
    )

    message = str(describe(err, "PUT", "s3://bkt/acme/m/rev/config.json"))

    assert message.startswith("access denied: PUT s3://bkt/acme/m/rev/config.json (AccessDenied)")
    assert "Pod Identity" in message


def test_cli_without_aws_credentials_exits_non_zero_saying_so(cli_args, monkeypatch, tmp_path, capsys):
    from modelsync.cli import main

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    assert main(cli_args) == 1
    assert "no AWS credentials" in capsys.readouterr().err
