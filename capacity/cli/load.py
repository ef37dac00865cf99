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
from capacity.tables import rounded
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
    if not s["measured"]:  # an all-null summary would only hide why
        print(f"wrote {args.out / 'requests.jsonl'} and {args.out / 'summary.json'}")
        raise ValueError(nothing_measured(s, args.warmup, args.max_requests))
    print(json.dumps(printed(s), indent=2))
    print("\n".join(notes(s)))
    print(f"wrote {args.out / 'requests.jsonl'} and {args.out / 'summary.json'}")
    return 0 if s["successful"] else 1


PRINTED = ("successful", "successful_rps", "total_tokens_per_s", "latency_s", "ttft_s", "errors", "token_counting")


def printed(summary: dict) -> dict:
    """The summary's headline numbers at 4 significant digits (summary.json keeps them whole);
    TTFT only from a streamed run: a non-streamed answer arrives whole, so it has no first token."""
    keys = [k for k in PRINTED if k != "ttft_s" or summary["stream"]]
    return rounded({k: summary[k] for k in keys})


def notes(summary: dict) -> list[str]:
    lines = []
    if not summary["stream"]:
        lines.append("no TTFT: the requests were not streamed (pass --stream to measure time to first token)")
    if summary["skipped_over_context"]:
        lines.append(
            f"skipped {summary['skipped_over_context']} trace requests whose prompt + output is over the replica's "
            "max_model_len (vLLM refuses them with HTTP 400); the rest were replayed"
        )
    return lines


def nothing_measured(summary: dict, warmup_s: float, max_requests: int | None) -> str:
    """Why a run measured nothing, and what to change."""
    if not summary["requests"]:
        # In-flight requests are cancelled when the window closes, so none recorded is either none
        # sent or none finished in time (a --time-scale the server does not run at, found in issue 37's walk).
        return (
            f"no request finished within the run's {summary['window_s'][1]:g} s: none was sent (a trace without rows, "
            "or --max-requests 0) or all were still running when it ended (is --time-scale the server's speedup? "
            "else raise --duration)"
        )
    more = "raise --max-requests" if max_requests is not None else "raise --duration"
    return (
        f"nothing measured: all {summary['requests']} requests ended in the {warmup_s:g} s warm-up, before the "
        f"measured window; lower --warmup or {more}"
    )
