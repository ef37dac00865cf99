"""Arguments shared by the commands that drive load (`load`, `sweep`, `lab`) and the config they build."""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from capacity.measure.config import LoadConfig
from capacity.workload import traces


def add_load_arguments(parser: argparse.ArgumentParser, *, sweep: bool = False) -> None:
    """Options shared by `load` and `sweep`."""
    parser.add_argument(
        "--url",
        action="append",
        required=True,
        help="base URL (e.g. http://127.0.0.1:8000); repeat for round-robin over replicas",
    )
    if sweep:
        parser.add_argument(
            "--model",
            default=None,
            help="the stack model whose autoscaling block to retune, and the name requested unless "
            "--served-model-name (default: the one served with --profile, else the stack's first; "
            "requested: the first in /v1/models)",
        )
        parser.add_argument(
            "--served-model-name",
            default=None,
            help="the model name to request, when it is not the stack model's name: e.g. a `capacity serve` "
            "replica's (default: --model, else the first in /v1/models)",
        )
    else:
        parser.add_argument("--model", default=None, help="model name to request (default: the first in /v1/models)")
    parser.add_argument(
        "--api", choices=("completions", "chat"), default="completions", help="/v1/completions or /v1/chat/completions"
    )
    parser.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=sweep,
        help="streaming requests (measure TTFT and ITL)",
    )
    parser.add_argument("--api-key", default=None, help="sent as 'Authorization: Bearer KEY' (default: none)")
    parser.add_argument("--prompt-tokens", type=int, default=1024, help="prompt length of each request, tokens")
    parser.add_argument("--output-tokens", type=int, default=128, help="max_tokens of each request")
    parser.add_argument(
        "--warmup", type=float, default=30.0, help="seconds before measuring" + (" (per level)" if sweep else "")
    )
    parser.add_argument(
        "--duration", type=float, default=120.0, help="measured seconds" + (" (per level)" if sweep else "")
    )
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer.json (or its folder) for exact token counts (default: N words, about N tokens)",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="per-request timeout, seconds")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="model seconds per wall second (a mock's --speedup); times are in model seconds",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the prompts and arrival draws")
    parser.add_argument("--no-progress", action="store_true", help="no live progress bar (shown only on a terminal)")
    parser.add_argument(
        "--client",
        choices=("auto", "aiohttp", "raw"),
        default="auto",
        help="raw: a lean HTTP/1.1 client for plain http:// URLs that takes arrival times from "
        "the kernel (no client queueing in the latencies); aiohttp: any URL; "
        "auto (default): raw when every URL is http://",
    )
    if not sweep:
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--concurrency", type=int, help="closed loop with this many requests in flight")
        mode.add_argument("--rate", type=float, help="open loop, Poisson arrivals at this many requests/s")
        mode.add_argument("--trace", type=Path, help=f"replay a trace (arrival offsets and lengths): {traces.SOURCES}")
        parser.add_argument("--trace-speed", type=float, default=1.0, help="replay this many times faster")
        parser.add_argument(
            "--prefix-reuse",
            action="store_true",
            help="with --trace: replay its shared prefixes (Mooncake hash_ids, 512-token blocks) as identical "
            "leading text (default: every prompt starts uniquely, so no prefix is ever cached)",
        )
        parser.add_argument(
            "--max-requests", type=int, default=None, help="stop after sending this many (default: no cap)"
        )
        parser.add_argument(
            "--out", type=Path, default=Path("out/load"), help="folder for requests.jsonl and summary.json"
        )


def check_urls(urls: list[str], timeout_s: float = 5.0) -> None:
    """Each --url is an http(s) URL whose host accepts connections: fail before any load, naming it."""
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--url {url}: expected http://HOST:PORT or https://HOST:PORT, e.g. http://127.0.0.1:8000")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise ValueError(f"--url {url}: the port is not in 1..65535") from None
        try:
            socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
        except OSError as error:
            reason = error.strerror or str(error) or type(error).__name__
            raise ValueError(f"--url {url}: cannot connect to {parts.hostname}:{port} ({reason})") from None


def _client(choice: str, urls: list[str]) -> str:
    if choice != "auto":
        return choice
    # the raw client needs a selector event loop (socket readers), which Windows' default lacks
    plain_http = all(url.startswith("http://") for url in urls)
    return "raw" if plain_http and sys.platform != "win32" else "aiohttp"


def config_from_args(args: argparse.Namespace, **overrides: object) -> LoadConfig:
    values = dict(
        urls=tuple(args.url),
        model=getattr(args, "served_model_name", None) or args.model,
        api=args.api,
        stream=args.stream,
        api_key=args.api_key,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        warmup_s=args.warmup,
        duration_s=args.duration,
        tokenizer=args.tokenizer,
        timeout_s=args.timeout,
        time_scale=args.time_scale,
        seed=args.seed,
        client=_client(args.client, args.url),
    )
    for key in ("concurrency", "rate", "trace", "trace_speed", "prefix_reuse", "max_requests"):
        if hasattr(args, key):
            values[key] = getattr(args, key)
    values.update(overrides)
    return LoadConfig(**values)  # type: ignore[arg-type]  # argparse's typed values; LoadConfig validates them


def parse_levels(text: str) -> list[int]:
    """`--concurrency 1,5,10` of `sweep` and `lab`: distinct levels, sorted."""
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--concurrency must be a comma-separated list of integers, got {text!r}") from None
    if not levels or any(c < 1 for c in levels) or len(set(levels)) != len(levels):
        raise ValueError(f"--concurrency needs distinct integers >= 1, got {text!r}")
    return sorted(levels)
