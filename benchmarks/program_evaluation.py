"""Time the Pulumi program's evaluation under mocks, per stack (medians of warm runs, and
the cold first run that includes importing the provider SDKs).

    .venv/bin/python benchmarks/program_evaluation.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs

    started = time.perf_counter()
    from tests.harness import run_program  # imports pulumi, pulumi_aws, pulumi_eks, ...

    imported = time.perf_counter()
    print(f"import harness + provider SDKs: {imported - started:.2f} s")
    for stack in ("dev", "prod"):
        timings, count = [], 0
        for _ in range(runs):
            t0 = time.perf_counter()
            count = len(run_program(stack).resources)
            timings.append(time.perf_counter() - t0)
        print(
            f"{stack}: {count} resources, first {timings[0]:.2f} s, "
            f"median of {runs} {statistics.median(timings):.2f} s (min {min(timings):.2f}, max {max(timings):.2f})"
        )


if __name__ == "__main__":
    main()
