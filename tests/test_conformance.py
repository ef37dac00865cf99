"""Every Kubernetes object the program emits validates against real upstream schemas."""

from __future__ import annotations

import copy
import os
import re

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


# The CRDs the schemas come from and the charts that install them are one release: a chart bump
# without new CRDs in the shared folder (or the reverse) fails here, by the README's table.

# README folder -> the charts of the program that install those CRDs (basename of the chart).
CHARTS_OF_CRD_FOLDER = {
    "keda/": ("keda",),
    "kserve/": ("kserve-crd", "kserve-resources"),
    "envoy-gateway/": ("gateway-helm",),
    "envoy-ai-gateway/": ("ai-gateway-crds-helm", "ai-gateway-helm"),
}
BUNDLED = {"gateway-api/"}  # installed by Envoy Gateway's chart at its own pin


def crd_releases() -> dict[str, str]:
    """folder -> release, from the table in the shared folder's README."""
    rows = [
        line.split("|")[1:-1]
        for line in (crd_dir() / "README.md").read_text().splitlines()
        if line.startswith("| ") and "/" in line.split("|")[1]
    ]
    return {cells[0].strip().strip("`"): cells[2].strip() for cells in rows}


def bare(version: str) -> str:
    return version.removeprefix("v")


def minor(version: str) -> list[str]:
    return bare(version).split(".")[:2]


def test_every_crd_folder_has_a_pinned_chart() -> None:
    covered = set(CHARTS_OF_CRD_FOLDER) | BUNDLED | {"karpenter/", "prometheus-operator/"}
    assert set(crd_releases()) == covered


def test_pinned_charts_are_the_releases_of_the_shared_crds(stack: StackRun) -> None:
    releases = {
        r.inputs["chart"].rsplit("/", 1)[-1]: r.inputs["version"]
        for r in stack.of_type("kubernetes:helm.sh/v3:Release")
    }
    expected = crd_releases()
    for folder, charts in CHARTS_OF_CRD_FOLDER.items():
        for chart in charts:
            assert bare(releases[chart]) == bare(expected[folder]), (
                f"{chart} {releases[chart]} vs {folder} {expected[folder]}"
            )


def test_karpenter_chart_is_the_release_of_the_shared_crds() -> None:
    from components.gpu_capacity import KARPENTER_VERSION

    assert bare(KARPENTER_VERSION) == bare(crd_releases()["karpenter/"])


def test_kube_prometheus_stack_ships_the_operator_minor_of_the_shared_crds() -> None:
    from components.observability.objects import STACK_OPERATOR_VERSION

    assert minor(STACK_OPERATOR_VERSION) == minor(crd_releases()["prometheus-operator/"])


def test_the_inference_extension_chart_is_the_release_of_its_shared_crds_note() -> None:
    # The shared README lists gateway-api-inference-extension/ in a note, not the table, until the
    # table lists the chart (only the shared folder's owner edits it); the note names the release
    # and the chart, which the endpoint picker's release and CRD manifest must match.
    from components.serving.objects import INFERENCE_EXTENSION_CRDS, INFERENCE_EXTENSION_VERSION, INFERENCEPOOL_CHART

    note = (crd_dir() / "README.md").read_text()
    (release,) = re.findall(r"`gateway-api-inference-extension/` holds .*?at (v[\d.]+)", note, re.S)
    assert bare(INFERENCE_EXTENSION_VERSION) == bare(release)
    assert INFERENCEPOOL_CHART.removeprefix("oci://") in note
    assert f"/download/{INFERENCE_EXTENSION_VERSION}/" in INFERENCE_EXTENSION_CRDS
