"""Which resource an input points at (a RolePolicy's `role`, an association's `roleArn`), as a
stack policy can tell: the engine records that the input was computed from that resource
(property dependencies, known even in a first preview, when the ARN itself is not), or the
value equals one of that resource's identifiers, or the resource is its parent."""

from __future__ import annotations

from typing import Any

from . import k8s

IDENTIFIERS = ("id", "name", "arn")


def _known_strings(props: Any, keys: tuple[str, ...]) -> set[str]:
    values = (k8s.get(props, key, unknown=None) for key in keys)
    return {v for v in values if isinstance(v, str) and v}


def refers_to(resource: Any, key: str, target: Any, *, parent_counts: bool = True) -> bool:
    deps = getattr(resource, "property_dependencies", {}) or {}
    if any(getattr(dep, "urn", None) == target.urn for dep in deps.get(key, [])):
        return True
    value = k8s.get(resource.props, key, unknown=None)
    # pulumi_kubernetes and the harness record a resource passed as an input as its URN.
    if isinstance(value, str) and value and value in _known_strings(target.props, IDENTIFIERS) | {target.urn}:
        return True
    parent = getattr(resource, "parent", None)
    return parent_counts and parent is not None and getattr(parent, "urn", None) == target.urn


def targets_of(resource: Any, key: str, candidates: list[Any], *, parent_counts: bool = True) -> list[Any]:
    return [c for c in candidates if c is not resource and refers_to(resource, key, c, parent_counts=parent_counts)]
