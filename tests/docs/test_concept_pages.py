"""The commands the Concepts pages show, run as shown, print what the pages quote."""

from __future__ import annotations

from capacity.__main__ import main
from tests.docs.pages import capacity_command, quoted


def test_the_engine_model_page_quotes_what_model_predicts(capsys):
    page = "concepts/engine-model.md"
    assert main(capacity_command(page, "model")[3:]) == 0
    printed = {line.rstrip() for line in capsys.readouterr().out.splitlines()}
    quotes = quoted(page, "test_the_engine_model_page_quotes_what_model_predicts")
    assert [line for quote in quotes for line in quote.splitlines() if line.rstrip() not in printed] == []
