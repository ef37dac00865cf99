"""Turn pydantic validation errors into messages that name the full config key path."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from .base import RuleViolation

NAMESPACE = "inference-platform"


class SettingsError(ValueError):
    """Every problem found in the stack config, one line each; nothing was built."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid stack configuration:\n  " + "\n  ".join(problems))
        self.problems = problems


def key_path(loc: tuple[Any, ...] | list[Any]) -> str:
    """('models', 0, 'revision') -> 'models[0].revision' (the `pulumi config --path` form)."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def describe(error: ErrorDetails, prefix: tuple[Any, ...] = ()) -> str:
    loc = [*prefix, *error["loc"]]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, RuleViolation):
        loc.append(cause.field)
        value, rule = cause.value, cause.rule
    else:
        value, rule = error.get("input"), error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            rule = "is not a known setting (check the spelling)"
        elif error["type"] == "missing":
            return f"{NAMESPACE}:{key_path(loc)} is required"
    return f"{NAMESPACE}:{key_path(loc)} ({_show(value)}) {rule}"


def problems_of(exc: ValidationError, prefix: tuple[Any, ...] = ()) -> list[str]:
    return [describe(e, prefix) for e in exc.errors()]
