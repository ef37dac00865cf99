"""The `_MANIFEST.json` document: built from verified files, parsed strictly."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from .errors import SyncError

SCHEMA_VERSION = 1
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class ManifestFile:
    path: str  # relative to the model prefix, "/"-separated
    size: int
    sha256: str  # hex of the whole file
    s3_checksum: str  # ChecksumSHA256 as S3 computed it (composite "b64-N" for multipart objects)


@dataclass(frozen=True)
class Manifest:
    model_id: str
    revision: str
    files: tuple[ManifestFile, ...]
    created_at: str

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    def same_content(self, other: Manifest) -> bool:
        """Equal model, revision and file list; the creation time does not matter."""
        return (self.model_id, self.revision, self.files) == (other.model_id, other.revision, other.files)


def build_manifest(model_id: str, revision: str, files: list[ManifestFile], now: datetime | None = None) -> Manifest:
    created = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Manifest(model_id, revision, tuple(sorted(files, key=lambda f: f.path)), created)


def dump_manifest(manifest: Manifest) -> bytes:
    document = {
        "schemaVersion": SCHEMA_VERSION,
        "modelId": manifest.model_id,
        "revision": manifest.revision,
        "files": [
            {"path": f.path, "size": f.size, "sha256": f.sha256, "s3ChecksumSHA256": f.s3_checksum}
            for f in manifest.files
        ],
        "totalSize": manifest.total_size,
        "createdAt": manifest.created_at,
    }
    return (json.dumps(document, indent=2) + "\n").encode("utf-8")


def parse_manifest(raw: bytes, where: str) -> Manifest:
    """Strict parse; anything unexpected is an error naming the field, never a guess."""
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SyncError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(doc, dict):
        raise SyncError(f"{where}: must be a JSON object")
    if doc.get("schemaVersion") != SCHEMA_VERSION:
        raise SyncError(f"{where}: schemaVersion {doc.get('schemaVersion')!r} is not the supported {SCHEMA_VERSION}")
    for field in ("modelId", "revision", "createdAt"):
        if not isinstance(doc.get(field), str):
            raise SyncError(f"{where}: {field} must be a string")
    if not isinstance(doc.get("files"), list):
        raise SyncError(f"{where}: files must be a list")
    files = tuple(_parse_file(entry, f"{where}: files[{i}]") for i, entry in enumerate(doc["files"]))
    manifest = Manifest(doc["modelId"], doc["revision"], files, doc["createdAt"])
    if doc.get("totalSize") != manifest.total_size:
        raise SyncError(
            f"{where}: totalSize {doc.get('totalSize')!r} is not the sum of file sizes {manifest.total_size}"
        )
    return manifest


def _parse_file(entry: object, where: str) -> ManifestFile:
    if not isinstance(entry, dict):
        raise SyncError(f"{where}: must be an object")
    path, size, sha, s3_sum = entry.get("path"), entry.get("size"), entry.get("sha256"), entry.get("s3ChecksumSHA256")
    if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
        raise SyncError(f"{where}.path {path!r} must be a non-empty relative path without '..'")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise SyncError(f"{where}.size {size!r} must be a non-negative integer")
    if not isinstance(sha, str) or not _SHA256_HEX.match(sha):
        raise SyncError(f"{where}.sha256 {sha!r} must be 64 lowercase hex characters")
    if not isinstance(s3_sum, str) or not s3_sum:
        raise SyncError(f"{where}.s3ChecksumSHA256 {s3_sum!r} must be a non-empty string")
    return ManifestFile(path, size, sha, s3_sum)
