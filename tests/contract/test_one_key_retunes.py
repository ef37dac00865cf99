"""`pulumi config set --path 'autoscaling.<scope>.<leaf>' VALUE` writes one leaf into the stack
file. Every such retune must deploy: the leaf merges onto the defaults field by field (and the
default scope onto a model's), so a lone `behavior.scaleDown.stabilizationWindowSeconds` keeps
the default `policies` (issue 14, item 7). Lists replace whole, as Pulumi writes them whole."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from contract.settings import ModelAutoscaling
from contract.settings.stack_file import StackFile, read_stack
from tests.harness import ROOT
from tests.stacks import unplanned_file

AUTOSCALING = "inference-platform:autoscaling"


def leaves(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every scalar key path of the autoscaling defaults (lists are written whole, not by leaf)."""
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from leaves(value, (*prefix, key))
        elif not isinstance(value, list):
            yield (*prefix, key)


DEFAULT_LEAVES = sorted(leaves(ModelAutoscaling().model_dump(by_alias=True, mode="json")))


def effective(policy: ModelAutoscaling, path: tuple[str, ...]) -> Any:
    node: Any = policy.model_dump(by_alias=True, mode="json")
    for key in path:
        node = node[key]
    return node


def with_leaf(stack: StackFile, scope: str, path: tuple[str, ...], value: Any) -> StackFile:
    """The stack file after `pulumi config set --path 'autoscaling.<scope>.<path>' value`."""
    config = copy.deepcopy(stack.config)
    node = config.setdefault(AUTOSCALING, {}).setdefault(scope, {})
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return StackFile(stack.path, config)


def cases() -> Iterator[Any]:
    for name in ("dev", "prod"):
        model = read_stack(name, ROOT).settings().models[0].name
        for scope in ("default", model):
            for path in DEFAULT_LEAVES:
                yield pytest.param(name, scope, path, id=f"{name}:{scope}.{'.'.join(path)}")


def test_the_defaults_have_leaves_in_every_part_of_the_section() -> None:
    tops = {path[0] for path in DEFAULT_LEAVES}
    assert {"minReplicas", "slo", "triggers", "behavior"} <= tops
    assert ("behavior", "scaleDown", "stabilizationWindowSeconds") in DEFAULT_LEAVES


@pytest.mark.parametrize(("stack_name", "scope", "path"), list(cases()))
def test_one_leaf_set_alone_deploys(stack_name: str, scope: str, path: tuple[str, ...]) -> None:
    stack = unplanned_file(stack_name)
    model = stack.settings().models[0].name
    value = effective(stack.settings().autoscaling_for(model), path)
    retuned = with_leaf(stack, scope, path, value).settings()
    assert effective(retuned.autoscaling_for(model), path) == value


def test_a_lone_scale_down_window_keeps_the_default_policies() -> None:
    stack = unplanned_file("prod")
    retuned = with_leaf(stack, "default", ("behavior", "scaleDown", "stabilizationWindowSeconds"), 900).settings()
    policy = retuned.autoscaling_for("qwen25-14b-awq")
    default_down = ModelAutoscaling().behavior.scale_down
    assert policy.behavior.scale_down.stabilization_window_seconds == 900
    assert policy.behavior.scale_down.policies == default_down.policies
    assert policy.behavior.scale_down.select_policy == default_down.select_policy


def test_a_model_scope_merges_onto_the_default_scope() -> None:
    stack = with_leaf(unplanned_file("prod"), "default", ("triggers", "e2eLatency", "thresholdSeconds"), 45)
    stack = with_leaf(stack, "qwen25-14b-awq", ("triggers", "queueDepth", "targetPerReplica"), 3)
    retuned = with_leaf(stack, "qwen25-14b-awq", ("triggers", "kvCache", "targetPerReplica"), 0.8).settings()
    policy = retuned.autoscaling_for("qwen25-14b-awq")
    assert policy.triggers.kv_cache.target_per_replica == 0.8
    assert policy.triggers.queue_depth.target_per_replica == 3  # the model's own value stays
    assert policy.triggers.e2e_latency.threshold_seconds == 45  # the default scope's value stays
