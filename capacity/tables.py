"""Formatting shared by every table the capacity tooling prints (markdown reports, rich tables)."""

from __future__ import annotations

import math
from typing import Any


def cell(value: Any, fmt: str) -> str:
    """`value` in `fmt` (a format spec such as '.2f'); '-' for a missing or NaN value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)
