"""Predict a replica's steady state from its engine profile, and the bound that limits it (no GPU)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from rich.table import Table

from capacity.cli.load_args import parse_levels
from capacity.engine import DEFAULT_PROFILE, PROFILES, get_profile
from capacity.engine.explain import Explained, explain
from capacity.tables import console, keep_numbers_whole


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile", default=DEFAULT_PROFILE, help=f"engine profile, one of: {', '.join(sorted(PROFILES))}"
    )
    parser.add_argument(
        "--concurrency", required=True, help="requests in flight (closed loop): one level or a list like 1,5,10,20,40"
    )
    parser.add_argument("--prompt-tokens", type=int, default=1024, help="prompt length of each request, tokens")
    parser.add_argument("--output-tokens", type=int, default=128, help="output length of each request, tokens")
    parser.add_argument("--seed", type=int, default=0, help="seed of the engine model's random draws")
    parser.add_argument("--json", action="store_true", help="print each point's steady state and bound as JSON")


def table(points: list[Explained]) -> Table:
    first = points[0].state
    out = Table(title=f"{first.profile}: {first.prompt_tokens}+{first.output_tokens} tokens per request")
    for column in ("concurrency", "req/s", "tokens/s", "p99 s", "TTFT p95 s", "avg waiting", "avg KV", "bound", "why"):
        out.add_column(column, justify="left" if column in ("bound", "why") else "right")
    for p in points:
        s = p.state
        out.add_row(
            str(s.concurrency),
            f"{s.rps:.2f}",
            f"{s.total_tokens_per_s:.0f}",
            f"{s.p99_latency_s:.2f}",
            f"{s.ttft_p95_s:.2f}",
            f"{s.avg_waiting:.2f}",
            f"{s.avg_kv_usage:.0%}",
            p.bound,
            p.why,
        )
    return keep_numbers_whole(out, text_columns=(7, 8))


def run(args: argparse.Namespace) -> int:
    profile = get_profile(args.profile)
    points = [
        explain(profile, c, args.prompt_tokens, args.output_tokens, seed=args.seed)
        for c in parse_levels(str(args.concurrency))
    ]
    if args.json:
        print(json.dumps([{**asdict(p.state), "bound": p.bound, "why": p.why} for p in points], indent=2))
        return 0
    console().print(table(points))
    return 0
