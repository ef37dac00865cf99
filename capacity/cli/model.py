"""Predict one replica's closed-loop steady state from its engine profile (no server, no GPU)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from capacity.engine import DEFAULT_PROFILE, PROFILES, get_profile, predict


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help=f"engine profile, one of: {', '.join(sorted(PROFILES))}")
    parser.add_argument("--concurrency", type=int, required=True, help="requests in flight (closed loop)")
    parser.add_argument("--prompt-tokens", type=int, default=1024, help="prompt length of each request, tokens")
    parser.add_argument("--output-tokens", type=int, default=128, help="output length of each request, tokens")
    parser.add_argument("--seed", type=int, default=0, help="seed of the engine model's random draws")
    parser.add_argument("--json", action="store_true", help="print the steady state as JSON")


def run(args: argparse.Namespace) -> int:
    state = predict(get_profile(args.profile), args.concurrency, args.prompt_tokens, args.output_tokens, seed=args.seed)
    if args.json:
        print(json.dumps(asdict(state), indent=2))
        return 0
    print(
        f"{state.profile}: concurrency {state.concurrency}, {state.prompt_tokens}+{state.output_tokens} tokens\n"
        f"  {state.rps:.2f} req/s, {state.total_tokens_per_s:.0f} tokens/s\n"
        f"  latency p50 {state.p50_latency_s:.2f}s  p95 {state.p95_latency_s:.2f}s  p99 {state.p99_latency_s:.2f}s\n"
        f"  TTFT p95 {state.ttft_p95_s:.2f}s  avg waiting {state.avg_waiting:.2f}  avg KV usage {state.avg_kv_usage:.0%}"
    )
    return 0
