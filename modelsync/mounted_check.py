"""Predictor gate: wait until the mounted model prefix holds a complete, published revision, and
refuse to serve any file whose bytes are not the ones the manifest published (SHA-256, or sizes only).

Standard library only: it runs as an init container from the serving image (which has
python3), reading the prefix that Mountpoint mounts read-only. No AWS access needed.
Run as `python3 -c "$(cat mounted_check.py)" --dir /models --revision <sha> ...`,
or `python -m modelsync check-mounted ...`.
"""

import argparse
import hashlib
import json
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor

MANIFEST_NAME = "_MANIFEST.json"
DESCRIPTION = __doc__.split("\n\n")[0].replace("\n", " ")
VERIFY_SHA256, VERIFY_SIZE = "sha256", "size"
READ_BLOCK = 4 * 1024 * 1024  # per reader; with 8 readers 32 MiB, well inside the init container's memory
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class Refusal(Exception):
    """The published manifest or a published file must never be served; waiting will not change it."""


def read_manifest(model_dir, model_id, revision):
    """(entries, None) for a manifest of model_id@revision, else (None, why it is not there yet).

    Each entry is (name, full path inside model_dir, size, sha256 hex). Raises Refusal for a
    manifest of the pinned revision whose file list must not be served.
    """
    path = os.path.join(model_dir, MANIFEST_NAME)
    try:
        with open(path, "rb") as handle:
            doc = json.load(handle)
    except FileNotFoundError:
        return None, f"{path} does not exist yet (the model-sync Job has not published this revision)"
    except (OSError, ValueError) as err:
        return None, f"{path} is unreadable: {err}"
    if not isinstance(doc, dict) or doc.get("schemaVersion") != 1 or not isinstance(doc.get("files"), list):
        return None, f"{path} is not a schemaVersion 1 manifest"
    if doc.get("revision") != revision:
        return None, f"{path} is for revision {doc.get('revision')!r}, the predictor pins {revision!r}"
    if model_id and doc.get("modelId") != model_id:
        return None, f"{path} is for model {doc.get('modelId')!r}, the predictor pins {model_id!r}"
    if not doc["files"]:
        raise Refusal(f"{path} lists no files")
    root = os.path.realpath(model_dir)
    entries = []
    for index, entry in enumerate(doc["files"]):
        where = f"{path}: files[{index}]"
        if not isinstance(entry, dict):
            raise Refusal(f"{where} is {type(entry).__name__} {entry!r}, not an object")
        name, size, sha256 = entry.get("path"), entry.get("size"), entry.get("sha256")
        if not isinstance(name, str) or not name:
            raise Refusal(f"{where}.path {name!r} is not a file name")
        full = os.path.realpath(os.path.join(root, name))
        if name.startswith("/") or ".." in name.split("/") or not full.startswith(root + os.sep):
            raise Refusal(f"{where}.path {name!r} escapes the model directory {model_dir}")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise Refusal(f"{where}.size {size!r} is not a byte count (a non-negative integer)")
        if not isinstance(sha256, str) or not _SHA256_HEX.match(sha256):
            raise Refusal(f"{where}.sha256 {sha256!r} is not 64 lowercase hex characters")
        entries.append((name, full, size, sha256))
    return entries, None


def unlisted_files(model_dir, entries):
    """Every file under model_dir that is neither the manifest nor one of its entries."""
    listed = {name for name, _, _, _ in entries} | {MANIFEST_NAME}
    found = []
    for directory, _, files in os.walk(model_dir):
        for file_name in files:
            name = os.path.relpath(os.path.join(directory, file_name), model_dir).replace(os.sep, "/")
            if name not in listed:
                found.append(repr(name))
    return sorted(found)


def size_problems(entries):
    found = []
    for name, full, size, _ in entries:
        try:
            actual = os.stat(full).st_size
        except OSError:
            found.append(f"{name!r} is listed in the manifest but missing")
            continue
        if actual != size:
            found.append(f"{name!r} has {actual} bytes, the manifest says {size}")
    return found


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as handle:
        while block := handle.read(READ_BLOCK):
            digest.update(block)  # releases the GIL: readers hash in parallel
    return digest.hexdigest()


def hash_mismatches(entries, parallel_reads):
    """Every file read once, the largest first so the longest read starts at once."""
    ordered = sorted(entries, key=lambda e: -e[2])
    with ThreadPoolExecutor(max(1, parallel_reads)) as pool:
        digests = list(pool.map(lambda e: sha256_of(e[1]), ordered))
    return [
        f"{name!r} does not match its published SHA-256 (changed after publishing)"
        for (name, _, _, expected), actual in zip(ordered, digests)
        if actual != expected
    ]


def problems(model_dir, model_id, revision, verify=VERIFY_SHA256, parallel_reads=8):
    """Why the directory is not yet a servable copy of model_id@revision; empty when it is.

    Raises Refusal for a manifest that must not be served, or a published file whose bytes differ from
    its SHA-256: tampering or corruption, not a sync in progress (a sync withdraws the manifest first).
    """
    entries, why_not = read_manifest(model_dir, model_id, revision)
    if why_not:
        return [why_not]
    extra = unlisted_files(model_dir, entries)
    if extra:
        # The writer may still create new keys under a published prefix; vLLM would load them
        # (another *.safetensors shard, a *.py for trust_remote_code), so only listed files pass.
        raise Refusal(f"{model_dir} holds files the manifest does not list: {', '.join(extra)}")
    found = size_problems(entries)
    if found or verify != VERIFY_SHA256:
        return found
    mismatches = hash_mismatches(entries, parallel_reads)
    if mismatches:
        raise Refusal("; ".join(mismatches))
    return []


def add_arguments(parser):
    parser.add_argument("--dir", required=True, help="the mounted model prefix")
    parser.add_argument("--revision", required=True, help="the 40-hex commit the predictor serves")
    parser.add_argument("--model-id", default="", help="the Hugging Face id the predictor serves")
    parser.add_argument(
        "--verify",
        choices=(VERIFY_SHA256, VERIFY_SIZE),
        default=VERIFY_SHA256,
        help="sha256 (default): read every file and compare its SHA-256 with the manifest; "
        "size: compare sizes only (no read; for models too large to read at every start)",
    )
    parser.add_argument("--parallel-reads", type=int, default=8, help="files hashed at once (sha256)")
    parser.add_argument("--timeout-seconds", type=float, default=0, help="keep waiting this long for the sync Job")
    parser.add_argument("--interval-seconds", type=float, default=10)


def refuse(reason):
    print(f"refusing to serve {reason}", file=sys.stderr, flush=True)
    return 1


def run(args):
    deadline = time.monotonic() + args.timeout_seconds
    started = time.monotonic()
    while True:
        try:
            found = problems(args.dir, args.model_id, args.revision, args.verify, args.parallel_reads)
        except Refusal as refusal:
            return refuse(f"the model at {args.dir}: {refusal}")
        except OSError as err:  # a read error mid-hash: Mountpoint or S3 trouble, not a verdict
            found = [f"reading {args.dir} failed: {err}"]
        if not found:
            checked = "SHA-256 verified" if args.verify == VERIFY_SHA256 else "sizes checked"
            print(
                f"model at {args.dir} is complete for revision {args.revision} "
                f"({checked} in {time.monotonic() - started:.1f}s)",
                flush=True,
            )
            return 0
        if time.monotonic() >= deadline:
            shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
            return refuse(f"a partial model after {args.timeout_seconds:.0f}s: {shown}")
        print(f"waiting for the model at {args.dir}: {found[0]}", flush=True)
        time.sleep(min(args.interval_seconds, max(0.0, deadline - time.monotonic())))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="check-mounted", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
