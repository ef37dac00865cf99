"""Run the policy pack's policies on resources captured from the mocked program, exactly as
the CrossGuard analyzer would hand them over: the real `pulumi_policy` argument classes,
props wrapped in its unknown-checking proxy, stack resources linked to their parents and
to the resources their inputs came from."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from unittest import mock

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policies.platform_policies import BY_NAME, POLICIES
from tests import harness
from tests.harness import ROOT, Captured, StackRun

CONFIG_DIR = ROOT / "policies" / "config"
# What the engine sends for a string it cannot know during preview.
UNKNOWN = UNKNOWN_STRING_VALUE


@dataclass(frozen=True)
class Violation:
    policy: str
    level: EnforcementLevel
    message: str
    urn: str


def _options(captured: Captured) -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=False,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
        parent=captured.parent or None,
    )


def resource_args(captured: Captured, config: Mapping[str, Any] | None = None) -> ResourceValidationArgs:
    props = unknown_checking_proxy(copy.deepcopy(captured.inputs))
    return ResourceValidationArgs(captured.type, props, captured.urn, captured.name, _options(captured), None, config)


# URN -> input name -> URNs of the resources that input was computed from.
Dependencies = dict[str, dict[str, list[str]]]


def record_dependencies(stack: str) -> tuple[StackRun, Dependencies]:
    """Run the program like `harness.run_program`, also recording the property dependencies the
    SDK sends with every registration (what CrossGuard's stack policies receive)."""
    recorded: Dependencies = {}

    class Recording(harness.CapturingMonitor):
        def RegisterResource(self, request: Any) -> Any:
            response = super().RegisterResource(request)
            recorded[response.urn] = {k: list(v.urns) for k, v in request.propertyDependencies.items()}
            return response

    with mock.patch.object(harness, "CapturingMonitor", Recording):
        run = harness.run_program(stack)
    return run, recorded


def stack_args(
    resources: Iterable[Captured],
    config: Mapping[str, Any] | None = None,
    unknown: Mapping[str, set[str]] | None = None,
    dependencies: Dependencies | None = None,
) -> StackValidationArgs:
    """Every resource of a stack with its parent and, given `dependencies` (recorded by
    `record_dependencies`), the resources each input came from, as the engine links them.

    `unknown` maps a URN to top-level inputs that a first preview cannot know yet (ids, ARNs of
    resources created in the same update): they become the engine's unknown sentinel, while
    their property dependencies stay, as in a real preview."""
    captured = list(resources)
    unknown = unknown or {}

    def props(c: Captured) -> Any:
        inputs = copy.deepcopy(c.inputs)
        for key in unknown.get(c.urn, ()):
            inputs[key] = UNKNOWN
        return unknown_checking_proxy(inputs)

    policy_resources = {
        c.urn: PolicyResource(c.type, props(c), c.urn, c.name, _options(c), None, None, [], {}) for c in captured
    }
    for c in captured:
        resource = policy_resources[c.urn]
        resource.parent = policy_resources.get(c.parent)
        for key, urns in (dependencies or {}).get(c.urn, {}).items():
            sources = [policy_resources[u] for u in urns if u in policy_resources]
            resource.property_dependencies[key] = sources
            resource.dependencies.extend(s for s in sources if s not in resource.dependencies)
    return StackValidationArgs(list(policy_resources.values()), config)


def load_config(stack: str) -> dict[str, Any]:
    return json.loads((CONFIG_DIR / f"{stack}.json").read_text())


def _level_and_props(policy: Policy, config: Mapping[str, Any]) -> tuple[EnforcementLevel, dict[str, Any]]:
    """Apply a `--policy-pack-config` document the way the CLI does: a string is a level, an
    object may carry `enforcementLevel` plus the policy's properties (schema defaults first)."""
    level = policy.enforcement_level or EnforcementLevel.ADVISORY
    defaults = {
        k: v["default"]
        for k, v in (policy.config_schema.properties if policy.config_schema else {}).items()
        if "default" in v
    }
    entry = config.get(policy.name, config.get("all"))
    if isinstance(entry, str):
        return EnforcementLevel(entry), defaults
    if isinstance(entry, Mapping):
        props = {k: v for k, v in entry.items() if k != "enforcementLevel"}
        return EnforcementLevel(entry.get("enforcementLevel", level.value)), {**defaults, **props}
    return level, defaults


def run_policy(
    policy: Policy,
    resources: Iterable[Captured],
    config: Mapping[str, Any] | None = None,
    unknown: Mapping[str, set[str]] | None = None,
    dependencies: Dependencies | None = None,
) -> list[Violation]:
    """Every violation one policy reports on these resources, at the level `config` gives it
    (`unknown`: inputs a first preview cannot know, see `stack_args`)."""
    level, props = _level_and_props(policy, config or {})
    found: list[Violation] = []
    resources = list(resources)

    def reporter(urn_default: str) -> Callable[[str, str | None], None]:
        def report(message: str, urn: str | None = None) -> None:
            found.append(Violation(policy.name, level, message, urn or urn_default))

        return report

    if isinstance(policy, ResourceValidationPolicy):
        for captured in resources:
            policy.validate(resource_args(captured, props), reporter(captured.urn))
    elif isinstance(policy, StackValidationPolicy):
        policy.validate(stack_args(resources, props, unknown, dependencies), reporter(""))
    return found


def run_pack(resources: Iterable[Captured], config: Mapping[str, Any] | None = None) -> list[Violation]:
    resources = list(resources)
    return [v for policy in POLICIES for v in run_policy(policy, resources, config)]


def policy(name: str) -> Policy:
    return BY_NAME[name]


def with_inputs(captured: Captured, mutate: Callable[[dict[str, Any]], None]) -> Captured:
    """A copy of a captured resource whose inputs `mutate` changed in place."""
    inputs = copy.deepcopy(captured.inputs)
    mutate(inputs)
    return replace(captured, inputs=inputs)


def swap(resources: list[Captured], old: Captured, new: Captured | None) -> list[Captured]:
    """The stack with `old` replaced by `new` (or removed when `new` is None)."""
    return [new if r is old else r for r in resources if not (r is old and new is None)]


def k8s_object(
    api_version: str, kind: str, metadata: dict[str, Any], spec: dict[str, Any], name: str | None = None
) -> Captured:
    """A Kubernetes object as the program would register it (for shapes it does not emit yet)."""
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    logical = name or metadata["name"]
    type_token = f"kubernetes:{group_version}:{kind}"
    inputs = {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}
    return Captured(
        type_token, logical, inputs, f"urn:pulumi:test::inference-platform::{type_token}::{logical}", "", True
    )


__all__ = [
    "POLICIES",
    "UNKNOWN",
    "Dependencies",
    "Violation",
    "k8s_object",
    "load_config",
    "policy",
    "record_dependencies",
    "resource_args",
    "run_pack",
    "run_policy",
    "stack_args",
    "swap",
    "with_inputs",
]
