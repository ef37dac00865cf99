"""Shared base for every settings section: camelCase keys, unknown keys rejected, frozen."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


def camel(name: str) -> str:
    """snake_case -> camelCase, keeping digits attached: e2e_p99_seconds -> e2eP99Seconds."""
    first, *rest = name.split("_")
    return first + "".join(word[:1].upper() + word[1:] for word in rest)


class Section(BaseModel):
    """Base of every config model: keys are camelCase in YAML, snake_case in Python.

    `extra="forbid"` turns a typo (`maxReplica`) into an error instead of a silently
    ignored key that leaves the default in force.
    """

    model_config = ConfigDict(
        alias_generator=camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        validate_default=True,
        # `.inf` and `.nan` are YAML floats; no threshold, size or price is infinite.
        allow_inf_nan=False,
    )


class RuleViolation(ValueError):
    """A cross-field rule broken inside one model; names the field relative to that model,
    so the error message can point at the exact key path (e.g. `...maxReplicas`)."""

    def __init__(self, field: str, value: Any, rule: str) -> None:
        super().__init__(rule)
        self.field = field
        self.value = value
        self.rule = rule
