"""The benchmark scripts' stack edits deploy: a benchmark whose settings the program refuses
measures nothing (benchmarks/simulate_speed.py set maxReplicas 10 under prod's fallbackReplicas 11)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _benchmark(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_simulator_speed_benchmarks_stack_deploys_with_its_documented_fleet_bounds():
    sm = _benchmark("simulate_speed").stack_model()
    assert (sm.policy.min_replicas, sm.policy.max_replicas) == (1, 10)
