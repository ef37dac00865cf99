"""How well the engine model reproduces real vLLM replicas (a benchmark, not a timed test).

    .venv/bin/python benchmarks/engine_accuracy.py             # stored calibration + leave-one-source-out (~10 min)
    .venv/bin/python benchmarks/engine_accuracy.py --quick     # stored calibration, in-sample only (~5 s)
    .venv/bin/python benchmarks/engine_accuracy.py --fit       # refit on ../shared/calibration/ and print it
    .venv/bin/python benchmarks/engine_accuracy.py --write     # also write capacity/engine/data/accuracy.yaml

The fit set is ../shared/calibration/ only: the A10G sweep (closed loop, the calibrated replica)
and every vLLM row of public/vllm-public-measurements.csv, each replayed from its scenario file
in benchmarks/scenarios/public/ (`python -m capacity model --scenario FILE` runs any of them).
Prints every point (measured, predicted, error, regime), the in-sample summary, the
leave-one-source-out (LOSO) summary (each publisher's rows predicted by a calibration fitted on
the others: median, saturated median, worst), the A10G sweep's errors, and the validation table:
published measurements that are NOT in ../shared (benchmarks/scenarios/validation/), never fitted.

`--write` stores what capacity/engine/trust.py reads: per GPU, its LOSO error per regime.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capacity.engine.fit import (  # noqa: E402
    SWEEP_SOURCE,
    Point,
    all_points,
    fit,
    leave_one_source_out,
    load_scenarios,
    read_sweep,
    scenario_points,
    summary,
)
from capacity.engine.profiles import CALIBRATED  # noqa: E402
from capacity.engine.roofline import Calibration  # noqa: E402
from capacity.engine.trust import ACCURACY_FILE  # noqa: E402

CALIBRATION = ROOT.parent / "shared" / "calibration"
SWEEP = CALIBRATION / "a10g-deepseek-r1-14b-awq-concurrency.csv"
PUBLIC = ROOT / "benchmarks" / "scenarios" / "public"
VALIDATION = ROOT / "benchmarks" / "scenarios" / "validation"


def table(title: str, points: Sequence[Point]) -> None:
    print(f"== {title} ==")
    print(f"  {'point':50s} {'metric':22s} {'regime':9s} {'measured':>10s} {'predicted':>10s}  error")
    for p in points:
        print(f"  {p.name:50s} {p.metric:22s} {p.regime:9s} {p.measured:10.2f} {p.predicted:10.2f}  {p.error:+6.1%}")


def report(title: str, points: Sequence[Point]) -> dict[str, float]:
    s = summary(points)
    print(
        f"  {title}: {int(s['points'])} points, median |error| {s['median']:.1%}, light median "
        f"{s['light_median']:.1%}, saturated median {s['saturated_median']:.1%}, worst {s['worst']:.1%}, "
        f"within 25%: {s['within_25']:.0%}"
    )
    return s


def calibration_text(c: Calibration) -> str:
    v0, v1 = c.schedulers["v0"], c.schedulers["v1"]
    return (
        f"bandwidth GDDR {c.bandwidth['gddr']:.3f} / HBM {c.bandwidth['hbm']:.3f} of datasheet; compute "
        f"{c.compute:.3f} of sustained GEMM; GEMM fill {c.gemm_fill:.3f} x ridge; V0 step {v0.step_s * 1e3:.2f} ms "
        f"+ {v0.seq_s * 1e6:.1f} us/seq, server {v0.server_s * 1e3:.2f} ms/request; V1 step "
        f"{v1.step_s * 1e3:.2f} ms + {v1.seq_s * 1e6:.1f} us/seq, server {v1.server_s * 1e3:.2f} ms/request"
    )


def per_gpu(points: Sequence[Point]) -> dict[str, dict[str, float]]:
    out = {}
    for gpu in sorted({p.gpu for p in points}):
        mine = [p for p in points if p.gpu == gpu]
        s = summary(mine)
        out[gpu] = {
            "points": int(s["points"]),
            "sources": sorted({p.source for p in mine}),
            "median": s["median"],
            "light_median": s["light_median"] if any(p.regime == "light" for p in mine) else None,
            "saturated_median": s["saturated_median"] if any(p.regime == "saturated" for p in mine) else None,
            "worst": s["worst"],
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="in-sample only (no leave-one-source-out)")
    parser.add_argument("--fit", action="store_true", help="refit the calibration first and report the refit")
    parser.add_argument("--write", action="store_true", help=f"write {ACCURACY_FILE.relative_to(ROOT)}")
    parser.add_argument("--iterations", type=int, default=100, help="simplex iterations per leave-one-out fit")
    parser.add_argument("--workers", type=int, default=5, help="leave-one-out folds fitted at once")
    args = parser.parse_args()
    rows, scenarios = read_sweep(SWEEP), load_scenarios(PUBLIC)
    calibration = fit(rows, scenarios, CALIBRATED) if args.fit else CALIBRATED
    print(f"calibration ({'refitted' if args.fit else 'stored in capacity/engine/profiles.py'}):")
    print(f"  {calibration_text(calibration)}")
    if args.fit:
        print(f"  as stored: {calibration!r}")
    points = all_points(rows, scenarios, calibration)
    table("in-sample: fitted on these rows (../shared/calibration/ only)", points)
    in_sample = report("in-sample", points)
    sweep = [p for p in points if p.source == SWEEP_SOURCE]
    sweep_summary = report("A10G sweep (in-sample)", sweep)
    out: dict = {
        "calibration": calibration.as_vector(),
        "in_sample": in_sample,
        "a10g_sweep": sweep_summary,
        "command": "python benchmarks/engine_accuracy.py --write",
    }
    if not args.quick:
        held = leave_one_source_out(rows, scenarios, calibration, args.iterations, workers=args.workers)
        table("leave one source out: each source predicted by a fit on the others", held)
        out["loso"] = report("leave-one-source-out", held)
        out["loso_a10g_sweep"] = report("A10G sweep (held out)", [p for p in held if p.source == SWEEP_SOURCE])
        out["loso_per_gpu"] = per_gpu(held)
    validation = load_scenarios(VALIDATION) if VALIDATION.is_dir() else []
    if validation:
        vpoints = scenario_points(validation, calibration)
        table("validation: published measurements not in ../shared (never fitted)", vpoints)
        out["validation"] = report("validation", vpoints)
    if args.write:
        if "loso" not in out:
            parser.error("--write needs the leave-one-source-out run (drop --quick)")
        header = "# Written by `python benchmarks/engine_accuracy.py --write`; read by capacity/engine/trust.py.\n"
        ACCURACY_FILE.write_text(header + yaml.safe_dump(out, sort_keys=True))
        print(f"wrote {ACCURACY_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
