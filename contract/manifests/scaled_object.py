"""A model's KEDA ScaledObject, as a pure function of its merged policy: the Autoscaling component
applies it, tests and policies read it, and the simulator replays it (`capacity.sim.scaledobject`).

Every trigger comes from `contract.triggers.TRIGGERS`: its KEDA name, metric type, query and
target are declared there once, with why each metric type is right (`Trigger.why`; a
ScaledObject has no room for a comment), so a new trigger needs no code here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contract import names, signals
from contract.settings.autoscaling import CronTrigger, ModelAutoscaling, ScalingRules
from contract.signals import Query
from contract.triggers import TRIGGERS, Trigger, enabled_triggers

from .monitored import MonitoredModel, ScaledTarget

# The KEDA release this manifest is written for (and the simulator models): the chart the
# Autoscaling component installs.
KEDA_VERSION = "2.20.2"
API_VERSION = "keda.sh/v1alpha1"


def _prometheus(
    trigger: Trigger, signal: Query, m: ScaledTarget, address: str, ignore_null_values: bool
) -> dict[str, Any]:
    return {
        "type": "prometheus",
        "name": trigger.keda_name,
        "metricType": trigger.metric_type,
        "metadata": {
            "serverAddress": address,
            "query": signal.promql(m.scope),
            "threshold": signals.number(trigger.target(m.policy)),
            # false: an empty result is an error, so KEDA applies `fallback` instead of reading 0.
            "ignoreNullValues": str(ignore_null_values).lower(),
        },
    }


def _cron(trigger: Trigger, cron: CronTrigger) -> dict[str, Any]:
    # No metricType: cron asks for desiredReplicas between start and end (warm before a known peak).
    return {
        "type": "cron",
        "name": trigger.keda_name,
        "metadata": {
            "timezone": cron.timezone,
            "start": cron.start,
            "end": cron.end,
            "desiredReplicas": str(cron.desired_replicas),
        },
    }


def keda_triggers(m: ScaledTarget, prometheus_url: str, triggers: Sequence[Trigger] = TRIGGERS) -> list[dict[str, Any]]:
    """The enabled triggers of one model, in declaration order: KEDA's cron scaler for the
    trigger that reads no metric, a Prometheus scaler for every other (why each has its metric
    type: `Trigger.why` in contract/triggers.py)."""
    # A model scaled to zero has no vLLM series at all: for it, empty means 0, not "Prometheus lost it".
    ignore_null = m.policy.min_replicas == 0
    found: list[dict[str, Any]] = []
    for trigger in enabled_triggers(m.policy, triggers):
        section = trigger.settings(m.policy)
        if isinstance(section, CronTrigger):
            found.append(_cron(trigger, section))
            continue
        signal = trigger.signal(m.policy)
        assert signal is not None, f"{trigger.key}: only the cron trigger reads no metric (contract/triggers.py)"
        found.append(_prometheus(trigger, signal, m, prometheus_url, ignore_null))
    return found


def _hpa_rules(rules: ScalingRules) -> dict[str, Any]:
    return {
        "stabilizationWindowSeconds": rules.stabilization_window_seconds,
        "selectPolicy": rules.select_policy,
        "policies": [{"type": p.type, "value": p.value, "periodSeconds": p.period_seconds} for p in rules.policies],
    }


def _fallback(p: ModelAutoscaling) -> dict[str, Any]:
    if p.fallback_replicas is None:
        return {}
    return {
        "fallback": {
            "failureThreshold": p.fallback_failure_threshold,
            "replicas": p.fallback_replicas,
            "behavior": p.fallback_behavior,
        }
    }


def scaled_object_spec(m: ScaledTarget, prometheus_url: str, triggers: Sequence[Trigger] = TRIGGERS) -> dict[str, Any]:
    p = m.policy
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": m.workload.deployment},
        "minReplicaCount": p.min_replicas,
        "maxReplicaCount": p.max_replicas,
        "pollingInterval": p.polling_interval_seconds,
        "cooldownPeriod": p.cooldown_period_seconds,
        **_fallback(p),
        "advanced": {
            "horizontalPodAutoscalerConfig": {
                "behavior": {"scaleUp": _hpa_rules(p.behavior.scale_up), "scaleDown": _hpa_rules(p.behavior.scale_down)}
            }
        },
        "triggers": keda_triggers(m, prometheus_url, triggers),
    }


def scaled_object(m: MonitoredModel, prometheus_url: str, triggers: Sequence[Trigger] = TRIGGERS) -> dict[str, Any]:
    """The whole `keda.sh/v1alpha1` ScaledObject of one model, targeting its predictor Deployment."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ScaledObject",
        "metadata": {
            "name": names.scaled_object_name(m.model),
            "namespace": m.workload.namespace,
            "labels": {
                **names.PART_OF,
                names.MODEL_LABEL: m.name,
                # Says on the object whether scale-to-zero is intended (only batch may).
                names.WORKLOAD_LABEL: m.model.workload,
            },
        },
        "spec": scaled_object_spec(m, prometheus_url, triggers),
    }
