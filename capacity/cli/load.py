"""Drive load at an OpenAI-compatible URL (closed loop, Poisson, or trace replay); write JSONL + summary."""

from __future__ import annotations

import argparse
import functools
import json

from capacity.cli.load_args import add_load_arguments, check_urls, config_from_args
from capacity.cli.progress import progress_bar
from capacity.measure.generator import run_load
from capacity.measure.results import write_outputs
from capacity.runtime import run_main
from capacity.workload import traces


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_load_arguments(parser)
    parser.add_argument(
        "--stop-after-4xx",
        type=int,
        default=10,
        metavar="N",
        help="stop when N answers in a row are HTTP 4xx other than 408/429 (an unknown model, a "
        "wrong key): the server refuses what is sent (default: 10)",
    )


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args, max_consecutive_4xx=args.stop_after_4xx)
    if config.trace is not None:
        trace = traces.load(config.trace)  # a bad row fails here, naming its line, before any request
        if config.prefix_reuse and trace.block_ids is None:
            raise ValueError(
                f"--prefix-reuse: {config.trace} has no prefix block ids (a Mooncake trace's hash_ids on every line)"
            )
    check_urls(args.url)
    with progress_bar(not args.no_progress, f"load {config.mode}") as update:
        result = run_main(functools.partial(run_load, config, update))
    write_outputs(result, args.out / "requests.jsonl", args.out / "summary.json")
    s = result.summary
    print(
        json.dumps(
            {
                k: s[k]
                for k in (
                    "successful",
                    "successful_rps",
                    "total_tokens_per_s",
                    "latency_s",
                    "ttft_s",
                    "errors",
                    "token_counting",
                )
            },
            indent=2,
        )
    )
    if s["skipped_over_context"]:
        print(
            f"skipped {s['skipped_over_context']} trace requests whose prompt + output is over the replica's "
            "max_model_len (vLLM refuses them with HTTP 400); the rest were replayed"
        )
    print(f"wrote {args.out / 'requests.jsonl'} and {args.out / 'summary.json'}")
    return 0 if s["successful"] else 1
