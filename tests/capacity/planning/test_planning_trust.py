"""The planner names how far each candidate GPU's engine profile is checked (issue 22, item 4):
capacity/engine/trust.py's level for the profile the model would run with there, in the GPU table
and its JSON, and a warning when the winner moves onto a profile that is not validated."""

from __future__ import annotations

import dataclasses

from capacity.engine.trust import LEVELS, trust_of
from capacity.planning import plan
from capacity.planning.stack import load_stack_model
from tests.harness import ROOT


def prod_14b():
    return load_stack_model("prod", "qwen25-14b-awq", root=ROOT)


def test_every_candidate_gpu_type_carries_the_trust_of_its_profile():
    for kind in plan.gpu_types(prod_14b()):
        assert kind.trust is not None and kind.trust.level in LEVELS
        assert kind.trust.gpu == kind.gpu


def test_the_current_gpu_is_judged_by_the_stacks_own_profile():
    sm = prod_14b()
    current = next(t for t in plan.gpu_types(sm) if t.gpu == plan.current_gpu(sm))
    assert current.trust == trust_of(sm.profile)


def test_moving_onto_a_gpu_whose_profile_is_not_validated_is_a_warning(monkeypatch):
    sm = prod_14b()
    other = next(t.gpu for t in plan.gpu_types(sm) if t.gpu != plan.current_gpu(sm))
    real = plan.gpu_trust
    monkeypatch.setattr(plan, "gpu_trust", lambda s, gpu: dataclasses.replace(real(s, gpu), level="extrapolated"))
    params = {"gpu": other, "consolidateAfter": None}
    (move,) = [n for n in plan.deployment_notes(sm, params) if "the winner moves" in n]
    assert move.startswith("warning: ") and "extrapolated" in move
