"""contract/startup.py: the startup ranges follow from the start features a stack deploys, each
figure with its source, and a stack's own measured figures override them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from contract.settings.stack_file import read_stack
from contract.startup import StartFeatures, derived_startup, stack_startup
from tests.harness import ROOT

PLAIN = StartFeatures("karpenter", "al2023", False, "default", False, 9.0)


def test_a_plain_karpenter_node_pulls_the_image_in_the_blueprints_default_containerd_time() -> None:
    # karpenter-blueprints soci-snapshotter: 1m52.33s (10.78 GB) and 2m10.813s (9.35 GB).
    assert (derived_startup(PLAIN).image_pull_s.low, derived_startup(PLAIN).image_pull_s.high) == (112.3, 130.8)


@pytest.mark.parametrize(
    ("provisioner", "ami", "pull", "trust"),
    [
        ("karpenter", "al2023", (39.6, 59.8), "measured"),
        ("karpenter", "bottlerocket", (23.2, 45.0), "measured"),
        ("auto-mode", "bottlerocket", (23.2, 45.0), "extrapolated"),
    ],
)
def test_soci_parallel_pull_takes_the_blueprints_figure_for_the_nodes_os(provisioner, ami, pull, trust) -> None:
    figure = derived_startup(
        replace(PLAIN, provisioner=provisioner, ami_family=ami, soci_parallel_pull=True)
    ).image_pull_s
    assert ((figure.low, figure.high), figure.trust) == (pull, trust)


def test_the_run_ai_streamer_loads_weights_at_the_whitepapers_ratio() -> None:
    plain, streamed = derived_startup(PLAIN), derived_startup(replace(PLAIN, weight_loader="runai-streamer"))
    assert streamed.weight_load_gib_per_s.low / plain.weight_load_gib_per_s.low == pytest.approx(47.99 / 14.34)


def test_a_compile_cache_shortens_engine_start_but_not_below_profiling() -> None:
    cached = derived_startup(replace(PLAIN, compile_cache=True)).engine_init_s
    assert (cached.low, cached.high) == (10.0, 30.0)


def test_every_derived_figure_names_its_source_and_trust() -> None:
    for features in (PLAIN, StartFeatures("auto-mode", "bottlerocket", True, "runai-streamer", True, 9.0)):
        for key, figure in derived_startup(features).figures().items():
            assert figure.source and figure.trust in ("measured", "extrapolated", "assumed"), key


def test_a_stacks_own_figures_override_the_derived_ones() -> None:
    settings = read_stack("prod", ROOT).settings()  # sets all four capacityPlanning.startup keys
    figures = stack_startup(settings, settings.models[0])
    assert {f.trust for f in figures.figures().values()} == {"stack"}
    assert (figures.image_pull_s.low, figures.image_pull_s.high) == (60, 180)
