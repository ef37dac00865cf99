"""Every Kubernetes object the program emits validates against real upstream schemas."""

from __future__ import annotations

import copy
import os

import pytest

from tests.harness import StackRun
from tests.k8s_schemas import crd_dir, validate


def test_crd_schema_folder_is_present() -> None:
    # In CI a missing schema folder must fail, never silently skip validation.
    assert crd_dir().is_dir()
    if os.environ.get("CI"):
        assert os.environ.get("CRD_SCHEMA_DIR"), "CI must point CRD_SCHEMA_DIR at ../shared/crds"


def test_every_kubernetes_object_matches_its_schema(stack: StackRun) -> None:
    objects = stack.kubernetes_objects()
    assert objects, "the program emitted no Kubernetes objects"
    problems = [problem for obj in objects for problem in validate(obj.inputs)]
    assert problems == []


def first(stack: StackRun, kind: str) -> dict:
    return copy.deepcopy(next(r.inputs for r in stack.kubernetes_objects() if r.inputs["kind"] == kind))


def test_a_misspelled_custom_resource_field_is_caught(dev: StackRun) -> None:
    pool = first(dev, "NodePool")
    pool["spec"]["disruption"]["consolidateAftr"] = "5m"
    assert any("consolidateAftr" in p for p in validate(pool))


def test_a_misplaced_core_field_is_caught(dev: StackRun) -> None:
    claim = first(dev, "PersistentVolumeClaim")
    claim["spec"]["readOnly"] = True
    assert validate(claim) != []


def test_a_node_class_without_a_role_is_caught(dev: StackRun) -> None:
    node_class = first(dev, "NodeClass")
    del node_class["spec"]["role"]
    assert any("role" in p for p in validate(node_class))
