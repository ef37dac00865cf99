"""Pin the platform's container images (contract/images.py) to the digests their registries serve
for each tag now, so a tag re-pushed upstream changes nothing until a maintainer re-runs this.

Run where the registries are reachable (not in the sandbox the repository is built in):

    .venv/bin/python scripts/pin_image_digests.py            # rewrite contract/images.py
    .venv/bin/python scripts/pin_image_digests.py --check    # exit 1 if a digest is stale, write nothing

Every quoted `repository:tag` or `repository:tag@sha256:<digest>` in the file is resolved with the
OCI distribution API (HEAD /v2/<name>/manifests/<tag>, `Docker-Content-Digest`), anonymously or with
the bearer token the registry's `WWW-Authenticate` challenge offers (Docker Hub's auth.docker.io).
The digest is the image index's (all platforms), as `docker buildx imagetools inspect` prints it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contract.images import parse

IMAGES = Path(__file__).resolve().parents[1] / "contract" / "images.py"
QUOTED = re.compile(r'"([a-z0-9][^"\s]*:[^"\s]+)"')
# What a registry may answer for a tag: an index / manifest list first, a single manifest otherwise.
MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
Resolver = Callable[[str, str], str]


def registry_and_name(repository: str) -> tuple[str, str]:
    """(registry host, repository path) with Docker Hub's defaults (`redis` -> library/redis)."""
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, name = first, rest
    else:
        host, name = "docker.io", repository
    if host == "docker.io":
        host = "registry-1.docker.io"
        name = name if "/" in name else f"library/{name}"
    return host, name


def _bearer_token(client: httpx.Client, challenge: str, name: str) -> str:
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    if not challenge.lower().startswith("bearer ") or "realm" not in params:
        raise ValueError(f"registry challenge {challenge!r} is not a bearer token challenge")
    query = {"service": params.get("service", ""), "scope": params.get("scope", f"repository:{name}:pull")}
    response = client.get(params["realm"], params=query)
    response.raise_for_status()
    body = response.json()
    return str(body.get("token") or body["access_token"])


def registry_digest(client: httpx.Client, repository: str, tag: str) -> str:
    """The digest the registry serves for repository:tag now."""
    host, name = registry_and_name(repository)
    url = f"https://{host}/v2/{name}/manifests/{tag}"
    headers = {"Accept": MANIFEST_TYPES}
    response = client.head(url, headers=headers)
    if response.status_code == 401:
        token = _bearer_token(client, response.headers.get("WWW-Authenticate", ""), name)
        response = client.head(url, headers={**headers, "Authorization": f"Bearer {token}"})
    response.raise_for_status()
    digest = str(response.headers.get("Docker-Content-Digest", ""))
    if not DIGEST.match(digest):
        raise ValueError(f"{repository}:{tag}: the registry answered no sha256 digest ({digest!r})")
    return digest


def rewrite(text: str, resolve: Resolver) -> tuple[str, list[str]]:
    """`text` with every quoted image reference pinned to `resolve(repository, tag)`, and one line
    per reference whose digest changed."""
    changes: list[str] = []

    def pin(match: re.Match[str]) -> str:
        ref = parse(match[1])
        if ref is None or ref.tag is None:
            return match[0]
        digest = resolve(ref.repository, ref.tag)
        if not DIGEST.match(digest):
            raise ValueError(f"{ref.repository}:{ref.tag}: resolved to {digest!r}, not a sha256 digest")
        pinned = f"{ref.repository}:{ref.tag}@{digest}"
        if pinned != match[1]:
            changes.append(f"{ref.repository}:{ref.tag}: {ref.digest or 'no digest'} -> {digest.split(':', 1)[1]}")
        return f'"{pinned}"'

    return QUOTED.sub(pin, text), changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=IMAGES, help="the module that holds the image references")
    parser.add_argument("--check", action="store_true", help="report stale digests and exit 1; write nothing")
    args = parser.parse_args()
    text = args.file.read_text()
    try:
        with httpx.Client(timeout=30, follow_redirects=True) as client:
            updated, changes = rewrite(text, lambda repository, tag: registry_digest(client, repository, tag))
    except (httpx.HTTPError, ValueError, KeyError) as error:
        raise SystemExit(f"{args.file}: {error}") from None
    for change in changes:
        print(change)
    if args.check:
        raise SystemExit(1 if changes else 0)
    if changes:
        args.file.write_text(updated)
    print(f"{args.file}: {len(changes)} digest(s) changed")


if __name__ == "__main__":
    main()
