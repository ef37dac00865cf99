"""Formatting shared by every table the capacity tooling prints (markdown reports, rich tables).

Printed tables fit `TABLE_WIDTH` columns (what a terminal, a CI log or a review shows) without
cutting a number: number columns are as wide as their widest cell, only text columns fold.
"""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

TABLE_WIDTH = 100  # piped output (CI logs, `| tee`); a terminal prints at its own width
WIDE_WIDTH = 170  # `--wide`: every column


def cell(value: Any, fmt: str) -> str:
    """`value` in `fmt` (a format spec such as '.2f'); '-' for a missing or NaN value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)


def rounded(value: Any, digits: int = 4) -> Any:
    """`value` with every float at `digits` significant digits (nested dicts and lists too), for a
    printed summary: 0.1235, not 0.12345678901234568."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v, digits) for v in value]
    return value


def console(wide: bool = False) -> Console:
    """Where tables print: the terminal at its width, piped output at `TABLE_WIDTH` (`WIDE_WIDTH`
    with every column)."""
    terminal = Console()
    if terminal.is_terminal:
        return terminal
    return Console(width=WIDE_WIDTH if wide else TABLE_WIDTH)


def keep_numbers_whole(table: Table, text_columns: tuple[int, ...] = (0,)) -> Table:
    """Columns not in `text_columns` are exactly as wide as their widest cell (or their header's
    longest word), so rich narrows a table by folding its text, never by cutting a number to `9…`."""
    for index, column in enumerate(table.columns):
        if index in text_columns:
            column.overflow = "fold"
            continue
        cells = [len(str(c)) for c in column.cells]
        words = [len(w) for w in str(column.header).split()]
        column.min_width = column.max_width = max([*cells, *words, 1])  # headers wrap, text gets the room
    return table
