"""The `load` command's flags reach the load generator's config."""

import argparse

import pytest

from capacity.loadgen_cmd import add_arguments, config_from_args


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--url", "http://127.0.0.1:8000", "--concurrency", "4", *argv])


def test_client_defaults_to_aiohttp() -> None:
    assert config_from_args(parse()).client == "aiohttp"


def test_raw_client_is_selectable() -> None:
    assert config_from_args(parse("--client", "raw")).client == "raw"


def test_raw_client_refuses_https_urls() -> None:
    args = parse("--client", "raw")
    args.url = ["https://gateway.example.com"]
    with pytest.raises(ValueError, match="plain http://"):
        config_from_args(args)
