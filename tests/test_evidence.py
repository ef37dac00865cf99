"""The committed thresholds stand on their evidence (issue 17).

For each stack and model: the committed policy, simulated with the current engine model and
control loop on the held-out part of the traffic its evidence command names, keeps the planner's
rules (`capacity.planning.guardrails`: the kvCache and e2eLatency guardrails on above healthy
traffic, maxReplicas the pools' budget for the model), meets the stack's
`capacityPlanning.attainmentTarget`, and takes within 10% of the held-out GPU-hours its evidence
records (one simulation per model). A failure says which thresholds differ and the command to
re-plan with. Moving a threshold off its evidence fails the same check (the last three tests).
Whether the planner would still pick the committed policy (a 16-trial re-plan per model, ~30 s
each) is `python benchmarks/evidence_replan.py`, run before committing a re-plan or an engine change.
"""

from pathlib import Path

import pytest

from capacity.planning.audit import audit
from capacity.planning.evidence import evidence, evidence_traffic, for_key
from capacity.planning.stack import apply_config_set, load_stack_model

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACE = ROOT.parent / "shared" / "traces" / "azure-llm-2023-conv.csv"
MODELS = [("dev", "qwen25-1p5b"), ("prod", "qwen25-14b-awq"), ("prod", "qwen25-7b-awq")]

pytestmark = pytest.mark.skipif(not SHARED_TRACE.is_file(), reason=f"the shared trace {SHARED_TRACE} is absent")


def on_one_worker(stack: str, model: str) -> pytest.MarkDecorator:
    """The tests of one model run on one worker, which loads its stack model and days once
    (pytest.ini: --dist loadgroup); the models spread over the workers (a day's replay is the
    slowest thing the suite does)."""
    return pytest.mark.xdist_group(f"evidence-{stack}-{model}")


class Committed:
    """One model as committed and the traffic its evidence names."""

    def __init__(self, stack: str, model: str) -> None:
        self.sm = load_stack_model(stack, model, root=ROOT)
        blocks = evidence(self.sm.source.path)
        self.proof = for_key(blocks, f"autoscaling.{model}")
        self.traffic = evidence_traffic(self.sm, blocks)

    def audit(self, sm=None):
        """`sm` (default: the committed policy) against this model's evidence; a moved policy's
        message names what differs from the committed one."""
        return audit(
            sm or self.sm,
            *self.traffic.parts(),
            self.traffic.seed,
            self.proof,
            reference=self.sm if sm else None,
        )


_COMMITTED: dict[tuple[str, str], Committed] = {}


def committed(stack: str, model: str) -> Committed:
    if (stack, model) not in _COMMITTED:
        _COMMITTED[stack, model] = Committed(stack, model)
    return _COMMITTED[stack, model]


@pytest.mark.parametrize(("stack", "model"), [pytest.param(*m, marks=on_one_worker(*m)) for m in MODELS])
def test_every_committed_policy_names_its_plan_command(stack, model):
    proof = committed(stack, model).proof
    assert proof is not None and proof.command.startswith("python -m capacity plan")
    assert proof.date and proof.profile


@pytest.mark.parametrize(("stack", "model"), [pytest.param(*m, marks=on_one_worker(*m)) for m in MODELS])
def test_the_committed_policy_meets_the_target_and_reproduces_its_evidence(stack, model):
    result = committed(stack, model).audit()
    assert not result.problems, result.message()


# The moved policies are the smaller models' (the 14B's day replays twice as long as the 7B's).
@on_one_worker("prod", "qwen25-7b-awq")
def test_a_fleet_capped_below_its_evidence_misses_the_target_and_says_what_to_rerun():
    base = committed("prod", "qwen25-7b-awq")
    capped = apply_config_set(
        base.sm,
        [
            ("autoscaling.qwen25-7b-awq.minReplicas", 1),
            ("autoscaling.qwen25-7b-awq.fallbackReplicas", 1),
            ("autoscaling.qwen25-7b-awq.maxReplicas", 1),
        ],
    )
    result = base.audit(capped)
    assert any("attains" in p for p in result.problems)
    assert "autoscaling.qwen25-7b-awq.maxReplicas 1 ->" in result.message()
    assert f"re-plan with: {base.proof.command}" in result.message()


@on_one_worker("dev", "qwen25-1p5b")
def test_a_fleet_held_far_above_its_evidence_costs_too_much_and_says_what_to_rerun():
    base = committed("dev", "qwen25-1p5b")
    most = base.sm.policy.max_replicas  # the committed ceiling, warm all along
    padded = apply_config_set(
        base.sm,
        [
            ("autoscaling.qwen25-1p5b.maxReplicas", most),
            ("autoscaling.qwen25-1p5b.minReplicas", most),
            ("autoscaling.qwen25-1p5b.fallbackReplicas", most),
        ],
    )
    result = base.audit(padded)
    assert any("where its evidence records" in p and "more than 10% apart" in p for p in result.problems)
    assert f"autoscaling.qwen25-1p5b.minReplicas {most} ->" in result.message()


@on_one_worker("dev", "qwen25-1p5b")
def test_a_guardrail_turned_off_breaks_the_planners_rules_and_says_what_to_rerun():
    base = committed("dev", "qwen25-1p5b")
    unguarded = apply_config_set(base.sm, [("autoscaling.qwen25-1p5b.triggers.kvCache.enabled", False)])
    result = base.audit(unguarded)
    assert "the committed policy breaks the planner's rules: the kvCache guardrail is off" in result.problems
    assert f"re-plan with: {base.proof.command}" in result.message()
