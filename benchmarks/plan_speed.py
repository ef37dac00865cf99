"""Planner speed: a 150-trial plan of prod's 14B on the five shared days, timed (issue 35's target:
under 45 minutes on a 2-core machine), on one worker process or several sharing one study.

    .venv/bin/python benchmarks/plan_speed.py [--trials 150] [--workers 2 ...] [--storage postgres|sqlite|none]

Each `--workers N` (repeatable; default 2) runs `python -m capacity plan` once, in a subprocess, on
the shared curve (days 2-4 searched after day 1's history, day 5 held out) on the A10G with the
given storage: `postgres` starts a throwaway PostgreSQL on 127.0.0.1 (tests/postgres.py, Debian's
`postgresql` binaries), `sqlite` a file in a temporary folder, `none` the plan's own temporary
journal. One JSON line per run: wall-clock minutes, trials and pruned trials, the
winner's parameters and its search and held-out numbers, whether it meets the target, and whether
the plan finished inside the target time. With several runs, a last line says how the winners
relate (same parameters, or the cost and attainment of each): several workers draw their trials in
the order they finish, so the same seed need not give the same winner (docs/tasks/plan-on-many-machines.md).

Speed is judged on this script's wall-clock minutes on a quiet machine, not in the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.postgres import find_bin_dir, missing_binaries_message, run_postgres  # noqa: E402

TARGET_MINUTES = 45.0
SHARED_DAYS = (
    "rates:../shared/traces/azure2024-conv-5days-rates.csv:lengths=../shared/traces/azure-llm-2023-conv.csv,"
    "scale=0.06,start=2024-05-12T00:00:00Z"
)


def plan_command(trials: int, workers: int, storage: str | None) -> list[str]:
    command = [sys.executable, "-m", "capacity", "plan", "--stack", "prod", "--model", "qwen25-14b-awq"]
    command += ["--trace", SHARED_DAYS, "--holdout-days", "1", "--gpu", "a10g", "--trials", str(trials)]
    command += ["--seed", "0", "--workers", str(workers), "--json", "--png", str(Path(tempfile.mkdtemp()) / "f.png")]
    return command + (["--storage", storage] if storage else [])


@contextlib.contextmanager
def storage_url(kind: str) -> Iterator[str | None]:
    """A fresh storage for one run: a throwaway PostgreSQL, a SQLite file, or none (the plan's own)."""
    if kind == "postgres":
        bin_dir = find_bin_dir()
        if bin_dir is None:
            raise SystemExit(missing_binaries_message())
        with run_postgres(bin_dir) as url:
            yield url
    elif kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{folder}/plan.db"
    else:
        yield None


def timed_plan(trials: int, workers: int, kind: str) -> dict[str, Any]:
    """One plan in a subprocess and what it returned, with its wall-clock minutes."""
    with storage_url(kind) as url:
        started = time.perf_counter()
        done = subprocess.run(plan_command(trials, workers, url), cwd=ROOT, capture_output=True, text=True)
        minutes = (time.perf_counter() - started) / 60
    if done.returncode != 0:
        raise SystemExit(f"plan with --workers {workers} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    out = json.loads(done.stdout)
    winner = next((f for f in out["frontier"] if f.get("cost_usd") == (out["search"] or {}).get("cost_usd")), None)
    return {
        "workers": workers,
        "storage": kind,
        "minutes": round(minutes, 1),
        "within_target_time": minutes < TARGET_MINUTES,
        "trials": out["trials"],
        "pruned": out["pruned_trials"],
        "winner_params": winner["params"] if winner else None,
        "search": _numbers(out["search"]),
        "held_out": _numbers(out["validation"]),
        "static": out.get("static"),
        "meets_target": out["validation_meets_target"],
    }


def _numbers(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {k: summary.get(k) for k in ("slo_attainment", "cost_usd", "gpu_hours", "oracle_ratio")}


def relation(runs: list[dict[str, Any]]) -> str:
    """How the winners of several runs relate: the same parameters, or each one's numbers."""
    if len({json.dumps(r["winner_params"], sort_keys=True) for r in runs}) == 1:
        return "every run chose the same winner"
    return "different winners: " + "; ".join(
        f"{r['workers']} worker(s): held out {r['held_out']['slo_attainment']:.2%} at ${r['held_out']['cost_usd']:.2f}"
        for r in runs
        if r["held_out"]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=150, help="candidates per plan (default: 150)")
    parser.add_argument("--workers", type=int, action="append", help="worker processes of one run (repeatable)")
    parser.add_argument("--storage", choices=("postgres", "sqlite", "none"), default="postgres")
    args = parser.parse_args(argv)
    counts = args.workers or [2]
    runs = []
    for workers in counts:
        runs.append(timed_plan(args.trials, workers, args.storage))
        print(json.dumps(runs[-1]), flush=True)
    if len(runs) > 1:
        print(json.dumps({"relation": relation(runs)}))
    return 0 if all(r["within_target_time"] and r["meets_target"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
