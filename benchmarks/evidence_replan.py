"""Would the planner still pick the committed policies? A reduced re-plan of every stack model.

    .venv/bin/python benchmarks/evidence_replan.py [--trials 16] [--workers 2] [--only prod/qwen25-14b-awq]

tests/test_evidence.py checks, in one simulation per model, that each committed policy keeps the
planner's rules, meets the stack's attainment target and reproduces the held-out GPU-hours its
`# Evidence` block records. This script adds the question the suite cannot afford (about 30 s a
model on 2 cores): the planner, re-run on the search part of the same traffic with --trials
candidates (same seed, same GPU type), must not find a policy meeting the target for more than 10%
less than the committed one. Run it before committing a re-plan or an engine change; it exits 1
and prints the thresholds the planner now sets differently, and the command to re-plan with, for
every model that fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capacity.planning.audit import audit, replan  # noqa: E402
from capacity.planning.evidence import evidence, evidence_traffic, for_key  # noqa: E402
from capacity.planning.stack import load_stack_model  # noqa: E402

MODELS = [("dev", "qwen25-1p5b"), ("prod", "qwen25-14b-awq"), ("prod", "qwen25-7b-awq")]


def check(stack: str, model: str, trials: int, workers: int) -> tuple[bool, str]:
    """(passed, one paragraph) for one stack model."""
    sm = load_stack_model(stack, model, root=ROOT)
    blocks = evidence(sm.source.path)
    proof = for_key(blocks, f"autoscaling.{model}")
    traffic = evidence_traffic(sm, blocks)
    searched, held = traffic.parts()
    now = replan(sm, searched, held, trials, traffic.seed, workers)
    result = audit(sm, searched, held, traffic.seed, proof, now=now)
    c, r = result.committed, result.replanned
    line = (
        f"{stack}/{model}: committed {c.slo_attainment:.2%} held out, ${c.cost_usd:.2f}, {c.gpu_hours:.2f} GPU-h; "
        + (f"re-planned ({trials} trials) {r.slo_attainment:.2%}, ${r.cost_usd:.2f}" if r else "re-plan found nothing")
    )
    return not result.problems, line if not result.problems else line + "\n" + result.message()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=16, help="candidates per re-plan (default: 16)")
    parser.add_argument("--workers", type=int, default=2, help="parallel simulations (default: 2)")
    parser.add_argument("--only", action="append", metavar="STACK/MODEL", help="audit only these (repeatable)")
    args = parser.parse_args(argv)
    chosen = [m for m in MODELS if not args.only or f"{m[0]}/{m[1]}" in args.only]
    unknown = set(args.only or ()) - {f"{s}/{m}" for s, m in MODELS}
    if unknown:
        parser.error(f"--only {', '.join(sorted(unknown))}: not one of {', '.join(f'{s}/{m}' for s, m in MODELS)}")
    failed = 0
    for stack, model in chosen:
        passed, text = check(stack, model, args.trials, args.workers)
        print(("ok    " if passed else "FAIL  ") + text, flush=True)
        failed += not passed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
