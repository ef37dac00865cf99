"""Which routes a policy provably covers, computed from the objects the program emits.

A Gateway API policy protects exactly what its `targetRefs` resolve to: a Gateway (and so
every route attached to it) or a route by name. A reference to an object that does not
exist protects nothing, which is why coverage is derived here and never assumed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "AIGatewayRoute")
Key = tuple[str, str, str]  # (kind, namespace, name)
Obj = dict[str, Any]


def _key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return obj["kind"], meta.get("namespace", ""), meta.get("name", "")


def _targets(policy: Obj) -> list[Key]:
    namespace = policy["metadata"].get("namespace", "")
    spec = policy.get("spec") or {}
    refs = list(spec.get("targetRefs") or []) + ([spec["targetRef"]] if spec.get("targetRef") else [])
    # Label selectors and single listeners (`sectionName`) are not whole-object coverage.
    return [(ref["kind"], namespace, ref["name"]) for ref in refs if not ref.get("sectionName")]


def dangling_targets(objects: list[Obj], policy_kind: str) -> list[str]:
    """Every targetRef of a `policy_kind` policy that names no emitted object."""
    emitted = {_key(o) for o in objects}
    return [
        f"{policy_kind} {p['metadata']['namespace']}/{p['metadata']['name']} targets missing {kind} {ns}/{name}"
        for p in objects
        if p["kind"] == policy_kind
        for kind, ns, name in _targets(p)
        if (kind, ns, name) not in emitted
    ]


def uncovered(objects: list[Obj], policy_kind: str, applies: Callable[[Obj], bool]) -> list[str]:
    """Every Gateway and route that no `policy_kind` policy satisfying `applies` reaches."""
    emitted = {_key(o) for o in objects}
    covered = {
        target
        for p in objects
        if p["kind"] == policy_kind and applies(p)
        for target in _targets(p)
        if target in emitted
    }
    missing: list[str] = []
    for obj in objects:
        kind, namespace, name = _key(obj)
        if kind == "Gateway" and (kind, namespace, name) not in covered:
            missing.append(f"Gateway {namespace}/{name}")
        if kind not in ROUTE_KINDS:
            continue
        reaches = {(kind, namespace, name)}
        if kind == "AIGatewayRoute":
            reaches.add(("HTTPRoute", namespace, name))  # the AI gateway generates it, same name
        for parent in (obj.get("spec") or {}).get("parentRefs") or []:
            if parent.get("kind", "Gateway") == "Gateway" and not parent.get("sectionName"):
                reaches.add(("Gateway", parent.get("namespace", namespace), parent["name"]))
        if not reaches & covered:
            missing.append(f"{kind} {namespace}/{name}")
    return missing


def has_api_key_auth(policy: Obj) -> bool:
    return bool((policy.get("spec") or {}).get("apiKeyAuth"))


def has_rate_limit(policy: Obj) -> bool:
    return bool((policy.get("spec") or {}).get("rateLimit"))
