"""What the KV cache is worth (issue 26): the GPU-hours a fleet needs at the stack's attainment
target, cold (today's model) against prefix caching behind least-request and behind the endpoint
picker, on a trace whose prefixes are known.

    .venv/bin/python benchmarks/prefix_cache.py [--rate-scale 0.5] [--oracle-interval 300] [--json]

The prod stack's 14B (`qwen25-14b-awq`, its engine profile and flags) replays the shared Mooncake
synthetic trace (`hash_ids`: 512-token prefix blocks), rate-scaled so that the fleet needs several
replicas. Each variant is scored two ways:
- the oracle at the stack's `capacityPlanning.attainmentTarget`: per interval the fewest warm
  replicas meeting the target (`capacity.sim.oracle`), each interval replayed with empty caches;
  its GPU-hours are "what the fleet needs at equal attainment", the number the target is about;
- the stack's own autoscaling policy run over the trace: attainment, GPU-hours, fleet hit rate.
Variants: `cold` = least-request with prefix caching off (every prompt prefilled, as the simulator
modelled before issue 26), `least-request` and `endpoint-picker` with vLLM's prefix caching, and the
endpoint picker without it (what its queue and KV scorers alone are worth, apart from the cache).
Attainment is over the same requests in every variant (those an idle replica serves within the
SLO; the trace's prompts past maxModelLen 15000 are refused by vLLM and left out).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capacity.planning.run import (  # noqa: E402
    RunOptions,
    feasible_requests,
    run_oracle,
    run_policy,
    summarize,
    warmed,
)
from capacity.planning.stack import StackModel, load_stack_model  # noqa: E402
from capacity.sim.cluster.router import RouterName  # noqa: E402
from capacity.workload import traces  # noqa: E402

TRACE = ROOT.parent / "shared" / "traces" / "mooncake-synthetic.jsonl"
STACK, MODEL = "prod", "qwen25-14b-awq"
VARIANTS: tuple[tuple[str, RouterName, bool], ...] = (
    ("cold (least-request, no prefix caching)", "least-request", False),
    ("least-request + prefix caching", "least-request", True),
    ("endpoint-picker, no prefix caching", "endpoint-picker", False),
    ("endpoint-picker + prefix caching", "endpoint-picker", True),
)


def variant(sm: StackModel, caching: bool) -> StackModel:
    return replace(sm, profile=replace(sm.profile, prefix_caching=caching))


def measure(rate_scale: float, oracle_interval: float, seed: int) -> dict:
    sm = load_stack_model(STACK, MODEL, root=ROOT)
    trace = traces.rate_scale(traces.load(str(TRACE)), rate_scale, seed=seed)
    target = sm.attainment_target
    feasible = feasible_requests(sm, trace)
    rows = []
    for name, router, caching in VARIANTS:
        model = variant(sm, caching)
        options = RunOptions(router=router, seed=seed, oracle_interval_s=oracle_interval, oracle_objective=target)
        orc = run_oracle(model, trace, options)
        summary = summarize(run_policy(model, trace, warmed(model, trace, options)), model, feasible)
        rows.append(
            {
                "variant": name,
                "oracle_gpu_hours": round(orc.gpu_hours, 3),
                "oracle_peak_replicas": orc.peak_replicas,
                "oracle_infeasible_intervals": orc.infeasible_intervals,
                "policy_slo_attainment": summary.slo_attainment,
                "policy_gpu_hours": summary.gpu_hours,
                "policy_max_replicas": summary.max_replicas_used,
                "hit_rate": summary.prefix_cache_hit_rate,
                "replica_hit_rates": [r["hit_rate"] for r in summary.prefix_cache_replicas],
            }
        )
    cold = rows[0]["oracle_gpu_hours"]
    for row in rows:
        row["oracle_saving_vs_cold"] = round(1 - row["oracle_gpu_hours"] / cold, 4) if cold else None
    return {
        "stack": STACK,
        "model": MODEL,
        "profile": sm.profile.name,
        "trace": TRACE.name,
        "rate_scale": rate_scale,
        "requests": len(trace),
        "feasible_requests": int(feasible.sum()),
        "attainment_target": target,
        "oracle_interval_s": oracle_interval,
        "rows": rows,
    }


def table(result: dict) -> str:
    lines = [
        f"{result['stack']}/{result['model']} ({result['profile']}) on {result['trace']} x{result['rate_scale']:g}: "
        f"{result['requests']} requests, {result['feasible_requests']} feasible; target "
        f"{result['attainment_target']:.0%}, oracle intervals {result['oracle_interval_s']:g} s",
        "",
        "| variant | hit rate | oracle GPU-h at target | vs cold | oracle peak | policy SLO | policy GPU-h | policy max rep |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        hit = "-" if r["hit_rate"] is None else f"{r['hit_rate']:.1%}"
        lines.append(
            f"| {r['variant']} | {hit} | {r['oracle_gpu_hours']:.2f} | {-r['oracle_saving_vs_cold']:+.0%} | "
            f"{r['oracle_peak_replicas']} | {r['policy_slo_attainment']:.1%} | {r['policy_gpu_hours']:.2f} | "
            f"{r['policy_max_replicas']} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate-scale", type=float, default=0.5, help="x times the trace's requests (default 0.5)")
    parser.add_argument("--oracle-interval", type=float, default=300.0, help="seconds per oracle interval")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.rate_scale <= 0 or args.oracle_interval <= 0:
        print("--rate-scale and --oracle-interval must be > 0", file=sys.stderr)
        return 2
    result = measure(args.rate_scale, args.oracle_interval, args.seed)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
