"""Container images the platform runs, pinned as `repository:tag@sha256:<digest>`, and the one
parser of an image reference.

The tag says which release; the digest is what a node pulls (containerd resolves a reference with
a digest by the digest alone), so a tag rebuilt in place (Docker Official Images are, whenever
their base image updates) cannot change what runs without a diff in `pulumi preview`.

Where each digest was read (the image index, i.e. the multi-platform manifest list):
- redis:7.4.10-alpine: docker-library/repo-info@5f43ebba1ab2676fd077894a1969fda3359ebfe8
  repos/redis/remote/7.4.10-alpine.md (an OCI index of 16 platforms; its images were built
  2026-07-26 on Alpine 3.21.7), read 2026-12-06;
- python:3.11.15-slim-bookworm: docker-library/repo-info@3effc3eac4f65a99767fd721667a1bf157496ba4
  repos/python/remote/3.11.15-slim-bookworm.md (an OCI index of 10 platforms; built 2026-08-05 on
  the bookworm snapshot of 2026-08-03), read 2026-12-06;
- vllm/vllm-openai:v0.25.1: vLLM publishes no digest in its release notes, and repo-info covers
  Docker Official Images only. The digest below is the one independent public repositories cite
  for this tag (found by code search on 2026-12-06: Dockerfiles `FROM vllm/vllm-openai:v0.25.1@...`,
  a pin table "captured at the clean --no-cache build of 2026-07-24", Kubernetes manifests), on
  arm64 (GB10) and amd64 (RTX PRO 6000, H200) hosts alike, so it is the multi-platform index. It
  was not read from the registry itself: run scripts/pin_image_digests.py where Docker Hub is
  reachable to confirm it (it rewrites nothing when the registry agrees).

Refresh (a new tag, or a rebuilt one): change the tag here, then
    .venv/bin/python scripts/pin_image_digests.py
which asks each registry for the tag's current digest and rewrites the references in this file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Written out whole so the refresh script can rewrite it; its repository and tag are the ones
# contract/signals.py names the metrics of (tests/contract/test_images.py holds them together).
VLLM_IMAGE = "vllm/vllm-openai:v0.25.1@sha256:e4f88a835143cd22aee2397a26ec6bb80b3a4a6fe0c882bcbc63822904766089"
# The model-sync Job's image (python 3.11, Debian bookworm); it pip-installs modelsync/requirements.txt.
SYNC_IMAGE = "python:3.11.15-slim-bookworm@sha256:d29f48a31a8b408ed19272ca1e7b10ebae13b240a27e862d3d4217c528e2e0c3"
# The rate-limit store (gateway.rateLimit.redisImage's default).
REDIS_IMAGE = (
    "docker.io/library/redis:7.4.10-alpine@sha256:e7723ff73d963f5cc6d9c4643ea3d989527a402a319239054e9472a7fb9219a2"
)

# registry[:port]/path[:tag][@sha256:digest] (the distribution reference grammar, lowercase paths;
# a port only before a path, so `redis:7` is a tag).
REFERENCE = re.compile(
    r"^(?P<repository>[a-z0-9.-]+(:\d+(?=/))?(/[a-z0-9._-]+)*)"
    r"(:(?P<tag>[\w][\w.-]{0,127}))?(@sha256:(?P<digest>[0-9a-f]{64}))?$"
)


@dataclass(frozen=True)
class ImageReference:
    repository: str  # as written, without tag or digest
    tag: str | None
    digest: str | None  # the 64 hex characters after `sha256:`

    @property
    def names_a_release(self) -> bool:
        """A tag other than latest, or a digest: a reference that names a release."""
        return self.digest is not None or (self.tag is not None and self.tag != "latest")


def parse(image: str) -> ImageReference | None:
    """The parts of an image reference, or None when it is not one."""
    match = REFERENCE.match(image)
    if match is None:
        return None
    return ImageReference(match["repository"], match["tag"], match["digest"])


def repository_name(image: str) -> str:
    """The repository without tag, digest and Docker Hub's implicit registry and `library/` prefix."""
    ref = parse(image)
    name = ref.repository if ref else image.split("@", 1)[0]
    return name.removeprefix("docker.io/").removeprefix("library/")
