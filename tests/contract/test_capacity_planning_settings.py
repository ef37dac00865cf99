"""The capacityPlanning stack section: camelCase keys, positive values, clear errors."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from contract.settings.capacity_planning import CapacityPlanningSettings
from contract.settings.stack_file import load_stack

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_files_hold_a_valid_capacity_planning_section(stack):
    settings = load_stack(stack, ROOT)
    prices = settings.capacity_planning.gpu_hourly_price_usd
    assert 0 < prices.spot < prices.on_demand


def test_keys_are_camel_case_with_the_gib_spelling():
    parsed = CapacityPlanningSettings.model_validate({"startup": {"weightLoadGiBPerSecond": 2}})
    assert parsed.startup.weight_load_gib_per_second == 2


def test_unknown_key_is_rejected():
    with pytest.raises(ValidationError, match="spotInterruptionRate"):
        CapacityPlanningSettings.model_validate({"spotInterruptionRate": 1})


def test_negative_price_is_rejected():
    with pytest.raises(ValidationError, match="greater than 0"):
        CapacityPlanningSettings.model_validate({"gpuHourlyPriceUsd": {"spot": -1}})


def test_range_max_below_min_names_the_rule():
    with pytest.raises(ValidationError, match=r"must be >= min \(120.0\)"):
        CapacityPlanningSettings.model_validate({"startup": {"imagePullSeconds": {"min": 120, "max": 60}}})


def test_spot_dearer_than_on_demand_is_rejected():
    with pytest.raises(ValidationError, match=r"must be <= onDemand"):
        CapacityPlanningSettings.model_validate({"gpuHourlyPriceUsd": {"spot": 2, "onDemand": 1}})


@pytest.mark.parametrize("value", [0, 1.01])
def test_an_attainment_target_outside_zero_to_one_is_rejected(value):
    with pytest.raises(ValidationError, match="attainmentTarget"):
        CapacityPlanningSettings.model_validate({"attainmentTarget": value})


def test_the_attainment_target_defaults_above_the_slo_objective():
    assert CapacityPlanningSettings().attainment_target == 0.99


def test_a_family_price_for_an_unknown_family_is_rejected_naming_the_known_ones():
    with pytest.raises(ValidationError, match=r"families\n.*unknown families \['m5'\]; known: \['g4dn', 'g5'"):
        CapacityPlanningSettings.model_validate({"gpuHourlyPriceUsd": {"families": {"m5": {"spot": 1, "onDemand": 2}}}})


def test_a_family_price_with_spot_dearer_than_on_demand_is_rejected():
    with pytest.raises(ValidationError, match=r"families\.g6\n.*must be <= onDemand"):
        CapacityPlanningSettings.model_validate({"gpuHourlyPriceUsd": {"families": {"g6": {"spot": 2, "onDemand": 1}}}})


def test_a_model_pinned_to_a_priced_family_gets_that_familys_prices():
    prices = CapacityPlanningSettings.model_validate(
        {"gpuHourlyPriceUsd": {"spot": 0.5, "onDemand": 1.2, "families": {"g6": {"spot": 0.4, "onDemand": 0.9}}}}
    ).gpu_hourly_price_usd
    assert (prices.of(["g6", "g5"]).spot, prices.of(["g6", "g5"]).on_demand) == (0.4, 0.9)
    assert prices.of(["g5"]) is prices and prices.of(None) is prices  # unpinned: the stack-wide price
