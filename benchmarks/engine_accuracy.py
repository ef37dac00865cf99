"""How well the physics-based engine model reproduces real vLLM replicas (not a timed test).

    .venv/bin/python benchmarks/engine_accuracy.py            # refit + leave-one-out (~5 min)
    .venv/bin/python benchmarks/engine_accuracy.py --quick    # the stored factors only

Prints: the physics of the calibrated replica (bytes, FLOPs, derived KV capacity vs the run's
KV usage); the three efficiency factors (stored in capacity/engine/profiles.py, and refitted
here on ../shared/calibration/ only) with the residuals per calibration row (rps and p99);
leave-one-row-out errors (fit on four rows, predict the fifth); the 8 GB references as a
sanity check; and a request-shape sweep showing the direction of change off the calibration
shape. Issue 12's targets: median error <= 8%, worst <= 15% on the calibration rows.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capacity.engine import get_profile, predict
from capacity.engine.explain import explain
from capacity.engine.fit import Row, fit, predict_rows, read_rows
from capacity.engine.hardware import checkpoint, gpu
from capacity.engine.profiles import CALIBRATED, calibrated
from capacity.engine.roofline import Efficiency, memory_plan

CALIBRATION = (
    Path(__file__).resolve().parents[2] / "shared" / "calibration" / "a10g-deepseek-r1-14b-awq-concurrency.csv"
)
PROMPT, OUTPUT = 1024, 128  # the calibration's request shape (its README)


def _err(predicted: float, measured: float) -> float:
    return predicted / measured - 1


def physics() -> None:
    model, device = checkpoint("DeepSeek-R1-Distill-Qwen-14B-AWQ"), gpu("a10g")
    a = model.architecture
    plan = memory_plan(model, device, 0.90, 2048, 40)
    print("== physics: DeepSeek-R1-Distill-Qwen-14B-AWQ on one A10G ==")
    print(
        f"  weights resident {model.weight_bytes / 1e9:.2f} GB, read per step {model.weight_bytes_read_per_step / 1e9:.2f} GB"
    )
    print(f"  KV {a.kv_bytes_per_token:,} bytes/token; linear {model.linear_flops_per_token / 1e9:.1f} GFLOP/token")
    print(
        f"  memory plan: 0.90 x {device.memory_mib} MiB = {plan.budget_bytes / 2**30:.2f} GiB - weights "
        f"{plan.weight_bytes / 2**30:.2f} - activations {plan.activation_bytes / 2**30:.2f} - runtime "
        f"{plan.runtime_bytes / 2**30:.2f} = KV {plan.kv_bytes / 2**30:.2f} GiB"
    )
    estimate = 40 * 1090 / 0.78  # the run: 78% KV usage at 40 requests x ~1,090 tokens of context
    derived = plan.kv_tokens()
    print(
        f"  KV capacity derived {derived:,} tokens vs ~{estimate:,.0f} from the run's usage ({_err(derived, estimate):+.1%})"
    )


def residuals(title: str, efficiency: Efficiency, rows: list[Row]) -> list[float]:
    states = predict_rows(calibrated(efficiency), rows)
    print(
        f"== {title}: bandwidth {efficiency.bandwidth:.3f}, FLOPs {efficiency.flops:.3f}, step overhead {efficiency.step_overhead_s * 1e3:.2f} ms =="
    )
    print("  conc   rps meas  pred    err   p99 meas  pred    err   KV   bound")
    errors = []
    for s, r in zip(states, rows):
        e_rps, e_p99 = _err(s.rps, r.rps), _err(s.p99_latency_s, r.p99_latency_s)
        errors += [abs(e_rps), abs(e_p99)]
        bound = explain(calibrated(efficiency), r.concurrency, PROMPT, OUTPUT).bound
        print(
            f"  {r.concurrency:4d}   {r.rps:5.2f} {s.rps:6.3f} {e_rps:+6.1%}   {r.p99_latency_s:6.1f} {s.p99_latency_s:6.2f} "
            f"{e_p99:+6.1%}  {s.avg_kv_usage:4.0%}  {bound}"
        )
    print(f"  |error| over rps and p99: median {statistics.median(errors):.1%}, worst {max(errors):.1%}")
    return errors


def leave_one_out(rows: list[Row], start: Efficiency) -> None:
    print("== leave one row out: fit on four rows, predict the fifth ==")
    errors = []
    for i, held in enumerate(rows):
        rest = rows[:i] + rows[i + 1 :]
        e = fit(calibrated, rest, start, iterations=40)
        [s] = predict_rows(calibrated(e), [held])
        e_rps, e_p99 = _err(s.rps, held.rps), _err(s.p99_latency_s, held.p99_latency_s)
        errors += [abs(e_rps), abs(e_p99)]
        print(
            f"  held out concurrency {held.concurrency:3d}: factors ({e.bandwidth:.3f}, {e.flops:.3f}, "
            f"{e.step_overhead_s * 1e3:.2f} ms) -> rps {e_rps:+6.1%}, p99 {e_p99:+6.1%}"
        )
    print(f"  held-out |error|: median {statistics.median(errors):.1%}, worst {max(errors):.1%}")


def eight_gb() -> None:
    print("== sanity check: the README's 8 GB references (physics, A10G factors, assumed RTX 3070) ==")
    small, eager = get_profile("8gb-qwen2.5-1.5b"), get_profile("8gb-qwen2.5-3b-eager")
    a = predict(small, 64, 150, 256)
    ttft = {prompt: predict(small, 1, prompt, 128).ttft_p50_s for prompt in (150, 450)}
    c = predict(eager, 16, 150, 256)
    d = explain(eager, 16, 1500, 300)
    print(
        f"  1.5B x64 (150+256): {a.output_tokens_per_s:,.0f} tokens/s vs ~2,600 ({_err(a.output_tokens_per_s, 2600):+.0%}), KV {a.avg_kv_usage:.0%} vs ~11%"
    )
    print(
        f"  1.5B TTFT p50 at low load: {ttft[150] * 1e3:.0f} ms (150-token prompt), {ttft[450] * 1e3:.0f} ms (450) vs 31 ms (prompt length not reported)"
    )
    print(
        f"  3B eager x16 (150+256): {c.output_tokens_per_s:,.0f} tokens/s vs ~670 ({_err(c.output_tokens_per_s, 670):+.0%})"
    )
    print(f"  3B eager x16 (1500+300): {d.bound} ({d.why}), TTFT p95 {d.state.ttft_p95_s:.1f} s vs 4.1 s")
    device = gpu("rtx-3070")
    for repo, reported, seqs in (
        ("Qwen/Qwen2.5-1.5B-Instruct", 6382 * 16, 256),
        ("Qwen/Qwen2.5-3B-Instruct", 751 * 16, 256),
    ):
        derived = memory_plan(checkpoint(repo), device, 0.90, 2048, seqs).kv_tokens()
        print(
            f"  {repo}: KV capacity derived for 8 GiB {derived:,} tokens vs reported {reported:,} ({_err(derived, reported):+.0%})"
        )


def sweep() -> None:
    profile = calibrated()
    print("== shape sweep, a10g-r1-14b-awq at concurrency 20 (direction of change) ==")
    print("  prompt output    rps  out tok/s  p99 s  TTFT p95 s  KV    bound")
    shapes = [(1024, o) for o in (128, 256, 512, 1024)] + [(p, 128) for p in (128, 512, 2048, 4096)]
    for p, o in shapes:
        e = explain(profile, 20, p, o)
        s = e.state
        print(
            f"  {p:6d} {o:6d} {s.rps:6.2f} {s.output_tokens_per_s:10.0f} {s.p99_latency_s:6.1f} {s.ttft_p95_s:11.2f}  "
            f"{s.avg_kv_usage:4.0%}  {e.bound}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="skip the refit and leave-one-out (stored factors only)")
    args = parser.parse_args()
    rows = read_rows(CALIBRATION, PROMPT, OUTPUT)
    physics()
    residuals("stored factors (capacity/engine/profiles.py CALIBRATED)", CALIBRATED, rows)
    if not args.quick:
        refit = fit(calibrated, rows, CALIBRATED, iterations=60)
        residuals("refitted on the calibration CSV", refit, rows)
        leave_one_out(rows, CALIBRATED)
    eight_gb()
    sweep()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
