"""The endpoint picker is on the request path (issue 26, item 3): a prod stack routing by it must
run a standby and a PodDisruptionBudget over its pods; mutated from what the program registers."""

from __future__ import annotations

import pytest
from pulumi_policy import EnforcementLevel

from tests.components.test_endpoint_picker import picker_releases, with_cache_aware_routing
from tests.harness import StackRun, run_program
from tests.policies.policy_harness import load_config, swap, with_inputs
from tests.policies.test_policies import assert_reported, check, violates

POLICY = "endpoint-picker-highly-available"


@pytest.fixture(scope="module")
def routed_prod() -> StackRun:
    return run_program("prod", with_cache_aware_routing("prod"))


def picker_budgets(run: StackRun) -> list:
    return [r for r in run.of_type("kubernetes:policy/v1:PodDisruptionBudget") if r.name.endswith("-epp")]


def test_prod_with_a_standby_and_a_budget_passes(routed_prod: StackRun) -> None:
    assert picker_releases(routed_prod) and check(POLICY, routed_prod.resources) == []


@violates(POLICY)
def test_a_picker_without_its_disruption_budget_is_reported(routed_prod: StackRun) -> None:
    budget = picker_budgets(routed_prod)[0]
    found = check(POLICY, swap(routed_prod.resources, budget, None))
    label = budget.inputs["spec"]["selector"]["matchLabels"]["inferencepool"]
    assert len(found) == 1
    assert_reported(found, POLICY, "no PodDisruptionBudget", label)


@violates(POLICY)
def test_a_budget_selecting_other_pods_does_not_count(routed_prod: StackRun) -> None:
    budget = picker_budgets(routed_prod)[0]
    elsewhere = with_inputs(budget, lambda i: i["spec"]["selector"]["matchLabels"].update(inferencepool="other-epp"))
    assert_reported(check(POLICY, swap(routed_prod.resources, budget, elsewhere)), POLICY, "no PodDisruptionBudget")


@violates(POLICY)
def test_a_single_picker_replica_is_reported(routed_prod: StackRun) -> None:
    release = picker_releases(routed_prod)[0]
    single = with_inputs(release, lambda i: i["values"]["inferenceExtension"].update(replicas=1))
    found = check(POLICY, swap(routed_prod.resources, release, single))
    assert_reported(found, POLICY, "1 replica(s)", "values.inferenceExtension.replicas")


def test_a_stack_without_a_picker_has_nothing_to_report_and_dev_disables_the_rule(dev: StackRun) -> None:
    assert check(POLICY, dev.resources) == []
    found = check(POLICY, run_program("dev", with_cache_aware_routing("dev")).resources, load_config("dev"))
    assert found and {v.level for v in found} == {EnforcementLevel.DISABLED}
