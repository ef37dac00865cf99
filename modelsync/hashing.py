"""Streaming SHA-256 of a file, whole and per multipart part, in one read pass."""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .errors import SyncError

READ_BLOCK = 4 * 1024 * 1024
MAX_PARTS = 10_000  # S3's limit on parts per multipart upload
MIN_PART_SIZE = 5 * 1024**2  # S3 rejects a smaller part that is not the last (EntityTooSmall)
MAX_PART_SIZE = 5 * 1024**3


@dataclass(frozen=True)
class FileDigest:
    """What S3 must report back for an upload of this file to count as verified."""

    size: int
    sha256_hex: str
    part_size: int
    part_digests: tuple[bytes, ...]  # raw SHA-256 of each part; one entry for a single PUT

    @property
    def is_multipart(self) -> bool:
        return len(self.part_digests) > 1

    @property
    def s3_checksum(self) -> str:
        """The ChecksumSHA256 S3 reports: full-object for one part, composite ("b64-N") otherwise."""
        if not self.is_multipart:
            return b64(bytes.fromhex(self.sha256_hex))
        return composite_checksum(self.part_digests)


def b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def composite_checksum(part_digests: tuple[bytes, ...] | list[bytes]) -> str:
    """S3's composite checksum of a multipart object: SHA-256 over the concatenated part digests."""
    return f"{b64(hashlib.sha256(b''.join(part_digests)).digest())}-{len(part_digests)}"


def part_size_for(size: int, part_size: int, multipart_threshold: int) -> int:
    """The part size used for a file, or its whole size when it goes up in one PUT.

    Grows the configured part size (in whole MiB) when a file would need more parts than S3 allows.
    """
    if size <= multipart_threshold:
        return max(size, 1)
    needed = -(-size // MAX_PARTS)
    if needed <= part_size:
        return part_size
    mib = 1024 * 1024
    return -(-needed // mib) * mib


def digest_file(path: Path, part_size: int) -> FileDigest:
    """Reads the file once; every byte feeds the whole-file hash and its part's hash."""
    with path.open("rb") as handle:
        if os.fstat(handle.fileno()).st_size <= part_size:
            return _digest_single_part(handle, part_size)
        whole = hashlib.sha256()
        parts: list[bytes] = []
        part = hashlib.sha256()
        in_part = 0
        size = 0
        while block := handle.read(min(READ_BLOCK, part_size - in_part)):
            whole.update(block)
            part.update(block)
            in_part += len(block)
            size += len(block)
            if in_part == part_size:
                parts.append(part.digest())
                part, in_part = hashlib.sha256(), 0
    if in_part or not parts:
        parts.append(part.digest())
    return FileDigest(size=size, sha256_hex=whole.hexdigest(), part_size=part_size, part_digests=tuple(parts))


def _digest_single_part(handle: BinaryIO, part_size: int) -> FileDigest:
    """One part: its digest is the whole-file digest, so hash once."""
    whole = hashlib.sha256()
    size = 0
    while block := handle.read(READ_BLOCK):
        whole.update(block)
        size += len(block)
    if size > part_size:  # the file grew while being read; its parts would be wrong
        raise SyncError(f"{handle.name} changed while it was being hashed")
    return FileDigest(size=size, sha256_hex=whole.hexdigest(), part_size=part_size, part_digests=(whole.digest(),))
