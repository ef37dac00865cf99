"""What `model` says of a replica (issue 37): the profiles `--profile` takes, measured ones
included; the trust level of a scenario's prediction; the memory a memory-bound GPU reads."""

import argparse

import pytest

from capacity.__main__ import build_parser, main
from capacity.engine import get_profile
from capacity.engine.explain import explain
from tests.capacity.conftest import REPO

MEASURED = "a10g-r1-14b-awq-measured"  # capacity/engine/data/measured/
TP_SCENARIO = REPO / "benchmarks" / "scenarios" / "examples" / "llama3-70b-4xl40s-tp4.yaml"


def _help(name: str) -> str:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return next(a.help for a in sub.choices[name]._actions if a.dest == "profile")


@pytest.mark.parametrize("name", ["model", "serve", "lab", "simulate", "sweep", "recommend"])
def test_the_profile_help_lists_the_measured_profiles_too(name):
    assert MEASURED in _help(name) and "a10g-qwen2.5-14b-awq" in _help(name)


def test_a_tensor_parallel_scenario_prints_its_trust_level(capsys):
    assert main(["model", "--scenario", str(TP_SCENARIO)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "trust: extrapolated" in out and "tensor parallel over 4 GPUs" in out


def test_a_memory_bound_a10g_reads_gddr_never_hbm():
    """The A10G carries 24 GB GDDR6 (capacity/engine/data/gpus.yaml, memory_class gddr)."""
    point = explain(get_profile("a10g-qwen2.5-14b-awq"), 1, 1024, 128)
    assert point.bound == "memory"
    assert "GDDR bandwidth" in point.why and "HBM" not in point.why


def test_a_memory_bound_a100_reads_hbm():
    point = explain(get_profile("a100-80gb-qwen2.5-7b-awq"), 1, 1024, 128)
    assert point.bound == "memory" and "HBM bandwidth" in point.why
