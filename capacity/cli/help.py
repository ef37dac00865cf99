"""How every command's --help reads: the module docstring as written, each option's default shown."""

from __future__ import annotations

import argparse


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Docstrings keep their line breaks; `(default: X)` follows each option's help, except where
    there is nothing to show (a flag, a None whose meaning the help states, a required option)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        nothing = action.default is None or action.default is False or action.default == []  # not 0 == False
        if action.required or nothing or "default" in text:
            return text
        return super()._get_help_string(action)
