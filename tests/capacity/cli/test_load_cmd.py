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
