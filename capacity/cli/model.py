"""Predict a replica's steady state and its limiting bound, or a benchmark from its setup (no GPU).

`--profile P --concurrency 1,5,10`: the closed-loop steady state of an engine profile at each
level and the bound that limits it. `--scenario FILE.yaml`: a
published vLLM benchmark's metrics from its setup (the format in capacity/engine/scenario.py and
the README)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from rich.table import Table

from capacity.cli.load_args import parse_levels
from capacity.cli.stack_args import add_profiles_dir_argument, profile_help
from capacity.engine import DEFAULT_PROFILE, get_profile
from capacity.engine.explain import Explained, explain
from capacity.engine.scenario import METRIC_NAMES, Metrics, Scenario, load
from capacity.engine.scenario import run as run_scenario
from capacity.engine.trust import Trust, trust_of
from capacity.tables import console, keep_numbers_whole


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help=profile_help())
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--concurrency", help="requests in flight (closed loop): one level or a list like 1,5,10,20,40")
    what.add_argument(
        "--scenario",
        type=Path,
        help="a benchmark setup (GPU, model, flags, vLLM version, arrival, lengths) to predict vLLM's "
        "benchmark metrics for, instead of --profile and --concurrency",
    )
    parser.add_argument("--prompt-tokens", type=int, default=1024, help="prompt length of each request, tokens")
    parser.add_argument("--output-tokens", type=int, default=128, help="output length of each request, tokens")
    parser.add_argument("--seed", type=int, default=0, help="seed of the engine model's random draws")
    parser.add_argument("--json", action="store_true", help="print each point's steady state and bound as JSON")
    add_profiles_dir_argument(parser)


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


def _gpus(scenario: Scenario) -> str:
    """The replica's GPUs: the GPU, or `4x l40s over pcie4-x16` for a tensor-parallel one."""
    if scenario.tensor_parallel_size == 1 or scenario.interconnect is None:
        return scenario.gpu.name
    return f"{scenario.tensor_parallel_size}x {scenario.gpu.name} over {scenario.interconnect.name}"


def scenario_table(scenario: Scenario, metrics: Metrics) -> Table:
    out = Table(
        title=f"{scenario.name}: {_gpus(scenario)}, {scenario.checkpoint.repo}, vLLM {scenario.vllm_version} "
        f"({scenario.scheduler}), {scenario.arrival} {scenario.arrival_value:g}, {metrics.completed} requests"
    )
    for column in ("metric", "predicted", "measured", "error"):
        out.add_column(column, justify="left" if column == "metric" else "right")
    shown = ("benchmark_duration_s", "request_throughput", "output_tok_s", "total_tok_s", *METRIC_NAMES[:12])
    for name in dict.fromkeys([*shown, *scenario.measured]):
        value = metrics.metric(name)
        measured = scenario.measured.get(name)
        out.add_row(
            name,
            f"{value:.2f}",
            "" if measured is None else f"{measured:.2f}",
            "" if measured is None else f"{value / measured - 1:+.1%}",
        )
    return keep_numbers_whole(out, text_columns=(0,))


def _run_scenario(args: argparse.Namespace) -> int:
    scenario = load(args.scenario)
    metrics = run_scenario(scenario)
    trust = trust_of(scenario.profile())
    if args.json:
        out = {k: getattr(metrics, k) for k in Metrics.__dataclass_fields__}
        out.update(
            scenario=scenario.name,
            gpu=scenario.gpu.name,
            model=scenario.checkpoint.repo,
            vllm_version=scenario.vllm_version,
            scheduler=scenario.scheduler,
            tensor_parallel_size=scenario.tensor_parallel_size,
            measured={k: {"measured": v, "predicted": metrics.metric(k)} for k, v in scenario.measured.items()},
            trust=trust.level,
            trust_basis=trust.basis,
        )
        print(json.dumps(out, indent=2))
        return 0
    console().print(scenario_table(scenario, metrics))
    console().print(trust_line(trust))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.scenario is not None:
        return _run_scenario(args)
    profile = get_profile(args.profile)
    points = [
        explain(profile, c, args.prompt_tokens, args.output_tokens, seed=args.seed)
        for c in parse_levels(str(args.concurrency))
    ]
    trust = trust_of(profile)
    if args.json:
        extra = {"trust": trust.level, "trust_basis": trust.basis}
        print(json.dumps([{**asdict(p.state), "bound": p.bound, "why": p.why, **extra} for p in points], indent=2))
        return 0
    console().print(table(points))
    console().print(trust_line(trust))
    return 0


def trust_line(trust: Trust) -> str:
    """How far the prediction can be trusted: its level, the errors it rests on, and why."""
    return f"trust: {trust.level} (error light {trust.light_error:.0%}, saturated {trust.saturated_error:.0%}): {trust.basis}"
