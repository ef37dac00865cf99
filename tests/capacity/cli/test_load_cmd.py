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
