"""The scaling triggers, declared once: every declaration resolves against the settings, the
metric type follows from whether the signal adds up, and no two triggers share a name."""

from __future__ import annotations

import pytest

from contract.settings.autoscaling import ModelAutoscaling, TriggerSection
from contract.settings.stack_file import load_stack
from contract.triggers import BY_KEY, TRIGGERS, Trigger, enabled_triggers
from tests.harness import ROOT


def policies() -> list[ModelAutoscaling]:
    """The defaults and every model's merged policy of both stacks."""
    found = [ModelAutoscaling()]
    for stack in ("dev", "prod"):
        settings = load_stack(stack, ROOT)
        found += [settings.autoscaling_for(m.name) for m in settings.models]
    return found


@pytest.mark.parametrize("trigger", TRIGGERS, ids=[t.key for t in TRIGGERS])
def test_each_trigger_resolves_its_settings_target_and_signal(trigger: Trigger) -> None:
    for policy in policies():
        assert isinstance(trigger.settings(policy), TriggerSection)
        assert isinstance(trigger.target(policy), float)
        assert trigger.metric_target(policy) > 0
        assert (trigger.signal(policy) is None) == (trigger.query is None)
    section = type(trigger.settings(ModelAutoscaling()))
    assert trigger.target_key in {f.alias for f in section.model_fields.values()}
    assert trigger.target_path() == f"triggers.{trigger.key}.{trigger.target_key}"
    assert trigger.why and trigger.label and trigger.unit


def test_every_trigger_settings_field_is_declared_and_every_declaration_has_one() -> None:
    assert set(ModelAutoscaling().triggers.sections()) == {t.key for t in TRIGGERS}


def test_average_value_exactly_for_the_additive_signals() -> None:
    policy = ModelAutoscaling()
    for trigger in TRIGGERS:
        signal = trigger.signal(policy)
        if signal is None:
            # KEDA's cron scaler: an AverageValue of desiredReplicas against a fixed target of 1.
            assert (trigger.metric_type, trigger.fixed_target) == ("AverageValue", 1.0), trigger.key
        else:
            additive = signal.additive
            assert (trigger.metric_type == "AverageValue") == additive, trigger.key
    assert {t.key for t in TRIGGERS if t.metric_type == "Value"} == {"e2eLatency", "ttft"}


def test_keys_and_keda_names_are_unique() -> None:
    keys, keda_names = [t.key for t in TRIGGERS], [t.keda_name for t in TRIGGERS]
    assert len(set(keys)) == len(keys) and len(set(keda_names)) == len(keda_names)
    assert {t.key: t for t in TRIGGERS} == BY_KEY


def test_enabled_triggers_keep_declaration_order_and_skip_disabled_ones() -> None:
    policy = ModelAutoscaling.model_validate({"triggers": {"kvCache": {"enabled": False}, "ttft": {"enabled": True}}})
    assert [t.key for t in enabled_triggers(policy)] == [
        t.key for t in TRIGGERS if t.key not in ("kvCache", "promptTokens", "seasonal", "trend", "cron")
    ]


def test_a_trigger_without_a_settings_field_is_named_in_the_error() -> None:
    stray = Trigger(
        key="pendingPods",
        keda_name="pending-pods",
        metric_type="AverageValue",
        why="-",
        target_key="targetPerReplica",
        query=None,
        label="-",
        unit="short",
    )
    with pytest.raises(KeyError, match="pendingPods"):
        stray.settings(ModelAutoscaling())
