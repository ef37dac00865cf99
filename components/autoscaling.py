"""Autoscaling: KEDA from its pinned chart and one ScaledObject per model, targeting the
model's predictor Deployment, with every query built by `signals`.

`scaled_object_spec()` and `triggers()` are pure, so tests and policies read exactly what
the program applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import pulumi
import pulumi_kubernetes as k8s

from contract import names, signals
from contract.settings import StackSettings
from contract.settings.autoscaling import ModelAutoscaling, ScalingRules

from .naming import type_token
from .rules import MonitoredModel, monitored_models

KEDA_CHART = "keda"
KEDA_REPOSITORY = "https://kedacore.github.io/charts"
KEDA_VERSION = "2.20.2"
KEDA_NAMESPACE = "keda"


def _prometheus(name: str, query: str, threshold: float, metric_type: str, address: str,
                ignore_null_values: bool) -> dict[str, Any]:
    return {
        "type": "prometheus",
        "name": name,
        "metricType": metric_type,
        "metadata": {
            "serverAddress": address,
            "query": query,
            "threshold": signals.number(threshold),
            # false: an empty result is an error, so KEDA applies `fallback` instead of reading 0.
            "ignoreNullValues": str(ignore_null_values).lower(),
        },
    }


def triggers(m: MonitoredModel, prometheus_url: str) -> list[dict[str, Any]]:
    """The enabled triggers of one model, in config order."""
    t, scope = m.policy.triggers, m.scope
    # A model scaled to zero has no vLLM series at all: for it, empty means 0, not "Prometheus lost it".
    ignore_null = m.policy.min_replicas == 0
    found: list[dict[str, Any]] = []
    if t.queue_depth.enabled:
        # AverageValue: waiting requests add up across replicas; HPA divides the sum by replicas.
        found.append(_prometheus("queue-depth", signals.queue_depth(scope, t.queue_depth.window_seconds),
                                 t.queue_depth.target_per_replica, "AverageValue", prometheus_url, ignore_null))
    if t.kv_cache.enabled:
        # AverageValue: KV fractions add up to "replicas' worth of cache in use", which stays high
        # after a new replica drains the queue, so capacity in use is not given back too early.
        found.append(_prometheus("kv-cache", signals.kv_cache_usage(scope), t.kv_cache.target_per_replica,
                                 "AverageValue", prometheus_url, ignore_null))
    if t.e2e_latency.enabled:
        # Value: a quantile is not additive; dividing it by the replica count would be meaningless.
        query = signals.e2e_latency_quantile(scope, t.e2e_latency.quantile, t.e2e_latency.window_seconds)
        found.append(_prometheus("e2e-latency", query, t.e2e_latency.threshold_seconds, "Value", prometheus_url,
                                 ignore_null))
    if t.ttft.enabled:
        # Value: same reason as the end-to-end latency guardrail.
        query = signals.ttft_quantile(scope, t.ttft.quantile, t.ttft.window_seconds)
        found.append(_prometheus("ttft", query, t.ttft.threshold_seconds, "Value", prometheus_url, ignore_null))
    if t.cron.enabled:
        # No metricType: cron asks for desiredReplicas between start and end (warm before a known peak).
        found.append({
            "type": "cron",
            "name": "warm-peak",
            "metadata": {
                "timezone": t.cron.timezone,
                "start": t.cron.start,
                "end": t.cron.end,
                "desiredReplicas": str(t.cron.desired_replicas),
            },
        })
    return found


def _hpa_rules(rules: ScalingRules) -> dict[str, Any]:
    return {
        "stabilizationWindowSeconds": rules.stabilization_window_seconds,
        "selectPolicy": rules.select_policy,
        "policies": [
            {"type": p.type, "value": p.value, "periodSeconds": p.period_seconds} for p in rules.policies
        ],
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


def scaled_object_spec(m: MonitoredModel, prometheus_url: str) -> dict[str, Any]:
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
        "triggers": triggers(m, prometheus_url),
    }


@dataclass(frozen=True)
class AutoscalingArgs:
    settings: StackSettings
    # In-cluster Prometheus (Observability): scaling decisions never wait on a remote store.
    prometheus_url: str
    provider: k8s.Provider
    # What must exist before a ScaledObject can target it (Serving, or the serving namespace).
    depends_on: Sequence[pulumi.Resource] = ()


class Autoscaling(pulumi.ComponentResource):
    scaled_objects: dict[str, k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: AutoscalingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("autoscaling", "Autoscaling"), name, None, opts)
        release = k8s.helm.v3.Release(
            f"{name}-keda",
            chart=KEDA_CHART,
            version=KEDA_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=KEDA_REPOSITORY),
            namespace=KEDA_NAMESPACE,
            create_namespace=True,
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        object_opts = pulumi.ResourceOptions(
            parent=self, provider=args.provider, depends_on=[release, *args.depends_on]
        )
        self.scaled_objects = {}
        for m in monitored_models(args.settings):
            self.scaled_objects[m.name] = k8s.apiextensions.CustomResource(
                f"{name}-{m.name}",
                api_version="keda.sh/v1alpha1",
                kind="ScaledObject",
                metadata={
                    "name": names.scaled_object_name(m.model),
                    "namespace": m.workload.namespace,
                    "labels": {
                        **names.PART_OF,
                        names.MODEL_LABEL: m.name,
                        # Says on the object whether scale-to-zero is intended (only batch may).
                        names.WORKLOAD_LABEL: m.model.workload,
                    },
                },
                spec=scaled_object_spec(m, args.prometheus_url),
                opts=object_opts,
            )
        self.register_outputs({"scaledObjects": list(self.scaled_objects)})
