"""The `load` command's flags reach the load generator's config."""

import argparse

import pytest

from capacity.cli.load import add_arguments
from capacity.cli.load_args import config_from_args


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--url", "http://127.0.0.1:8000", "--concurrency", "4", *argv])


def test_client_defaults_to_raw_for_plain_http_urls() -> None:
    assert config_from_args(parse()).client == "raw"


def test_client_defaults_to_aiohttp_when_any_url_is_https() -> None:
    args = parse()
    args.url = ["http://127.0.0.1:8000", "https://gateway.example.com"]
    assert config_from_args(args).client == "aiohttp"


def test_aiohttp_client_is_selectable_for_http_urls() -> None:
    assert config_from_args(parse("--client", "aiohttp")).client == "aiohttp"


def test_raw_client_refuses_https_urls() -> None:
    args = parse("--client", "raw")
    args.url = ["https://gateway.example.com"]
    with pytest.raises(ValueError, match="plain http://"):
        config_from_args(args)


def test_stop_after_4xx_reaches_the_config() -> None:
    args = parse("--stop-after-4xx", "3")
    assert config_from_args(args, max_consecutive_4xx=args.stop_after_4xx).max_consecutive_4xx == 3


def test_load_against_an_unknown_model_stops_with_one_line_naming_the_url_model_and_status(tmp_path) -> None:
    import asyncio
    import subprocess
    import sys
    import threading
    from pathlib import Path

    from capacity.engine import get_profile
    from capacity.mock.serving import serve_replicas

    loop = asyncio.new_event_loop()
    started, urls = threading.Event(), []
    stop = asyncio.Event()

    async def serve() -> None:
        async with serve_replicas(get_profile("8gb-qwen2.5-1.5b")) as [replica]:
            urls.append(replica.url)
            started.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "capacity",
                "load",
                "--url",
                urls[0],
                "--model",
                "nope",
                "--concurrency",
                "4",
                "--warmup",
                "0",
                "--duration",
                "600",
                "--no-progress",
                "--out",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parents[3],
        )
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    for part in (urls[0], "'nope'", "HTTP 404"):
        assert part in result.stderr


def _summary(**changes) -> dict:
    base = {
        "stream": True,
        "successful": 3,
        "successful_rps": 0.123456789,
        "total_tokens_per_s": 1234.56789,
        "latency_s": {"p50": 1.23456789, "p99": None},
        "ttft_s": {"p50": 0.0123456789},
        "errors": {},
        "token_counting": "words",
        "skipped_over_context": 0,
        "requests": 40,
        "measured": 0,
        "window_s": [30.0, 150.0],
    }
    return base | changes


def test_a_run_that_measured_nothing_says_all_ended_in_the_warm_up_and_what_to_change() -> None:
    """Issue 37: `load --trace ... --max-requests 40 --time-scale 20` printed an all-null summary and exited 1."""
    from capacity.cli.load import nothing_measured

    line = nothing_measured(_summary(), 30.0, 40)
    assert line == (
        "nothing measured: all 40 requests ended in the 30 s warm-up, before the measured window; "
        "lower --warmup or raise --max-requests"
    )
    assert nothing_measured(_summary(), 30.0, None).endswith("lower --warmup or raise --duration")


def test_a_run_in_which_no_request_finished_names_both_causes() -> None:
    """Found walking the docs: `load --time-scale 20` against a `serve` at speedup 1 ends after 150
    model seconds (7.5 s) with every request cancelled in flight, and said no request was sent."""
    from capacity.cli.load import nothing_measured

    line = nothing_measured(_summary(requests=0), 30.0, 40)
    assert line.startswith("no request finished within the run's 150 s: none was sent")
    assert "all were still running when it ended (is --time-scale the server's speedup?" in line


def test_the_printed_summary_keeps_four_significant_digits() -> None:
    from capacity.cli.load import printed

    shown = printed(_summary())
    assert (shown["successful_rps"], shown["total_tokens_per_s"]) == (0.1235, 1235.0)
    assert shown["latency_s"] == {"p50": 1.235, "p99": None}


def test_ttft_is_printed_only_for_a_streamed_run_and_its_absence_is_said() -> None:
    from capacity.cli.load import notes, printed

    assert "ttft_s" in printed(_summary())
    assert "ttft_s" not in printed(_summary(stream=False))
    assert notes(_summary(stream=False)) == [
        "no TTFT: the requests were not streamed (pass --stream to measure time to first token)"
    ]
    assert notes(_summary()) == []
