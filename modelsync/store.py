"""S3 I/O: checksummed uploads, verification by HEAD or read-back, conditional manifest publish."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, FlexibleChecksumError, NoCredentialsError

from .errors import Interrupted, SyncError
from .hashing import READ_BLOCK, FileDigest, b64

SHA256_METADATA = "sha256"  # x-amz-meta-sha256: whole-file hex, since a composite checksum is not one
_ACCESS_CODES = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "AllAccessDisabled",
    "KMS.AccessDeniedException",
}
_CONFLICT_CODES = {"PreconditionFailed", "ConditionalRequestConflict"}
# The only request a stopped run still sends: it cleans up after the run instead of doing more work.
_CLEANUP_OPERATIONS = {"AbortMultipartUpload"}


@contextmanager
def no_requests_after(stop: threading.Event, client: Any) -> Iterator[None]:
    """After a stop, every new S3 request (retries included) fails with Interrupted, except cleanup.

    botocore retries what looks like a transient error, so a stop must be refused at the send,
    not raised into a call in progress: that is where a signal used to vanish.
    """

    def refuse(event_name: str, **_: Any) -> None:
        if stop.is_set() and event_name.rsplit(".", 1)[-1] not in _CLEANUP_OPERATIONS:
            raise Interrupted(f"stopped before {event_name.rsplit('.', 1)[-1]}")

    client.meta.events.register("before-send.s3", refuse)
    try:
        yield
    finally:
        client.meta.events.unregister("before-send.s3", refuse)


@dataclass(frozen=True)
class RemoteObject:
    size: int
    checksum_sha256: str | None
    sha256_hex: str | None


def checksum_matches(reported: str | None, expected: str) -> bool:
    """S3 reports composite checksums as "b64-N"; some emulators omit "-N", so only the digest must match."""
    if not reported:
        return False
    digest, _, parts = reported.partition("-")
    want_digest, _, want_parts = expected.partition("-")
    return digest == want_digest and (not parts or parts == want_parts)


def is_composite(s3_checksum: str) -> bool:
    """A multipart object's checksum ("b64-N"; base64 itself has no '-')."""
    return "-" in s3_checksum


def is_verified(remote: RemoteObject | None, digest: FileDigest) -> bool:
    """True when S3 holds exactly this file: size, S3-computed SHA-256 checksum and recorded hex all agree."""
    return (
        remote is not None
        and remote.size == digest.size
        and remote.sha256_hex == digest.sha256_hex
        and checksum_matches(remote.checksum_sha256, digest.s3_checksum)
    )


def stale_uploads(uploads: list[dict[str, Any]], now: datetime, max_age: timedelta) -> list[dict[str, Any]]:
    """Multipart uploads older than any live run can be (the Job's deadline): left by killed runs."""
    return [u for u in uploads if now - u["Initiated"] > max_age]


def describe(err: Exception, action: str, where: str) -> SyncError:
    """A message an operator can act on, naming the operation and the object."""
    if isinstance(err, ClientError):
        code = err.response.get("Error", {}).get("Code", "")
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in _ACCESS_CODES or status == 403:
            return SyncError(
                f"access denied: {action} {where} ({code}); check the writer identity "
                f"(Pod Identity association) and its permissions on this prefix and KMS key"
            )
        if code == "NoSuchBucket":
            return SyncError(f"bucket in {where} does not exist")
        if code in ("BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch") or "checksum" in str(err).lower():
            return SyncError(f"checksum mismatch: S3 rejected {action} {where}: {err}")
        return SyncError(f"S3 {action} {where} failed: {code or status}: {err}")
    if isinstance(err, NoCredentialsError):
        return SyncError(
            f"no AWS credentials for {action} {where}: the Job's service account needs its "
            "Pod Identity association to the model writer role"
        )
    return SyncError(f"S3 {action} {where} failed: {err}")


def _error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def read_unchanged(path: Path, offset: int, length: int, sha256: bytes) -> bytes:
    """The bytes to upload, refused unless they are exactly the bytes hashed before (same length, same SHA-256)."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            body = handle.read(length)
    except OSError as err:
        raise SyncError(f"cannot read {path} to upload it: {err}") from None
    if len(body) != length or hashlib.sha256(body).digest() != sha256:
        raise SyncError(
            f"{path} changed after it was hashed (bytes {offset}-{offset + length} are no longer what was hashed); "
            "rerun to upload the current file"
        )
    return body


class Immutable(SyncError):
    """A create-only store already holds this key with other bytes; no rerun replaces it."""


def replace_refused(where: str, what: str) -> Immutable:
    return Immutable(
        f"{where} {what}; writes are create-only, so a published revision is never replaced: "
        "someone allowed to delete objects in the model store removes the revision's prefix, then the sync reruns"
    )


class ObjectStore:
    """One bucket; every write carries a SHA-256 additional checksum that S3 verifies on receipt.

    `create_only`: every object write is conditional on the key not existing (If-None-Match: *,
    on PutObject and CompleteMultipartUpload, the two that create an object; S3 user guide,
    "Enforce conditional writes on Amazon S3 buckets"), and nothing is deleted. The platform's
    writer role may write no other way, so what it published it can never replace."""

    def __init__(
        self, client: Any, bucket: str, sse_kms_key_id: str | None = None, *, create_only: bool = False
    ) -> None:
        self.client = client
        self.bucket = bucket
        self.create_only = create_only
        self._create = {"IfNoneMatch": "*"} if create_only else {}
        self._sse = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": sse_kms_key_id} if sse_kms_key_id else {}
        self._in_flight: dict[str, str] = {}  # upload id -> key of this run's open multipart uploads
        self._in_flight_lock = threading.Lock()

    def where(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def _call(self, action: str, key: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(Bucket=self.bucket, Key=key, **kwargs)
        except ClientError as err:
            if "IfNoneMatch" in kwargs and _error_code(err) == "PreconditionFailed":
                raise replace_refused(self.where(key), "already exists with other bytes") from None
            raise describe(err, action, self.where(key)) from None
        except BotoCoreError as err:
            raise describe(err, action, self.where(key)) from None

    def head(self, key: str) -> RemoteObject | None:
        try:
            resp = self.client.head_object(Bucket=self.bucket, Key=key, ChecksumMode="ENABLED")
        except ClientError as err:
            if err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                return None
            raise describe(err, "HEAD", self.where(key)) from None
        except BotoCoreError as err:
            raise describe(err, "HEAD", self.where(key)) from None
        return RemoteObject(
            resp["ContentLength"], resp.get("ChecksumSHA256"), resp.get("Metadata", {}).get(SHA256_METADATA)
        )

    def list_sizes(self, prefix: str) -> dict[str, int]:
        """One paginated listing, so only keys that exist with the right size cost a HEAD."""
        sizes: dict[str, int] = {}
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                sizes.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
        except (ClientError, BotoCoreError) as err:
            raise describe(err, "LIST", self.where(prefix)) from None
        return sizes

    def get(self, key: str) -> bytes | None:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as err:
            if _error_code(err) in ("NoSuchKey", "404"):
                return None
            raise describe(err, "GET", self.where(key)) from None
        except BotoCoreError as err:
            raise describe(err, "GET", self.where(key)) from None

    def delete(self, key: str, why: str) -> None:
        """Withdraws `key` (`why` says what is wrong with it); a create-only store refuses."""
        if self.create_only:
            raise replace_refused(self.where(key), why)
        self._call("DELETE", key, self.client.delete_object)

    def read_back_sha256(self, key: str) -> str | None:
        """SHA-256 hex of the bytes S3 serves for key: proof that does not rest on S3 checking our header.

        None when the object is missing, or when the bytes served fail S3's own stored checksum.
        """
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            whole = hashlib.sha256()
            while block := body.read(READ_BLOCK):
                whole.update(block)
        except FlexibleChecksumError:
            return None
        except ClientError as err:
            if _error_code(err) in ("NoSuchKey", "404"):
                return None
            raise describe(err, "GET", self.where(key)) from None
        except BotoCoreError as err:
            raise describe(err, "GET", self.where(key)) from None
        return whole.hexdigest()

    def put_file(self, key: str, path: Path, digest: FileDigest) -> None:
        """One PUT of the bytes that were hashed (held in memory: at most the multipart threshold)."""
        body = read_unchanged(path, 0, digest.size, digest.part_digests[0])
        self._call(
            "PUT",
            key,
            self.client.put_object,
            Body=body,
            ChecksumAlgorithm="SHA256",
            ChecksumSHA256=digest.s3_checksum,
            Metadata={SHA256_METADATA: digest.sha256_hex},
            **self._sse,
            **self._create,
        )

    def put_multipart(
        self, key: str, path: Path, digest: FileDigest, parts_pool: ThreadPoolExecutor, stop: threading.Event
    ) -> None:
        """Parts go up in parallel, each with its SHA-256; any failure or stop aborts this upload."""
        upload = self._call(
            "CREATE-MULTIPART",
            key,
            self.client.create_multipart_upload,
            ChecksumAlgorithm="SHA256",
            Metadata={SHA256_METADATA: digest.sha256_hex},
            **self._sse,
        )
        upload_id = upload["UploadId"]
        with self._in_flight_lock:
            self._in_flight[upload_id] = key
        futures: list[Future[dict[str, Any]]] = []
        try:
            futures = [
                parts_pool.submit(self._put_part, key, upload_id, path, digest, n, stop)
                for n in range(1, len(digest.part_digests) + 1)
            ]
            parts = [f.result() for f in futures]
            self._call(
                "COMPLETE-MULTIPART",
                key,
                self.client.complete_multipart_upload,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                **self._create,
            )
        except BaseException:
            for future in futures:
                future.cancel()
            wait(futures)  # no part may land after the abort
            self.abort(key, upload_id)
            raise
        finally:
            with self._in_flight_lock:
                self._in_flight.pop(upload_id, None)

    def abort_in_flight(self) -> int:
        """Aborts this run's open multipart uploads, for a stop whose workers are stuck in a call."""
        with self._in_flight_lock:
            open_uploads = list(self._in_flight.items())
        for upload_id, key in open_uploads:
            self.abort(key, upload_id)
        return len(open_uploads)

    def _put_part(
        self, key: str, upload_id: str, path: Path, digest: FileDigest, number: int, stop: threading.Event
    ) -> dict[str, Any]:
        if stop.is_set():
            raise Interrupted(f"stopped before part {number} of {self.where(key)}")
        offset = (number - 1) * digest.part_size
        length = min(digest.part_size, digest.size - offset)
        body = read_unchanged(path, offset, length, digest.part_digests[number - 1])
        checksum = b64(digest.part_digests[number - 1])
        resp = self._call(
            f"UPLOAD-PART {number}",
            key,
            self.client.upload_part,
            UploadId=upload_id,
            PartNumber=number,
            Body=body,
            ChecksumAlgorithm="SHA256",
            ChecksumSHA256=checksum,
        )
        return {"PartNumber": number, "ETag": resp["ETag"], "ChecksumSHA256": checksum}

    def abort(self, key: str, upload_id: str) -> None:
        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
        except (ClientError, BotoCoreError):
            pass  # the bucket's AbortIncompleteMultipartUpload lifecycle rule is the backstop

    def incomplete_uploads(self, prefix: str) -> Iterator[dict[str, Any]]:
        try:
            for page in self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=prefix):
                yield from page.get("Uploads", [])
        except (ClientError, BotoCoreError) as err:
            raise describe(err, "LIST-MULTIPART", self.where(prefix)) from None

    def abort_stale_uploads(self, prefix: str, max_age: timedelta) -> int:
        stale = stale_uploads(list(self.incomplete_uploads(prefix)), datetime.now(UTC), max_age)
        for upload in stale:
            self.abort(upload["Key"], upload["UploadId"])
        return len(stale)

    def put_if_absent(self, key: str, body: bytes) -> bool:
        """Create-only write (If-None-Match: *); False when the key already exists or a racing write won."""
        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body,
                IfNoneMatch="*",
                ContentType="application/json",
                ChecksumAlgorithm="SHA256",
                **self._sse,
            )
        except ClientError as err:
            if _error_code(err) in _CONFLICT_CODES:
                return False
            raise describe(err, "PUT (If-None-Match)", self.where(key)) from None
        except BotoCoreError as err:
            raise describe(err, "PUT (If-None-Match)", self.where(key)) from None
        return True
