"""One model sync: verify-or-skip, upload what is missing, publish the manifest last."""

from __future__ import annotations

import logging
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from . import MANIFEST_NAME
from .errors import Interrupted, SyncError
from .hashing import MAX_PART_SIZE, MIN_PART_SIZE, FileDigest, digest_file, part_size_for
from .manifest import Manifest, ManifestFile, build_manifest, dump_manifest, parse_manifest
from .source import SourceFile, disk_error, download_from_hub, list_files
from .store import ObjectStore, RemoteObject, checksum_matches, is_composite, is_verified, no_requests_after

log = logging.getLogger("modelsync")

_REVISION = re.compile(r"^[0-9a-f]{40}$")
_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
HUB = "hf"


@dataclass(frozen=True)
class SyncConfig:
    model_id: str
    revision: str
    bucket: str
    prefix: str
    source: str = HUB  # "hf", or a directory holding the revision's files (an air-gapped mirror)
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    staging_dir: Path = Path("/tmp/modelsync")
    concurrency: int = 8
    multipart_threshold: int = 64 * 1024 * 1024
    part_size: int = 64 * 1024 * 1024
    stale_upload_age: timedelta | None = None
    sse_kms_key_id: str | None = None
    hf_token: str | None = field(default=None, repr=False)
    hub_endpoint: str | None = None  # a hub mirror; None means the public hub (or HF_ENDPOINT)
    # Never replace or delete an object (see ObjectStore): what the platform's writer role allows.
    create_only: bool = False

    @property
    def manifest_key(self) -> str:
        return f"{self.prefix}/{MANIFEST_NAME}"

    def key(self, rel_path: str) -> str:
        return f"{self.prefix}/{rel_path}"


@dataclass(frozen=True)
class SyncReport:
    model_id: str
    revision: str
    manifest: str
    outcome: str  # "already-published" | "published" | "published-by-concurrent-run"
    uploaded: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    uploaded_bytes: int = 0
    total_bytes: int = 0
    stale_uploads_aborted: int = 0
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "modelId": self.model_id,
            "revision": self.revision,
            "manifest": self.manifest,
            "outcome": self.outcome,
            "uploadedFiles": len(self.uploaded),
            "skippedFiles": len(self.skipped),
            "uploadedBytes": self.uploaded_bytes,
            "totalBytes": self.total_bytes,
            "staleUploadsAborted": self.stale_uploads_aborted,
            "seconds": round(self.seconds, 3),
        }


def validate(cfg: SyncConfig) -> None:
    """Bad input fails before any I/O, naming the flag and the rule."""
    if not _MODEL_ID.match(cfg.model_id):
        raise SyncError(f"--model-id {cfg.model_id!r} must look like 'org/name' (letters, digits, '.', '_', '-')")
    if not _REVISION.match(cfg.revision):
        raise SyncError(
            f"--revision {cfg.revision!r} must be a 40-character lowercase hex commit id (no branch or tag)"
        )
    if not _BUCKET.match(cfg.bucket):
        raise SyncError(f"--bucket {cfg.bucket!r} is not a valid S3 bucket name")
    parts = cfg.prefix.split("/")
    if (
        not cfg.prefix
        or cfg.prefix.startswith("/")
        or cfg.prefix.endswith("/")
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise SyncError(
            f"--prefix {cfg.prefix!r} must be a relative key prefix without empty, '.' or '..' segments "
            "and without leading/trailing '/'"
        )
    if cfg.concurrency < 1:
        raise SyncError(f"--concurrency {cfg.concurrency} must be >= 1")
    if not MIN_PART_SIZE <= cfg.part_size <= MAX_PART_SIZE:
        raise SyncError(
            f"--part-size {cfg.part_size} must be between S3's part size limits, "
            f"{MIN_PART_SIZE} (5 MiB) and {MAX_PART_SIZE} (5 GiB) bytes"
        )
    if cfg.multipart_threshold < 1:
        raise SyncError("--multipart-threshold must be positive")
    if cfg.source != HUB and not Path(cfg.source).is_dir():
        raise SyncError(f"--source {cfg.source!r} must be 'hf' or an existing directory")


def sync_model(cfg: SyncConfig, client: Any, stop: threading.Event | None = None) -> SyncReport:
    """Idempotent: safe to rerun after any interruption, and safe to run twice at once."""
    store = ObjectStore(client, cfg.bucket, cfg.sse_kms_key_id, create_only=cfg.create_only)
    return sync_to(store, cfg, stop or threading.Event())


def sync_to(store: ObjectStore, cfg: SyncConfig, stop: threading.Event) -> SyncReport:
    """The sync on a given store; once `stop` is set no new S3 request leaves except aborts, nothing publishes."""
    validate(cfg)
    with no_requests_after(stop, store.client):
        return _sync(store, cfg, stop)


def _sync(store: ObjectStore, cfg: SyncConfig, stop: threading.Event) -> SyncReport:
    started = time.monotonic()
    # First, on every run: a published revision is where a killed run's uploads would otherwise live forever.
    aborted = abort_stale_uploads(store, cfg)
    # One listing answers "does it exist" for every key, so no decision rests on a 404 from HEAD/GET:
    # with a prefix-scoped s3:ListBucket grant, S3 answers 403 (not 404) for a missing key.
    listed = store.list_sizes(cfg.prefix + "/")
    existing = read_published(store, cfg.manifest_key, listed)
    if existing is not None:
        require_same_model(existing, cfg)
        broken = verify_manifest(store, cfg, existing, listed)
        if not broken:
            log.info("%s verifies (%d files); nothing to do", store.where(cfg.manifest_key), len(existing.files))
            return SyncReport(
                cfg.model_id,
                cfg.revision,
                store.where(cfg.manifest_key),
                "already-published",
                skipped=tuple(f.path for f in existing.files),
                total_bytes=existing.total_size,
                stale_uploads_aborted=aborted,
                seconds=time.monotonic() - started,
            )
        # Withdraw the manifest first: a model with a bad object must not look servable while it is repaired.
        if not store.create_only:
            log.warning(
                "manifest lists objects that do not verify: %s; withdrawing it and repairing", ", ".join(broken)
            )
        store.delete(cfg.manifest_key, f"lists objects that do not verify ({', '.join(broken)})")

    files = materialize(cfg)
    results = sync_files(store, cfg, files, listed, stop)
    manifest = build_manifest(cfg.model_id, cfg.revision, [r.entry for r in results])
    if stop.is_set():
        raise Interrupted("stopped before publishing")
    outcome = publish(store, cfg.manifest_key, manifest)
    uploaded = [r for r in results if r.uploaded]
    return SyncReport(
        cfg.model_id,
        cfg.revision,
        store.where(cfg.manifest_key),
        outcome,
        uploaded=tuple(r.entry.path for r in uploaded),
        skipped=tuple(r.entry.path for r in results if not r.uploaded),
        uploaded_bytes=sum(r.entry.size for r in uploaded),
        total_bytes=manifest.total_size,
        stale_uploads_aborted=aborted,
        seconds=time.monotonic() - started,
    )


def abort_stale_uploads(store: ObjectStore, cfg: SyncConfig) -> int:
    """Best effort: the bucket's AbortIncompleteMultipartUpload lifecycle rule is the backstop."""
    if not cfg.stale_upload_age:
        return 0
    try:
        aborted = store.abort_stale_uploads(cfg.prefix + "/", cfg.stale_upload_age)
    except Interrupted:
        raise
    except SyncError as err:
        log.warning("could not clean up multipart uploads of dead runs (%s); continuing", err)
        return 0
    if aborted:
        log.info("aborted %d stale multipart uploads left by killed runs", aborted)
    return aborted


def read_published(store: ObjectStore, key: str, listed: dict[str, int]) -> Manifest | None:
    """The published manifest; an unreadable one is withdrawn like one that fails verification."""
    raw = store.get(key) if key in listed else None
    if raw is None:
        return None
    try:
        return parse_manifest(raw, store.where(key))
    except SyncError as err:
        if not store.create_only:
            log.warning("%s; withdrawing it, verifying every object and republishing", err)
        store.delete(key, f"is unreadable ({err})")
        return None


def load_manifest(store: ObjectStore, key: str, listed: dict[str, int]) -> Manifest | None:
    if key not in listed:
        return None
    raw = store.get(key)
    return None if raw is None else parse_manifest(raw, store.where(key))


def require_same_model(manifest: Manifest, cfg: SyncConfig) -> None:
    if (manifest.model_id, manifest.revision) != (cfg.model_id, cfg.revision):
        raise SyncError(
            f"s3://{cfg.bucket}/{cfg.manifest_key} already publishes {manifest.model_id}@{manifest.revision}, "
            f"not {cfg.model_id}@{cfg.revision}; each revision needs its own --prefix"
        )


def verify_manifest(store: ObjectStore, cfg: SyncConfig, manifest: Manifest, listed: dict[str, int]) -> list[str]:
    """Checks every listed object; returns the paths that do not hold what the manifest says."""

    def broken(entry: ManifestFile) -> bool:
        if listed.get(cfg.key(entry.path)) != entry.size:
            return True
        return not holds(store, cfg.key(entry.path), entry.size, entry.sha256, entry.s3_checksum)

    with ThreadPoolExecutor(cfg.concurrency) as pool:
        flags = list(pool.map(broken, manifest.files))
    return [entry.path for entry, bad in zip(manifest.files, flags, strict=True) if bad]


def holds(store: ObjectStore, key: str, size: int, sha256_hex: str, s3_checksum: str) -> bool:
    """True when S3 holds exactly these bytes.

    A multipart object's composite checksum is computed by S3 from the parts it received. A single
    PUT's checksum is the one the uploader sent, and only a store that checks it (S3 does; emulators
    may not) keeps it honest, so a single-part object (<= the multipart threshold) is read back and hashed.
    """
    remote = store.head(key)
    if not (
        remote is not None
        and remote.size == size
        and remote.sha256_hex == sha256_hex
        and checksum_matches(remote.checksum_sha256, s3_checksum)
    ):
        return False
    return is_composite(s3_checksum) or store.read_back_sha256(key) == sha256_hex


def materialize(cfg: SyncConfig) -> list[SourceFile]:
    if cfg.source == HUB:
        return download_from_hub(
            cfg.model_id,
            cfg.revision,
            cfg.staging_dir,
            cfg.include,
            cfg.exclude,
            cfg.hf_token,
            cfg.concurrency,
            cfg.hub_endpoint,
        )
    return list_files(Path(cfg.source), cfg.include, cfg.exclude)


@dataclass(frozen=True)
class FileResult:
    entry: ManifestFile
    uploaded: bool


def sync_files(
    store: ObjectStore, cfg: SyncConfig, files: list[SourceFile], listed: dict[str, int], stop: threading.Event
) -> list[FileResult]:
    """Files in parallel, and parts of big files in parallel; the first failure stops the rest."""
    # The parts pool outlives the files pool so no file waits on a pool that is shutting down.
    with (
        ThreadPoolExecutor(cfg.concurrency, thread_name_prefix="part") as parts_pool,
        ThreadPoolExecutor(cfg.concurrency, thread_name_prefix="file") as files_pool,
    ):
        futures: list[Future[FileResult]] = [
            files_pool.submit(sync_file, store, cfg, f, listed.get(cfg.key(f.rel_path)), parts_pool, stop)
            for f in files
        ]
        try:
            results = [future.result() for future in as_completed(futures)]
        except BaseException:
            stop.set()
            wait(futures)  # workers see the stop at their next part and abort their own uploads
            raise
    return sorted(results, key=lambda r: r.entry.path)


def sync_file(
    store: ObjectStore,
    cfg: SyncConfig,
    src: SourceFile,
    listed_size: int | None,
    parts_pool: ThreadPoolExecutor,
    stop: threading.Event,
) -> FileResult:
    if stop.is_set():
        raise Interrupted(f"stopped before {src.rel_path}")
    key = cfg.key(src.rel_path)
    try:
        size = src.path.stat().st_size
        digest = digest_file(src.path, part_size_for(size, cfg.part_size, cfg.multipart_threshold))
    except OSError as err:
        raise disk_error(err, src.path) from None
    if listed_size == digest.size and holds(store, key, digest.size, digest.sha256_hex, digest.s3_checksum):
        return FileResult(entry_for(src, digest), uploaded=False)
    if digest.is_multipart:
        store.put_multipart(key, src.path, digest, parts_pool, stop)
    else:
        store.put_file(key, src.path, digest)
    remote = store.head(key)
    if not is_verified(remote, digest):
        raise SyncError(
            f"checksum mismatch: {store.where(key)} does not verify after upload "
            f"({describe_remote(remote)}; expected size {digest.size}, ChecksumSHA256 {digest.s3_checksum})"
        )
    # See holds(): a single PUT's checksum is the one we sent, so hash what S3 serves.
    if not digest.is_multipart and (served := store.read_back_sha256(key)) != digest.sha256_hex:
        raise SyncError(
            f"checksum mismatch: {store.where(key)} serves bytes with SHA-256 "
            f"{served or 'unknown (they fail the checksum S3 stored)'}, not the uploaded file's {digest.sha256_hex}"
        )
    log.info("uploaded %s (%d bytes)", src.rel_path, digest.size)
    return FileResult(entry_for(src, digest), uploaded=True)


def entry_for(src: SourceFile, digest: FileDigest) -> ManifestFile:
    return ManifestFile(src.rel_path, digest.size, digest.sha256_hex, digest.s3_checksum)


def describe_remote(remote: RemoteObject | None) -> str:
    if remote is None:
        return "object missing"
    return f"size {remote.size}, ChecksumSHA256 {remote.checksum_sha256}, sha256 metadata {remote.sha256_hex}"


def publish(store: ObjectStore, key: str, manifest: Manifest) -> str:
    """Create-only write, so of two racing runs exactly one publishes; the other confirms it agrees."""
    body = dump_manifest(manifest)
    for _ in range(3):
        if store.put_if_absent(key, body):
            log.info("published %s (%d files, %d bytes)", store.where(key), len(manifest.files), manifest.total_size)
            return "published"
        current = load_manifest(store, key, store.list_sizes(key))
        if current is None:
            continue  # the racing write was rejected (S3 409 ConditionalRequestConflict): try again
        if current.same_content(manifest):
            log.info("%s was published by a concurrent run with the same content", store.where(key))
            return "published-by-concurrent-run"
        raise SyncError(f"{store.where(key)} was published concurrently with a different file list; rerun to verify it")
    raise SyncError(f"could not publish {store.where(key)}: conditional write kept conflicting")
