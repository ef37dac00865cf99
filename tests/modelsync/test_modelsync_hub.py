"""The hub path through the real huggingface_hub client, against a fake hub on 127.0.0.1
(the public hub is not reachable from tests)."""

from __future__ import annotations

from pathlib import Path

import pytest
from modelsync_testkit import MODEL_ID, REVISION, TINY_MODEL, FakeHub, write_model

from modelsync.errors import SyncError
from modelsync.sync import sync_model


@pytest.fixture
def hub(tmp_path: Path):
    with FakeHub(MODEL_ID, REVISION, write_model(tmp_path / "hub", TINY_MODEL, seed=7)) as fake:
        yield fake


def test_hub_source_downloads_the_pinned_commit_and_publishes_it(s3, make_config, hub, tmp_path: Path):
    report = sync_model(make_config(source="hf", staging_dir=tmp_path / "staging", hub_endpoint=hub.endpoint), s3)

    assert report.outcome == "published"
    assert sorted(report.uploaded) == sorted(TINY_MODEL)  # hub metadata under staging/.cache is not uploaded
    assert any(f"/resolve/{REVISION}/config.json" in r for r in hub.requests)


def test_hub_include_patterns_limit_what_is_downloaded(s3, make_config, hub, tmp_path: Path):
    report = sync_model(
        make_config(source="hf", staging_dir=tmp_path / "staging", hub_endpoint=hub.endpoint, include=["*.json"]), s3
    )

    assert sorted(report.uploaded) == ["config.json", "tokenizer.json"]
    assert not any("safetensors" in r for r in hub.requests)


def test_unknown_revision_fails_naming_it(s3, bucket, make_config, hub, tmp_path: Path):
    missing = "f" * 40

    with pytest.raises(SyncError, match=f"revision {missing} does not exist in {MODEL_ID}"):
        sync_model(
            make_config(
                source="hf",
                revision=missing,
                prefix=f"{MODEL_ID}/{missing}",
                staging_dir=tmp_path / "staging",
                hub_endpoint=hub.endpoint,
            ),
            s3,
        )

    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_unknown_or_private_repo_fails_with_a_token_hint(s3, make_config, hub, tmp_path: Path):
    with pytest.raises(SyncError, match="not found on the hub, or private and HF_TOKEN is missing"):
        sync_model(
            make_config(
                source="hf", model_id="acme/secret", staging_dir=tmp_path / "staging", hub_endpoint=hub.endpoint
            ),
            s3,
        )
