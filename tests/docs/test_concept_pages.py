"""The commands the Concepts pages show, run as shown, print what the pages quote."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from capacity.__main__ import main
from contract.settings import SettingsError
from contract.settings.stack_file import StackFile, read_stack
from tests.docs.pages import REPO, capacity_command, quoted


def test_the_engine_model_page_quotes_what_model_predicts(capsys):
    page = "concepts/engine-model.md"
    assert main(capacity_command(page, "model")[3:]) == 0
    printed = {line.rstrip() for line in capsys.readouterr().out.splitlines()}
    quotes = quoted(page, "test_the_engine_model_page_quotes_what_model_predicts")
    assert [line for quote in quotes for line in quote.splitlines() if line.rstrip() not in printed] == []


def _refusal(stack: StackFile, edit: Callable[[dict[str, Any]], None]) -> str:
    config = copy.deepcopy(stack.config)
    edit(config)
    with pytest.raises(SettingsError) as refused:
        StackFile(stack.path, config).settings()
    return str(refused.value)


def test_the_platform_pages_settings_errors_are_what_the_settings_say():
    """Each example line is what dev's settings say of one bad value (the first: a maxReplicas below
    minReplicas; the second: a branch for a revision; the third: a misspelled key)."""
    dev = read_stack("dev", REPO)

    def bounds(c: dict[str, Any]) -> None:
        c["inference-platform:autoscaling"]["default"] = {"minReplicas": 5, "maxReplicas": 3}

    def branch(c: dict[str, Any]) -> None:
        c["inference-platform:models"][0]["revision"] = "main"

    def typo(c: dict[str, Any]) -> None:
        c["inference-platform:network"]["natGatway"] = "single"

    (quote,) = quoted("concepts/platform.md", "test_the_platform_pages_settings_errors_are_what_the_settings_say")
    said = [_refusal(dev, edit).splitlines()[-1].strip() for edit in (bounds, branch, typo)]
    assert quote.splitlines() == said
