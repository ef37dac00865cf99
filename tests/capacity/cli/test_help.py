"""Every command's --help reads as documentation: a purpose line, each option explained with its
default, no contradictory flags, one default stack."""

import argparse
import subprocess
import sys

import pytest

from capacity.__main__ import COMMANDS, build_parser
from capacity.cli import DEFAULT_STACK
from tests.capacity.conftest import REPO


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(command: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in command._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


def _in_required_group(command: argparse.ArgumentParser, action: argparse.Action) -> bool:
    return any(g.required and action in g._group_actions for g in command._mutually_exclusive_groups)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_has_help_that_shows_or_states_its_default(name):
    command = _commands()[name]
    for action in _options(command):
        shown = command.formatter_class(command.prog)._get_help_string(action) or ""
        assert action.help, f"{name} {action.option_strings[0]} has no help"
        flag = action.nargs == 0
        assert action.required or flag or _in_required_group(command, action) or "default" in shown, (
            f"{name} {action.option_strings[0]}: help does not say its default"
        )


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_a_one_line_purpose(name):
    module = __import__(COMMANDS[name], fromlist=["_"])
    purpose = module.__doc__.strip().splitlines()[0]
    assert purpose.endswith(".") and len(purpose) <= 110, purpose


def test_every_command_with_a_stack_defaults_to_the_same_one():
    defaults = {name: a.default for name, c in _commands().items() for a in _options(c) if a.dest == "stack"}
    assert set(defaults) >= {"lab", "sweep", "recommend", "simulate", "compare", "tune"}
    optional = {"collect", "profile"}  # they read a stack only when one is named
    required = {"recommend"}  # it prints commands for a stack: named, never guessed (issue 37)
    assert {name: d for name, d in defaults.items() if name not in optional | required} == dict.fromkeys(
        set(defaults) - optional - required, DEFAULT_STACK
    )
    assert all(defaults[name] is None for name in (optional | required) & set(defaults))


def test_recommend_needs_a_named_stack():
    stack = next(a for a in _options(_commands()["recommend"]) if a.dest == "stack")
    assert stack.required


def test_sweep_streams_by_default_and_no_stream_is_the_same_flag_negated():
    sweep = _commands()["sweep"]
    base = ["--url", "http://127.0.0.1:1"]
    assert sweep.parse_args(base).stream is True
    assert sweep.parse_args([*base, "--no-stream"]).stream is False
    assert [a.option_strings for a in _options(sweep) if a.dest == "stream"] == [["--stream", "--no-stream"]]


def test_simulate_help_says_what_initial_replicas_defaults_to():
    out = subprocess.run(
        [sys.executable, "-m", "capacity", "simulate", "--help"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    text = " ".join(out.split())
    assert "default: what the oracle needs for the first --oracle-interval, within minReplicas..maxReplicas" in text
    assert "(default: 300.0)" in text  # --oracle-interval, shown by the formatter
