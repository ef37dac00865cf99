"""Simulator speed: seconds per run, medians of runs alternated with a baseline revision, and the
cost per simulated request from one hour to one week (issue 35: a simulation linear in the trace).

    .venv/bin/python benchmarks/simulate_speed.py [--case NAME ...] [--repeat 3] [--baseline REV] [--flat]

Each case runs one policy (or the oracle) of the prod stack's 14B (its committed profile) over one
trace, in a fresh subprocess: its wall-clock seconds (the run only: no stack loading, no summary),
its CPU seconds, its peak RSS and a digest of every per-request result. `--baseline REV` (e.g. 56ad579, main before
the issue) runs the same case on a git worktree of that revision, alternating with this checkout,
and prints the median speed-up and whether both gave the same results to the last bit. `--flat`
runs one hour and one week of the same rates (a curve with a one-hour period) and prints the cost
per simulated request of each (target: the week within 20% of the hour). One JSON line each; the
targets are judged on wall-clock medians, the CPU-second ones beside them show how much of a
difference is a shared machine's noise.

Cases (`CASES`; a new one is one line):
  day           one simulated day at the prod 14B's volume (a synthetic diurnal day, ~242k requests,
                daily peak/trough 3x) under its committed policy (min 26 of 34 replicas)
  day-reactive  the same day under a reactive policy (minReplicas 1..34): pods come and go
  day-oracle    the oracle's GPU-hours on that day (five-minute intervals replayed at several counts)
  curve-day     the fifth day of the shared five-day curve (Azure 2024 conversation, 6% of the
                region: ~265k requests) with the 2023 trace's lengths, under the committed policy;
                materialised once as an offsets CSV, so a revision without `rates:` replays it too
  azure-1h      the Azure 2023 conversation hour under the committed policy

"The committed policy" is the one committed at POLICY_REV (the static-leaning 14B policy the issue
measured), read from that revision's Pulumi.prod.yaml by both checkouts: a re-plan of the stack
does not change what a case times.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
TARGET_SPEEDUP = 5.0
TARGET_FLATNESS = 1.2  # a week's cost per request over an hour's
POLICY_REV = "56ad579"  # whose Pulumi.prod.yaml every case's policy comes from
SHARED_CURVE = (
    "rates:{shared}/traces/azure2024-conv-5days-rates.csv:lengths={shared}/traces/azure-llm-2023-conv.csv,"
    "scale=0.06,start=2024-05-12T00:00:00Z@4d:5d"
)


def diurnal(duration_s: int, period_s: int = 86400) -> str:
    """The prod 14B's volume on a diurnal curve: 2.8 req/s on average, x(1 -/+ 0.5)."""
    return (
        f"synthetic:diurnal:mean=2.8,amplitude=0.5,period={period_s},duration={duration_s},"
        "prompt=1000,output=250,seed=1"
    )


class Case(NamedTuple):
    trace: str  # a `--trace` argument (a file relative to the repository's parent, or a spec)
    policy: str = "committed"  # or "reactive": the committed one with minReplicas 1..maxReplicas 34
    oracle: bool = False  # time the oracle instead of the policy
    stack: str = "prod"  # the stack file the subprocess reads (pinned_stack_file)


CASES = {
    "day": Case(diurnal(86400)),
    "day-reactive": Case(diurnal(86400), "reactive"),
    "day-oracle": Case(diurnal(86400), oracle=True),
    "curve-day": Case(SHARED_CURVE),
    "azure-1h": Case("shared/traces/azure-llm-2023-conv.csv"),
}
# --flat: the same rates for one hour and for one week (a one-hour period, so the hour holds them all).
FLAT = {"hour": Case(diurnal(3600, 3600)), "week": Case(diurnal(7 * 86400, 3600))}
REACTIVE = {"minReplicas": 1, "fallbackReplicas": 1, "maxReplicas": 34}


def pinned_stack_file(folder: Path) -> Path:
    """POLICY_REV's Pulumi.prod.yaml, written into `folder`."""
    path = folder / "Pulumi.prod.yaml"
    shown = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{POLICY_REV}:Pulumi.prod.yaml"], check=True, capture_output=True
    )
    path.write_bytes(shown.stdout)
    return path


def stack_model(policy: str = "committed", stack: str = "prod") -> Any:
    """The prod stack's first model (the 14B) with the case's policy; `stack`: its file."""
    from capacity.planning.stack import apply_config_set, load_stack_model
    from capacity.planning.tune import knob_edits

    sm = load_stack_model(stack, root=ROOT)
    if policy == "reactive":
        sm = apply_config_set(sm, knob_edits(sm.model.name, REACTIVE))
    return sm


def trace_source(case: Case) -> str:
    """The case's trace as the checkout under test loads it (files from beside this repository)."""
    return case.trace if case.trace.startswith(("synthetic:", "/")) else str(ROOT.parent / case.trace)


def materialised(case: Case, folder: Path) -> Case:
    """A `rates:` case as an offsets CSV in `folder` (arrival seconds and lengths, which every
    revision reads), drawn once by this checkout; other cases as they are."""
    if not case.trace.startswith("rates:"):
        return case
    import numpy as np

    from capacity.workload import traces

    trace = traces.load(case.trace.format(shared=ROOT.parent / "shared"))
    path = folder / "curve-day.csv"
    columns = np.column_stack([trace.arrivals, trace.prompt_tokens, trace.output_tokens])
    np.savetxt(
        path,
        columns,
        fmt=["%.6f", "%d", "%d"],
        delimiter=",",
        header="offset_s,prompt_tokens,output_tokens",
        comments="",
    )
    return case._replace(trace=str(path))


def run_one(case: Case) -> dict[str, Any]:
    """One timed run in this process (imports from ROOT): seconds, requests, peak RSS, digest."""
    import numpy as np

    from capacity.planning.run import RunOptions, run_oracle, run_policy
    from capacity.workload import traces

    sm = stack_model(case.policy, case.stack)
    trace = traces.load(trace_source(case))
    start, cpu_start = time.perf_counter(), time.process_time()
    if case.oracle:
        result: Any = run_oracle(sm, trace, RunOptions())
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        arrays = [result.replicas, result.feasible]
        extra = repr((result.gpu_hours, result.infeasible_intervals))
    else:
        result = run_policy(sm, trace, RunOptions())
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        arrays = [result.arrival, result.ttft, result.tpot, result.e2e, result.outcome]
        extra = repr((result.timeline, result.nodes, result.scale_times, result.end_time, result.max_replicas_used))
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    digest.update(extra.encode())
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "requests": len(trace),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "digest": digest.hexdigest()[:16],
    }


def measure(root: Path, case: Case) -> dict[str, Any]:
    """`run_one` in a fresh interpreter importing the checkout at `root`."""
    spec = json.dumps(case._asdict())
    out = subprocess.run(
        [sys.executable, __file__, "--run-one", spec, "--root", str(root)],
        check=True,
        capture_output=True,
        text=True,
    )
    measured: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return measured


class Baseline:
    """A git worktree of `rev` beside a link to this repository's `shared` sibling (so the
    relative paths of the stack and the traces read the same files); removed on exit."""

    def __init__(self, rev: str) -> None:
        self.rev = rev
        self._tmp = tempfile.TemporaryDirectory(prefix="simulate-speed-")
        self.root = Path(self._tmp.name) / "repo"
        (Path(self._tmp.name) / "shared").symlink_to(ROOT.parent / "shared")

    def __enter__(self) -> Baseline:
        git = ["git", "-C", str(ROOT), "worktree"]
        subprocess.run([*git, "prune"], check=True)  # a killed run's worktree left behind
        subprocess.run([*git, "add", "--detach", "--quiet", str(self.root), self.rev], check=True)
        return self

    def __exit__(self, *_: object) -> None:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(self.root)], check=False)
        self._tmp.cleanup()


def bench(name: str, case: Case, repeat: int, baseline: Baseline | None) -> dict[str, Any]:
    """The case on this checkout (and the baseline, alternating): medians and the speed-up."""
    runs: dict[str, list[dict[str, Any]]] = {"this": [], "baseline": []}
    for _ in range(repeat):
        runs["this"].append(measure(ROOT, case))
        if baseline is not None:
            runs["baseline"].append(measure(baseline.root, case))
    this = runs["this"]
    line: dict[str, Any] = {
        "case": name,
        "requests": this[0]["requests"],
        "median_s": round(statistics.median(r["seconds"] for r in this), 2),
        "runs_s": [round(r["seconds"], 2) for r in this],
        "peak_rss_mb": max(r["peak_rss_mb"] for r in this),
    }
    if baseline is not None:
        base = runs["baseline"]
        base_median = statistics.median(r["seconds"] for r in base)
        base_cpu = statistics.median(r["cpu_seconds"] for r in base)
        line |= {
            "baseline": baseline.rev,
            "baseline_median_s": round(base_median, 2),
            "baseline_runs_s": [round(r["seconds"], 2) for r in base],
            "speedup": round(base_median / statistics.median(r["seconds"] for r in this), 2),
            "cpu_speedup": round(base_cpu / statistics.median(r["cpu_seconds"] for r in this), 2),
            "target_speedup": TARGET_SPEEDUP,
            "same_results": {r["digest"] for r in this} == {r["digest"] for r in base},
        }
    return line


def flatness(repeat: int, stack: str) -> dict[str, Any]:
    """Microseconds per simulated request over one hour and over one week of the same rates."""
    runs = {
        name: [measure(ROOT, case._replace(stack=stack)) for _ in range(repeat if name == "hour" else 1)]
        for name, case in FLAT.items()
    }

    def per_request(name: str, clock: str) -> float:
        return statistics.median(r[clock] / r["requests"] for r in runs[name]) * 1e6

    return {
        "case": "per-request hour vs week",
        "requests": {name: r[0]["requests"] for name, r in runs.items()},
        "hour_us_per_request": round(per_request("hour", "seconds"), 1),
        "week_us_per_request": round(per_request("week", "seconds"), 1),
        "week_over_hour": round(per_request("week", "seconds") / per_request("hour", "seconds"), 3),
        "cpu_week_over_hour": round(per_request("week", "cpu_seconds") / per_request("hour", "cpu_seconds"), 3),
        "target_at_most": TARGET_FLATNESS,
        "peak_rss_mb": {name: max(r["peak_rss_mb"] for r in rs) for name, rs in runs.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="*", choices=[*CASES], default=None, help="default: day")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", metavar="REV", help="also time a git revision, e.g. 56ad579")
    parser.add_argument("--flat", action="store_true", help="cost per request: one hour vs one week")
    parser.add_argument("--run-one", help=argparse.SUPPRESS)  # the subprocess: one case as JSON
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)  # ... importing this checkout
    args = parser.parse_args()
    if args.run_one:
        global ROOT
        ROOT = args.root.resolve()
        sys.path.insert(0, str(ROOT))
        print(json.dumps(run_one(Case(**json.loads(args.run_one)))), flush=True)
        return 0
    names = args.case or ([] if args.flat else ["day"])
    sys.path.insert(0, str(ROOT))  # `materialised` draws a rates: case with this checkout
    with tempfile.TemporaryDirectory(prefix="simulate-speed-cases-") as scratch:
        folder = Path(scratch)
        stack = str(pinned_stack_file(folder))
        cases = {name: materialised(CASES[name], folder)._replace(stack=stack) for name in names}
        if args.baseline:
            with Baseline(args.baseline) as baseline:
                for name, case in cases.items():
                    print(json.dumps(bench(name, case, args.repeat, baseline)), flush=True)
        else:
            for name, case in cases.items():
                print(json.dumps(bench(name, case, args.repeat, None)), flush=True)
        if args.flat:
            print(json.dumps(flatness(args.repeat, stack)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
