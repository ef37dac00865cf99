"""The policy the capacity tooling simulates is the one the program deploys, by construction:
each model's ScaledObject as the Pulumi program registers it (under mocks), written out as YAML
and read back by the simulator's manifest reader (`capacity.sim.scaledobject`), is the manifest
the planner simulates for that model, and replays to the same run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from capacity.planning.run import RunOptions, run_policy, run_scaled_object
from capacity.planning.stack import load_stack_model
from capacity.sim.scaledobject import read_scaled_object
from capacity.workload.traces import load
from contract.names import MODEL_LABEL
from contract.settings.stack_file import load_stack
from tests.harness import StackRun

ROOT = Path(__file__).resolve().parents[1]
STEP = "synthetic:step:base=0.5,peak=6,at=120,length=300,duration=900,prompt=512,output=128"
MODELS = [(stack, m.name) for stack in ("dev", "prod") for m in load_stack(stack, ROOT).models]


def as_sent(value: Any) -> Any:
    """A captured input as the Kubernetes provider sends it: the mocks' protobuf Struct carries
    every number as a double, and Go's encoding/json writes a whole float64 without a fraction
    (30.0 -> 30), so the API server sees integers where the program wrote them."""
    if isinstance(value, dict):
        return {k: as_sent(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_sent(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


def deployed_manifest(run: StackRun, model: str, directory: Path) -> Path:
    (so,) = [
        r.inputs
        for r in run.of_kind("keda.sh/v1alpha1", "ScaledObject")
        if r.inputs["metadata"]["labels"][MODEL_LABEL] == model
    ]
    path = directory / f"{model}.yaml"
    path.write_text(yaml.safe_dump(as_sent({k: so[k] for k in ("apiVersion", "kind", "metadata", "spec")})))
    return path


@pytest.mark.parametrize(("stack", "model"), MODELS)
def test_the_deployed_scaled_object_is_the_simulated_one(stack, model, tmp_path, request):
    deployed = read_scaled_object(deployed_manifest(request.getfixturevalue(stack), model, tmp_path))
    assert deployed == load_stack_model(stack, model, root=ROOT).manifest


@pytest.mark.parametrize(("stack", "model"), MODELS)
def test_the_deployed_scaled_object_replays_as_the_stacks_policy(stack, model, tmp_path, request):
    sm = load_stack_model(stack, model, root=ROOT)
    trace = load(STEP)
    deployed = read_scaled_object(deployed_manifest(request.getfixturevalue(stack), model, tmp_path))
    a, b = run_scaled_object(sm, deployed, trace, RunOptions()), run_policy(sm, trace, RunOptions())
    assert np.array_equal(a.e2e, b.e2e, equal_nan=True) and a.cost_usd == b.cost_usd
    assert a.timeline.desired == b.timeline.desired
