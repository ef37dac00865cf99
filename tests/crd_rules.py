"""Evaluate the CEL rules (`x-kubernetes-validations`) of the upstream CRDs on an object, as
the API server would after defaulting: a structurally valid object can still be rejected by
them (e.g. an AIServiceBackend pointing at a Service instead of a Backend)."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import celpy

from tests.k8s_schemas import _crds_of_group, is_core

_ENV = celpy.Environment()


@cache
def _program(rule: str) -> Any:
    return _ENV.program(_ENV.compile(rule))


def _defaulted(obj: Any, schema: dict[str, Any]) -> Any:
    """Apply the schema's `default`s, as the API server does before validation."""
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        out = dict(obj)
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
        return {k: _defaulted(v, props.get(k, {})) for k, v in out.items()}
    if isinstance(obj, list):
        return [_defaulted(v, schema.get("items") or {}) for v in obj]
    return obj


def _walk(obj: Any, schema: dict[str, Any], path: str, found: list[str], skipped: list[str]) -> None:
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            continue  # transition rules need a previous object
        try:
            result = _program(rule["rule"]).evaluate({"self": celpy.json_to_cel(obj)})
        except Exception as exc:  # Kubernetes-only CEL libraries (find, isURL, ...) are not in cel-python
            if "undeclared reference" in str(exc):
                skipped.append(f"{path}: {rule['rule']}")
                continue
            found.append(f"{path}: {rule['rule']} could not be evaluated ({exc})")
            continue
        if not bool(result):
            found.append(f"{path}: {rule.get('message') or rule['rule']}")
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        for key, value in obj.items():
            if key in props:
                _walk(value, props[key], f"{path}.{key}", found, skipped)
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            _walk(value, schema.get("items") or {}, f"{path}[{i}]", found, skipped)


def rule_violations(obj: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(violated rules, rules that need Kubernetes-only CEL functions) of one custom resource."""
    group, _, version = obj["apiVersion"].rpartition("/")
    schema = None if is_core(obj["apiVersion"]) else _crds_of_group(group).get((version, obj["kind"]))
    found: list[str] = []
    skipped: list[str] = []
    if schema is not None:
        _walk(_defaulted(obj, schema), schema, obj["kind"], found, skipped)
    return found, skipped
