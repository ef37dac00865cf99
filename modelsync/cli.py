"""`python -m modelsync sync|check-mounted ...`: a clear message and a non-zero exit on any failure."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import sys
import threading
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from . import mounted_check
from .errors import Interrupted, SyncError
from .store import ObjectStore
from .sync import HUB, SyncConfig, SyncReport, sync_to, validate

_SIZE = re.compile(r"^(\d+)\s*(B|KiB|MiB|GiB)?$")
_UNITS = {None: 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
EXIT_FAILURE, EXIT_USAGE = 1, 2
# After a stop, how long the work may take to wind down (it sends nothing new, so only calls already on
# the wire remain), and then how long the main thread's own aborts may take. Together well inside
# Kubernetes' grace period, so the pod exits instead of being killed.
STOP_GRACE_SECONDS = 2.0
ABORT_SECONDS = 1.5
POLL_SECONDS = 0.1


def parse_size(text: str) -> int:
    match = _SIZE.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} must be a byte count like 67108864 or 64MiB")
    return int(match.group(1)) * _UNITS[match.group(2)]


def build_parser() -> argparse.ArgumentParser:
    # `modelsync` when run as the installed command
    name = Path(sys.argv[0]).name
    parser = argparse.ArgumentParser(
        prog="python -m modelsync" if name in ("__main__.py", "-c", "") else name,
        description="Verified, resumable delivery of one pinned model revision to S3.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    sync = commands.add_parser("sync", help="deliver one pinned model revision to S3 and publish its manifest")
    sync.add_argument("--model-id", required=True, help="Hugging Face id, e.g. Qwen/Qwen2.5-0.5B-Instruct")
    sync.add_argument("--revision", required=True, help="the 40-hex commit to deliver")
    sync.add_argument("--bucket", required=True, help="S3 bucket of the model store")
    sync.add_argument(
        "--prefix", required=True, help="key prefix of this revision; the manifest goes at <prefix>/_MANIFEST.json"
    )
    sync.add_argument("--source", default=HUB, help="'hf' (default) or a directory holding the revision's files")
    sync.add_argument("--include", action="append", default=[], metavar="GLOB", help="only files matching (repeatable)")
    sync.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="skip files matching (repeatable)")
    sync.add_argument("--staging-dir", type=Path, default=Path("/tmp/modelsync"), help="hub download directory")
    sync.add_argument("--concurrency", type=int, default=8, help="parallel files, and parallel parts")
    sync.add_argument(
        "--multipart-threshold",
        type=parse_size,
        default=parse_size("64MiB"),
        help="files this large or larger upload in parts; bytes or KiB/MiB/GiB (default: 64MiB)",
    )
    sync.add_argument(
        "--part-size",
        type=parse_size,
        default=parse_size("64MiB"),
        help="multipart part size; bytes or KiB/MiB/GiB (default: 64MiB)",
    )
    sync.add_argument(
        "--abort-stale-uploads-after",
        type=int,
        default=0,
        metavar="SECONDS",
        help="abort incomplete multipart uploads under the prefix older than this (0: never); "
        "set it to the Job's deadline so only uploads of dead runs qualify",
    )
    sync.add_argument("--hub-endpoint", default=None, help="a Hugging Face hub mirror (default: the public hub)")
    sync.add_argument("--sse-kms-key-id", default=None, help="request SSE-KMS with this key on every write")
    sync.add_argument(
        "--create-only",
        action="store_true",
        help="never replace or delete an object (If-None-Match: * on every write); a published revision "
        "that does not verify fails the run instead of being repaired",
    )
    sync.add_argument(
        "--endpoint-url",
        default=os.environ.get("AWS_ENDPOINT_URL_S3"),
        help="S3 endpoint, e.g. an emulator (default: $AWS_ENDPOINT_URL_S3, else AWS's)",
    )
    sync.add_argument("--region", default=os.environ.get("AWS_REGION"), help="AWS region (default: $AWS_REGION)")
    sync.add_argument("--verbose", action="store_true", help="debug-level logging")
    check = commands.add_parser(
        "check-mounted",
        help="exit 0 only when a mounted prefix holds the complete, verified revision",
        description=mounted_check.DESCRIPTION,
    )
    mounted_check.add_arguments(check)
    return parser


def config_from(args: argparse.Namespace) -> SyncConfig:
    return SyncConfig(
        model_id=args.model_id,
        revision=args.revision,
        bucket=args.bucket,
        prefix=args.prefix,
        source=args.source,
        include=args.include,
        exclude=args.exclude,
        staging_dir=args.staging_dir,
        concurrency=args.concurrency,
        multipart_threshold=args.multipart_threshold,
        part_size=args.part_size,
        stale_upload_age=timedelta(seconds=args.abort_stale_uploads_after) if args.abort_stale_uploads_after else None,
        sse_kms_key_id=args.sse_kms_key_id,
        hf_token=os.environ.get("HF_TOKEN") or None,
        hub_endpoint=args.hub_endpoint,
        create_only=args.create_only,
    )


def s3_client(endpoint_url: str | None, region: str | None, concurrency: int) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(max_pool_connections=2 * concurrency + 4, retries={"mode": "standard", "max_attempts": 8})
    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, region_name=region, config=config)


class StopRequest:
    """A signal only sets a flag: the work checks it between S3 calls, the main thread acts on it."""

    def __init__(self) -> None:
        self.event = threading.Event()  # also set by the sync itself when a file fails, to stop the rest
        self.reason = ""  # set only by a signal

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        self.reason = self.reason or f"received {signal.Signals(signum).name}"
        self.event.set()


def run_until_done_or_stopped(store: ObjectStore, cfg: SyncConfig, stop: StopRequest) -> SyncReport:
    """The sync runs on a worker thread; the main thread waits, so a signal never lands inside a boto3 call.

    On a stop the worker gets STOP_GRACE_SECONDS to abort its uploads and return. A worker still stuck in a
    call after that is abandoned: the main thread aborts the open uploads itself and the process exits.
    """
    finished = threading.Event()
    outcome: list[SyncReport | BaseException] = []

    def work() -> None:
        try:
            outcome.append(sync_to(store, cfg, stop.event))
        except BaseException as err:  # handed to the main thread, which decides the exit
            outcome.append(err)
        finally:
            finished.set()

    threading.Thread(target=work, name="sync", daemon=True).start()
    while not (finished.wait(POLL_SECONDS) or stop.reason):
        continue
    if not finished.wait(STOP_GRACE_SECONDS):
        aborting = threading.Thread(target=store.abort_in_flight, name="abort", daemon=True)
        aborting.start()
        aborting.join(ABORT_SECONDS)
        raise Interrupted(stop.reason)
    result = outcome[0]
    if isinstance(result, BaseException):
        raise Interrupted(stop.reason) if stop.reason else result
    return result


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "check-mounted":
        return mounted_check.run(args)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    logging.getLogger("botocore").setLevel(logging.WARNING)
    cfg = config_from(args)
    try:
        validate(cfg)
    except SyncError as err:
        print(f"modelsync: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    stop = StopRequest()
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    store = ObjectStore(s3_client(args.endpoint_url, args.region, cfg.concurrency), cfg.bucket, cfg.sse_kms_key_id)
    try:
        report = run_until_done_or_stopped(store, cfg, stop)
    except Interrupted as err:
        print(
            f"modelsync: interrupted: {err}; this run's incomplete multipart uploads were aborted, "
            "no manifest was written; rerun to resume",
            file=sys.stderr,
            flush=True,
        )
        # A worker may still be blocked in a network call; a normal interpreter exit would wait for it.
        sys.stdout.flush()
        os._exit(EXIT_FAILURE)
    except SyncError as err:
        print(f"modelsync: failed: {err}; no manifest was written for this run", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print(json.dumps(report.summary()), flush=True)
    return 0
