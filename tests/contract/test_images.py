"""The platform's images are pinned by digest (contract/images.py), the one parser reads every
reference form the settings accept, and the maintainer script that refreshes the digests rewrites
exactly the references it resolves (offline: a fake resolver, and the registry protocol over
httpx's MockTransport)."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

from contract import images, signals
from contract.settings.gateway import RateLimitSettings
from contract.settings.models import ModelSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import pin_image_digests

OLD = "sha256:" + "1" * 64
NEW = "sha256:" + "2" * 64


@pytest.mark.parametrize("image", [images.VLLM_IMAGE, images.SYNC_IMAGE, images.REDIS_IMAGE])
def test_every_platform_image_names_its_release_and_its_digest(image: str) -> None:
    ref = images.parse(image)
    assert ref is not None and ref.tag and ref.digest and len(ref.digest) == 64


def test_the_vllm_image_is_the_release_whose_metric_names_signals_lists() -> None:
    ref = images.parse(images.VLLM_IMAGE)
    assert ref is not None and (ref.repository, ref.tag) == (signals.VLLM_IMAGE_REPOSITORY, signals.VLLM_IMAGE_TAG)


def test_settings_default_to_the_pinned_images() -> None:
    assert ModelSettings.model_fields["image"].default == images.VLLM_IMAGE
    assert RateLimitSettings().redis_image == images.REDIS_IMAGE


@pytest.mark.parametrize(
    ("image", "repository", "tag", "digest"),
    [
        ("redis:7", "redis", "7", None),
        ("localhost:5000/team/vllm:v1", "localhost:5000/team/vllm", "v1", None),
        ("vllm/vllm-openai@" + OLD, "vllm/vllm-openai", None, "1" * 64),
        ("docker.io/library/redis:7.4.10-alpine@" + OLD, "docker.io/library/redis", "7.4.10-alpine", "1" * 64),
    ],
)
def test_a_reference_splits_into_repository_tag_and_digest(
    image: str, repository: str, tag: str | None, digest: str | None
) -> None:
    assert images.parse(image) == images.ImageReference(repository, tag, digest)


def test_the_redis_cve_check_reads_the_tag_of_a_digest_pinned_reference() -> None:
    with pytest.raises(ValueError, match="CVE-2025-49844"):
        RateLimitSettings(redisImage="docker.io/library/redis:7.4.5-alpine@" + OLD)


def test_a_tag_and_digest_reference_is_accepted_as_a_model_image() -> None:
    assert ModelSettings.model_fields["image"].default.count("@sha256:") == 1
    assert images.parse("vllm/vllm-openai:latest@" + OLD).names_a_release  # type: ignore[union-attr]


# --- scripts/pin_image_digests.py ----------------------------------------------------------------


def test_the_refresh_rewrites_a_stale_digest_and_pins_a_tag_only_reference() -> None:
    text = f'A = "python:3.11.15-slim-bookworm@{OLD}"\nB = "docker.io/library/redis:7.4.10-alpine"\n'
    asked: list[tuple[str, str]] = []

    def resolve(repository: str, tag: str) -> str:
        asked.append((repository, tag))
        return NEW

    updated, changes = pin_image_digests.rewrite(text, resolve)
    assert asked == [("python", "3.11.15-slim-bookworm"), ("docker.io/library/redis", "7.4.10-alpine")]
    assert updated == f'A = "python:3.11.15-slim-bookworm@{NEW}"\nB = "docker.io/library/redis:7.4.10-alpine@{NEW}"\n'
    assert len(changes) == 2


def test_the_refresh_changes_nothing_when_the_registry_agrees() -> None:
    text = f'A = "python:3.11.15-slim-bookworm@{OLD}"\n'
    assert pin_image_digests.rewrite(text, lambda _r, _t: OLD) == (text, [])


def test_the_refresh_refuses_an_answer_that_is_not_a_digest() -> None:
    with pytest.raises(ValueError, match=r"python:3\.11: resolved to 'latest', not a sha256 digest"):
        pin_image_digests.rewrite('A = "python:3.11"\n', lambda _r, _t: "latest")


def test_the_refresh_rewrites_the_committed_module_only_where_its_three_references_are() -> None:
    text = Path(images.__file__).read_text()
    updated, changes = pin_image_digests.rewrite(text, lambda _r, _t: NEW)
    changed = [(a, b) for a, b in zip(text.splitlines(), updated.splitlines(), strict=True) if a != b]
    assert len(changes) == len(changed) == 3
    assert all(
        NEW in b and a.replace(a[a.index("@sha256:") : a.index("@sha256:") + 72], "@" + NEW) == b for a, b in changed
    )


@pytest.mark.parametrize(
    ("repository", "host", "name"),
    [
        ("redis", "registry-1.docker.io", "library/redis"),
        ("docker.io/library/redis", "registry-1.docker.io", "library/redis"),
        ("vllm/vllm-openai", "registry-1.docker.io", "vllm/vllm-openai"),
        ("public.ecr.aws/team/image", "public.ecr.aws", "team/image"),
    ],
)
def test_docker_hub_names_get_the_registry_and_library_prefix(repository: str, host: str, name: str) -> None:
    assert pin_image_digests.registry_and_name(repository) == (host, name)


def test_the_digest_is_read_after_the_registrys_token_challenge() -> None:
    """The distribution API's flow: 401 with a Bearer challenge, a token from its realm, the
    manifest HEAD again with the token; the digest is the Docker-Content-Digest header."""
    seen: list[str] = []

    def registry(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.host}{request.url.path}")
        if request.url.host == "auth.docker.io":
            assert request.url.params["scope"] == "repository:library/redis:pull"
            return httpx.Response(200, json={"token": "t0k"})
        if request.headers.get("Authorization") != "Bearer t0k":
            challenge = 'Bearer realm="https://auth.docker.io/token",service="registry.docker.io"'
            return httpx.Response(401, headers={"WWW-Authenticate": challenge})
        assert "application/vnd.oci.image.index.v1+json" in request.headers["Accept"]
        return httpx.Response(200, headers={"Docker-Content-Digest": NEW})

    with httpx.Client(transport=httpx.MockTransport(registry)) as client:
        assert pin_image_digests.registry_digest(client, "redis", "7.4.10-alpine") == NEW
    assert seen == [
        "HEAD registry-1.docker.io/v2/library/redis/manifests/7.4.10-alpine",
        "GET auth.docker.io/token",
        "HEAD registry-1.docker.io/v2/library/redis/manifests/7.4.10-alpine",
    ]
