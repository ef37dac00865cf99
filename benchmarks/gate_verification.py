"""Cost of the serving gate's SHA-256 verification (modelsync/mounted_check.py), in GB/s.

Writes a realistic shard set (default: four safetensors-sized files of 0.5, 1, 1.5 and 2 GiB) under a
temporary directory, then times the gate's own hashing (`hash_mismatches`) over it for several
--parallel-reads values, --repeats times each, and prints the medians. A baseline and two cases:
  * memory: one core hashing a buffer already in memory (hashlib's SHA-256 ceiling per core);
  * cold: each file's pages are dropped first (posix_fadvise DONTNEED, only these files), so reads hit the disk;
  * cached: the files are in the page cache, so this is the hashing (CPU) ceiling of this machine.
Through Mountpoint the read side is S3 instead of the disk; the hashing ceiling is the same.

    .venv/bin/python benchmarks/gate_verification.py [--sizes-gib 0.5 1 1.5 2] [--repeats 5] [--dir /tmp]

Bounded: a fixed file set, a fixed number of runs; the files are removed at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from modelsync.mounted_check import hash_mismatches, sha256_of  # noqa: E402

GIB = 1024**3
BLOCK = 64 * 1024 * 1024


def write_shards(root: Path, sizes_gib: list[float]) -> list[tuple[str, str, int, str]]:
    """Incompressible files (a random block, varied per block) and their manifest entries."""
    entries = []
    seed = os.urandom(BLOCK)
    for index, size_gib in enumerate(sizes_gib):
        path = root / f"model-{index + 1:05d}-of-{len(sizes_gib):05d}.safetensors"
        size = int(size_gib * GIB)
        with path.open("wb") as handle:
            written = 0
            while written < size:
                chunk = seed[: min(BLOCK, size - written)]
                handle.write(bytes([written // BLOCK % 256]) + chunk[1:])
                written += len(chunk)
        entries.append((path.name, str(path), size, sha256_of(str(path))))
    return entries


def drop_from_page_cache(entries: list[tuple[str, str, int, str]]) -> None:
    for _, path, _, _ in entries:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def measure(entries: list[tuple[str, str, int, str]], parallel_reads: int, cold: bool) -> float:
    if cold:
        drop_from_page_cache(entries)
    else:
        hash_mismatches(entries, parallel_reads)  # warm the cache
    started = time.perf_counter()
    mismatches = hash_mismatches(entries, parallel_reads)
    seconds = time.perf_counter() - started
    assert not mismatches, mismatches
    return sum(e[2] for e in entries) / seconds / 1e9


def one_core_ceiling() -> float:
    buffer = os.urandom(256 * 1024 * 1024)
    started = time.perf_counter()
    hashlib.sha256(buffer).digest()
    return len(buffer) / (time.perf_counter() - started) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-gib", type=float, nargs="+", default=[0.5, 1.0, 1.5, 2.0])
    parser.add_argument("--parallel-reads", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    memory = [one_core_ceiling() for _ in range(args.repeats)]
    results = [{"case": "memory", "parallelReads": 1, "medianGBps": round(statistics.median(memory), 3)}]
    print(json.dumps(results[-1]), flush=True)
    with tempfile.TemporaryDirectory(prefix="gate-bench-", dir=args.dir) as tmp:
        entries = write_shards(Path(tmp), args.sizes_gib)
        total = sum(e[2] for e in entries)
        for cold in (True, False):
            for readers in args.parallel_reads:
                runs = [measure(entries, readers, cold) for _ in range(args.repeats)]
                results.append(
                    {
                        "case": "cold" if cold else "cached",
                        "parallelReads": readers,
                        "medianGBps": round(statistics.median(runs), 3),
                        "runsGBps": [round(r, 3) for r in runs],
                    }
                )
                print(json.dumps(results[-1]), flush=True)
    print(
        json.dumps(
            {
                "files": len(entries),
                "totalGB": round(total / 1e9, 2),
                "cpus": os.cpu_count(),
                "loadAverage": [round(x, 1) for x in os.getloadavg()],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
