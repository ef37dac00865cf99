"""A raw KEDA ScaledObject manifest -> the simulator's plain data, so any policy can be replayed.

Fields and defaults follow KEDA v2.20.2 (the pinned chart): `apis/keda/v1alpha1/
scaledobject_types.go` (minReplicaCount 0, maxReplicaCount 100, fallback behavior `static`),
`withtriggers_types.go` (pollingInterval 30), `pkg/scaling/executor/scale_executor.go`
(cooldownPeriod 300), `pkg/scalers/scaler.go` GetMetricTargetType (metricType AverageValue) and
`pkg/scalers/prometheus_scaler.go` (query, threshold, activationThreshold 0, ignoreNullValues
true). The HPA behavior KEDA passes through is defaulted by the API server field by field
(`pkg/apis/autoscaling/v2/defaults.go`, GenerateHPAScaleUpRules/GenerateHPAScaleDownRules:
a rule set that names only its stabilization window keeps the default policies).

Only what the simulator can replay is accepted: `prometheus` triggers whose query is within the
PromQL subset (`capacity.sim.control.promql_parse`) and `cron` triggers; anything else is a
ValueError naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from capacity.sim.control.cron import CronWindow
from capacity.sim.control.hpa import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    HorizontalPodAutoscaler,
    HpaBehavior,
    HpaScalingPolicy,
    HpaScalingRules,
)
from capacity.sim.control.keda import Fallback, KedaTrigger, ScaledObject
from capacity.sim.control.promql_parse import parse_selecting

DEFAULT_MIN_REPLICAS, DEFAULT_MAX_REPLICAS = 0, 100
DEFAULT_POLLING_INTERVAL_S, DEFAULT_COOLDOWN_PERIOD_S = 30, 300
# Labels that differ between one model's replicas: grouping by them returns one series per
# replica, which KEDA's Prometheus scaler refuses ("returned multiple elements").
PER_REPLICA_LABELS = ("pod", "instance", "endpoint", "container", "node", "pod_name")
_SUPPORTED_SPEC = {
    "scaleTargetRef",
    "pollingInterval",
    "cooldownPeriod",
    "initialCooldownPeriod",
    "minReplicaCount",
    "maxReplicaCount",
    "advanced",
    "triggers",
    "fallback",
}


@dataclass(frozen=True)
class Manifest:
    """One ScaledObject as the simulator runs it; `scaled_object()` gives a fresh, stateful copy."""

    name: str
    triggers: tuple[KedaTrigger, ...]
    min_replicas: int
    max_replicas: int
    polling_interval_seconds: int
    cooldown_period_seconds: int
    behavior: HpaBehavior
    fallback: Fallback | None

    def scaled_object(self) -> ScaledObject:
        return ScaledObject(
            triggers=self.triggers,
            # KEDA gives the HPA minReplicas >= 1 and handles 0 <-> 1 itself.
            hpa=HorizontalPodAutoscaler(max(self.min_replicas, 1), self.max_replicas, self.behavior),
            min_replica_count=self.min_replicas,
            polling_interval_seconds=self.polling_interval_seconds,
            cooldown_period_seconds=self.cooldown_period_seconds,
            fallback=self.fallback,
        )


class _Reader:
    """Typed access to the manifest, every error naming where it came from and the key path."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, key: str, rule: str) -> ValueError:
        return ValueError(f"ScaledObject {self.where}: {key} {rule}")

    def mapping(self, value: Any, key: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(key, "must be a mapping")
        return value

    def integer(self, block: dict[str, Any], field: str, key: str, default: int, minimum: int = 0) -> int:
        value = block.get(field, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(f"{key}.{field}", f"must be an integer >= {minimum}, got {value!r}")
        return value

    def number(self, metadata: dict[str, Any], field: str, key: str, default: float | None = None) -> float:
        value = metadata.get(field, default)
        if value is None:
            raise self.fail(f"{key}.{field}", "is required")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise self.fail(f"{key}.{field}", f"must be a number, got {value!r}") from None

    def boolean(self, metadata: dict[str, Any], field: str, key: str, default: bool) -> bool:
        value = metadata.get(field, default)
        text = str(value).lower()
        if text not in ("true", "false"):
            raise self.fail(f"{key}.{field}", f"must be true or false, got {value!r}")
        return text == "true"


def _document(path: Path) -> dict[str, Any]:
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"ScaledObject {path}: cannot be read: {str(exc).splitlines()[0]}") from None
    objects = [d for d in documents if isinstance(d, dict) and d.get("kind") == "ScaledObject"]
    if len(objects) != 1:
        raise ValueError(
            f"ScaledObject {path}: expected exactly one document of kind ScaledObject, found {len(objects)}"
        )
    if not str(objects[0].get("apiVersion", "")).startswith("keda.sh/"):
        raise ValueError(
            f"ScaledObject {path}: apiVersion must be keda.sh/v1alpha1, got {objects[0].get('apiVersion')!r}"
        )
    return objects[0]


def _rules(r: _Reader, block: Any, key: str, default: HpaScalingRules) -> HpaScalingRules:
    block = r.mapping(block, key)
    if not block:
        return default
    window = r.integer(block, "stabilizationWindowSeconds", key, default.stabilization_window_seconds)
    select = block.get("selectPolicy", default.select_policy)
    if select not in ("Max", "Min", "Disabled"):
        raise r.fail(f"{key}.selectPolicy", f"must be Max, Min or Disabled, got {select!r}")
    policies = default.policies
    if "policies" in block:
        if not isinstance(block["policies"], list) or not block["policies"]:
            raise r.fail(f"{key}.policies", "must be a non-empty list")
        parsed = []
        for i, p in enumerate(block["policies"]):
            p = r.mapping(p, f"{key}.policies[{i}]")
            if p.get("type") not in ("Pods", "Percent"):
                raise r.fail(f"{key}.policies[{i}].type", f"must be Pods or Percent, got {p.get('type')!r}")
            value = r.integer(p, "value", f"{key}.policies[{i}]", 0, minimum=1)
            period = r.integer(p, "periodSeconds", f"{key}.policies[{i}]", 0, minimum=1)
            parsed.append(HpaScalingPolicy(p["type"], value, period))
        policies = tuple(parsed)
    return HpaScalingRules(window, select, policies)


def _trigger(r: _Reader, index: int, raw: Any) -> KedaTrigger:
    key = f"spec.triggers[{index}]"
    raw = r.mapping(raw, key)
    kind = raw.get("type")
    metadata = r.mapping(raw.get("metadata"), f"{key}.metadata")
    name = str(raw.get("name") or f"s{index}-{kind}")
    if kind == "cron":
        for field in ("start", "end", "desiredReplicas"):
            if field not in metadata:
                raise r.fail(f"{key}.metadata.{field}", "is required for a cron trigger")
        window = CronWindow(
            str(metadata["start"]),
            str(metadata["end"]),
            str(metadata.get("timezone", "UTC")),
            int(r.number(metadata, "desiredReplicas", f"{key}.metadata")),
        )
        return KedaTrigger(name, "AverageValue", 1.0, source=window)
    if kind != "prometheus":
        raise r.fail(f"{key}.type", f"{kind!r} is not simulated: only prometheus and cron triggers are")
    metric_type = raw.get("metricType", "AverageValue")
    if metric_type not in ("AverageValue", "Value"):
        raise r.fail(f"{key}.metricType", f"must be AverageValue or Value for an external metric, got {metric_type!r}")
    if "query" not in metadata:
        raise r.fail(f"{key}.metadata.query", "is required")
    try:
        query, matchers = parse_selecting(str(metadata["query"]))
    except ValueError as exc:
        raise r.fail(f"{key}.metadata.query", str(exc)) from None
    per_replica = [label for label in query.by if label in PER_REPLICA_LABELS]
    if per_replica:
        raise r.fail(
            f"{key}.metadata.query", f"groups by {per_replica}: one series per replica, and KEDA needs exactly one"
        )
    threshold = r.number(metadata, "threshold", f"{key}.metadata")
    if threshold <= 0:
        raise r.fail(f"{key}.metadata.threshold", f"must be > 0, got {threshold:g}")
    return KedaTrigger(
        name,
        metric_type,
        threshold,
        activation_threshold=r.number(metadata, "activationThreshold", f"{key}.metadata", 0.0),
        source=query,
        ignore_null_values=r.boolean(metadata, "ignoreNullValues", f"{key}.metadata", True),
        matchers=matchers,
    )


def read_scaled_object(path: Path) -> Manifest:
    """The manifest at `path` (one ScaledObject; other documents in the file are skipped)."""
    path = Path(path)
    return parse_scaled_object(_document(path), str(path), unnamed=path.stem)


def parse_scaled_object(document: dict[str, Any], where: str, unnamed: str | None = None) -> Manifest:
    """One ScaledObject document (as `kubectl apply` would send it) as the simulator runs it;
    `where` names it in errors (a file, or the stack model whose rendered manifest it is), and
    `unnamed` is its name when its metadata has none."""
    r = _Reader(where)
    if document.get("kind") != "ScaledObject" or not str(document.get("apiVersion", "")).startswith("keda.sh/"):
        raise r.fail(
            "kind", f"must be a keda.sh ScaledObject, got {document.get('apiVersion')!r} {document.get('kind')!r}"
        )
    spec = r.mapping(document.get("spec"), "spec")
    unknown = sorted(set(spec) - _SUPPORTED_SPEC)
    if unknown:
        raise r.fail(f"spec.{unknown[0]}", "is not simulated (or not a ScaledObject field)")
    triggers = spec.get("triggers")
    if not isinstance(triggers, list) or not triggers:
        raise r.fail("spec.triggers", "must list at least one trigger")
    advanced = r.mapping(spec.get("advanced"), "spec.advanced")
    if advanced.get("scalingModifiers"):
        raise r.fail("spec.advanced.scalingModifiers", "is not simulated (a formula over the triggers)")
    hpa_config = r.mapping(advanced.get("horizontalPodAutoscalerConfig"), "spec.advanced.horizontalPodAutoscalerConfig")
    behavior_block = r.mapping(hpa_config.get("behavior"), "spec.advanced.horizontalPodAutoscalerConfig.behavior")
    prefix = "spec.advanced.horizontalPodAutoscalerConfig.behavior"
    behavior = HpaBehavior(
        _rules(r, behavior_block.get("scaleUp"), f"{prefix}.scaleUp", DEFAULT_SCALE_UP),
        _rules(r, behavior_block.get("scaleDown"), f"{prefix}.scaleDown", DEFAULT_SCALE_DOWN),
    )
    minimum = r.integer(spec, "minReplicaCount", "spec", DEFAULT_MIN_REPLICAS)
    maximum = r.integer(spec, "maxReplicaCount", "spec", DEFAULT_MAX_REPLICAS, minimum=1)
    if minimum > maximum:
        raise r.fail("spec.minReplicaCount", f"must be <= maxReplicaCount ({maximum}), got {minimum}")
    fallback = None
    if "fallback" in spec:
        block = r.mapping(spec["fallback"], "spec.fallback")
        kind = block.get("behavior", "static")
        if kind not in ("static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"):
            raise r.fail("spec.fallback.behavior", f"{kind!r} is not simulated")
        fallback = Fallback(
            r.integer(block, "replicas", "spec.fallback", 0),
            r.integer(block, "failureThreshold", "spec.fallback", 0),
            kind,
        )
    return Manifest(
        name=str(r.mapping(document.get("metadata"), "metadata").get("name") or unnamed or where),
        triggers=tuple(_trigger(r, i, t) for i, t in enumerate(triggers)),
        min_replicas=minimum,
        max_replicas=maximum,
        polling_interval_seconds=r.integer(spec, "pollingInterval", "spec", DEFAULT_POLLING_INTERVAL_S, minimum=1),
        cooldown_period_seconds=r.integer(spec, "cooldownPeriod", "spec", DEFAULT_COOLDOWN_PERIOD_S),
        behavior=behavior,
        fallback=fallback,
    )
