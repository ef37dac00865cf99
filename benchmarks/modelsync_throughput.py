"""Throughput of modelsync against a loopback S3 API (moto_server on 127.0.0.1).

Measures (medians over --repeats runs, each on a fresh bucket):
  * baselines: SHA-256 hashing of the model on this machine, and plain boto3 `upload_file`
    (s3transfer, same concurrency and part size, no SHA-256) to the same server: the emulator's ceiling;
  * first sync of a ~1 GiB multi-file model (hash + multipart upload + verify + publish), in MB/s;
  * a no-change rerun over a 200-file model (manifest verify: one LIST, one GET, 200 HEADs), in seconds;
  * the same 200-file rerun with the manifest removed (LIST + local hashing + 200 HEADs + publish).

    .venv/bin/python benchmarks/modelsync_throughput.py [--model-mib 1024] [--repeats 3]

moto keeps objects in its own process, so the numbers bound the client side and loopback HTTP,
not S3 itself. Bounded: one server, a fixed number of runs, everything on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from boto3.s3.transfer import TransferConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from modelsync import MANIFEST_NAME  # noqa: E402
from modelsync.cli import s3_client  # noqa: E402
from modelsync.hashing import digest_file  # noqa: E402
from modelsync.sync import SyncConfig, sync_model  # noqa: E402

MIB = 1024 * 1024
REVISION = "0" * 40


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return server, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("moto_server did not start")


def write_files(root: Path, sizes: dict[str, int]) -> None:
    for name, size in sizes.items():
        with (root / name).open("wb") as handle:
            left = size
            while left:
                chunk = min(left, 16 * MIB)
                handle.write(os.urandom(chunk))
                left -= chunk


def big_model(total_mib: int) -> dict[str, int]:
    """Shards like a real checkpoint: four equal safetensors plus small JSON/tokenizer files."""
    small = {
        "config.json": 2_000,
        "generation_config.json": 300,
        "tokenizer.json": 7 * MIB,
        "tokenizer_config.json": 10_000,
        "model.safetensors.index.json": 30_000,
    }
    shard = (total_mib * MIB - sum(small.values())) // 4
    return {**small, **{f"model-0000{i}-of-00004.safetensors": shard for i in range(1, 5)}}


def config(bucket: str, source: Path, concurrency: int) -> SyncConfig:
    return SyncConfig(
        model_id="bench/model",
        revision=REVISION,
        bucket=bucket,
        prefix=f"bench/model/{REVISION}",
        source=str(source),
        concurrency=concurrency,
    )


def fresh_bucket(client) -> str:
    name = f"bench-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name)
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-mib", type=int, default=1024)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1")
    server, endpoint = start_moto()
    client = s3_client(endpoint, "us-east-1", args.concurrency)
    results: dict[str, object] = {"endpoint": "moto_server on 127.0.0.1", "concurrency": args.concurrency}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            big, many = Path(tmp, "big"), Path(tmp, "many")
            big.mkdir(), many.mkdir()
            write_files(big, big_model(args.model_mib))
            write_files(many, {f"shard-{i:03d}.bin": 4096 for i in range(args.files)})
            total = sum(p.stat().st_size for p in big.iterdir())

            hashing = []
            for _ in range(args.repeats):
                started = time.monotonic()
                for path in big.iterdir():
                    digest_file(path, 64 * MIB)
                hashing.append(time.monotonic() - started)
            results["sha256_hashing_MBps"] = round(total / 1e6 / statistics.median(hashing), 1)

            plain = []
            transfer = TransferConfig(
                multipart_threshold=64 * MIB, multipart_chunksize=64 * MIB, max_concurrency=args.concurrency
            )
            for _ in range(args.repeats):
                bucket = fresh_bucket(client)
                started = time.monotonic()
                with ThreadPoolExecutor(args.concurrency) as pool:
                    list(
                        pool.map(
                            lambda p, b=bucket: client.upload_file(str(p), b, f"plain/{p.name}", Config=transfer),
                            big.iterdir(),
                        )
                    )
                plain.append(time.monotonic() - started)
            results["plain_boto3_upload_MBps"] = round(total / 1e6 / statistics.median(plain), 1)

            first = []
            for _ in range(args.repeats):
                report = sync_model(config(fresh_bucket(client), big, args.concurrency), client)
                assert report.outcome == "published" and report.uploaded_bytes == total
                first.append(report.seconds)
            mbps = [total / 1e6 / s for s in first]
            results["first_sync"] = {
                "bytes": total,
                "files": len(list(big.iterdir())),
                "seconds": first,
                "median_MBps": round(statistics.median(mbps), 1),
            }

            bucket = fresh_bucket(client)
            cfg = config(bucket, many, args.concurrency)
            sync_model(cfg, client)
            rerun, no_manifest = [], []
            for _ in range(args.repeats):
                report = sync_model(cfg, client)
                assert report.outcome == "already-published" and not report.uploaded
                rerun.append(report.seconds)
                client.delete_object(Bucket=bucket, Key=f"{cfg.prefix}/{MANIFEST_NAME}")
                report = sync_model(cfg, client)
                assert report.outcome == "published" and not report.uploaded
                no_manifest.append(report.seconds)
            results["no_change_rerun"] = {
                "files": args.files,
                "seconds": rerun,
                "median_seconds": round(statistics.median(rerun), 3),
            }
            results["rerun_without_manifest"] = {
                "files": args.files,
                "seconds": no_manifest,
                "median_seconds": round(statistics.median(no_manifest), 3),
            }
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
