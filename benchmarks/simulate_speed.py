"""Simulator speed: wall-clock seconds of one run, median of N (the machine is shared).

    .venv/bin/python benchmarks/simulate_speed.py [--repeat 3] [--case azure-1h|synthetic-24h|all]

azure-1h       the Azure conversation trace (1 h, ~19k requests) through 1-10 replicas
synthetic-24h  24 h of Poisson arrivals at 10 req/s (~864k requests), 1-10 replicas
Both use the prod stack's policy for its first model with minReplicas 1 / fallbackReplicas 1 / maxReplicas 10 and
the calibrated A10G 14B profile. The oracle is not part of the timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capacity.planning.run import RunOptions, feasible_requests, run_policy, summarize  # noqa: E402
from capacity.planning.stack import apply_config_set, load_stack_model  # noqa: E402
from capacity.planning.tune import knob_edits  # noqa: E402
from capacity.workload import traces  # noqa: E402

AZURE = ROOT.parent / "shared" / "traces" / "azure-llm-2023-conv.csv"
CASES = {
    "azure-1h": str(AZURE),
    "synthetic-24h": "synthetic:step:base=10,peak=10,duration=86400,prompt=1024,output=128,sigma=0.6,seed=1",
}


def stack_model():
    sm = load_stack_model("prod", profile="a10g-r1-14b-awq", root=ROOT)
    return apply_config_set(sm, knob_edits(sm.model.name, {"minReplicas": 1, "fallbackReplicas": 1, "maxReplicas": 10}))


def bench(case: str, repeat: int) -> dict:
    sm = stack_model()
    trace = traces.load(CASES[case])
    times, summary = [], {}
    for _ in range(repeat):
        start = time.perf_counter()
        result = run_policy(sm, trace, RunOptions(initial_replicas=1))
        times.append(time.perf_counter() - start)
        summary = summarize(result, sm, feasible_requests(sm, trace))
    return {
        "case": case,
        "requests": len(trace),
        "median_s": round(statistics.median(times), 2),
        "runs_s": [round(t, 2) for t in times],
        "max_replicas_used": summary.max_replicas_used,
        "slo_attainment": summary.slo_attainment,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--case", choices=[*CASES, "all"], default="all")
    args = parser.parse_args()
    for case in CASES if args.case == "all" else [args.case]:
        print(json.dumps(bench(case, args.repeat)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
