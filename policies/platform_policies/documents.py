"""IAM policy documents as the rules read them: a JSON string or a mapping (the engine passes
either, depending on how the program built it), with each statement's single-or-list fields as
lists. Matching follows IAM's own rules: action names are case-insensitive and `*` / `?` are
wildcards in both actions and ARNs (IAM User Guide, "IAM JSON policy elements: Action" and
"IAM JSON policy elements: Resource")."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy.proxy import UnknownValueError

from . import k8s


@dataclass(frozen=True)
class Statement:
    sid: str
    effect: str
    actions: tuple[str, ...]
    not_actions: tuple[str, ...]
    resources: tuple[str, ...]
    not_resources: tuple[str, ...]
    principals: tuple[str, ...]  # every principal value, `*` for "Principal": "*"
    conditions: Mapping[str, Any]


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if k8s.is_list(value):
        return tuple(str(v) for v in value)
    return ()


def _principals(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if k8s.is_map(value):
        return tuple(p for key in value for p in _strings(value[key]))
    return ()


def parse(document: Any) -> list[Statement] | None:
    """The statements of a policy document, or None when it is unknown (built from an ARN the
    engine does not know yet), in part or whole, or not a policy document at all."""
    try:
        return _parse(document)
    except UnknownValueError:
        return None


def _parse(document: Any) -> list[Statement] | None:
    if document is None:
        return None
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError:
            return None
    if not k8s.is_map(document):
        return None
    raw = k8s.get(document, "Statement", default=[])
    raw = [raw] if k8s.is_map(raw) else list(raw) if k8s.is_list(raw) else []
    return [
        Statement(
            sid=str(k8s.get(s, "Sid", default="")),
            effect=str(k8s.get(s, "Effect", default="")),
            actions=_strings(k8s.get(s, "Action")),
            not_actions=_strings(k8s.get(s, "NotAction")),
            resources=_strings(k8s.get(s, "Resource")),
            not_resources=_strings(k8s.get(s, "NotResource")),
            principals=_principals(k8s.get(s, "Principal")),
            conditions=k8s.get(s, "Condition", default={}) or {},
        )
        for s in raw
        if k8s.is_map(s)
    ]


def action_matches(pattern: str, action: str) -> bool:
    """Whether an Action entry (`s3:*`, `s3:Put*`, `*`) covers an action; IAM compares action
    names case-insensitively."""
    return fnmatch.fnmatchcase(action.lower(), pattern.lower())


def allows(statement: Statement, action: str) -> bool:
    """Whether an Allow statement grants `action` (through Action, or NotAction leaving it out)."""
    if statement.effect != "Allow":
        return False
    if statement.not_actions:
        return not any(action_matches(p, action) for p in statement.not_actions)
    return any(action_matches(p, action) for p in statement.actions)


def granted(statements: Iterable[Statement], actions: Iterable[str]) -> list[str]:
    """Which of `actions` some Allow statement grants, in the order asked."""
    statements = list(statements)
    return [a for a in actions if any(allows(s, a) for s in statements)]


def label(statement: Statement) -> str:
    return f"statement {statement.sid!r}" if statement.sid else "a statement"
