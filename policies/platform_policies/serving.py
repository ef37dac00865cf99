"""Predictors start safely and drain safely: probes gate traffic, the grace period outlasts
the longest request the gateway allows, and a PodDisruptionBudget paces voluntary evictions."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from . import k8s
from .base import Subject, stack_policy, subject_of
from .gateway import AI_ROUTE, TRAFFIC_POLICY
from .platform import ISVC_LABEL

PDB = ("policy", "PodDisruptionBudget")
# Kubernetes' default terminationGracePeriodSeconds, and the AI gateway's default request timeout.
DEFAULT_GRACE_SECONDS = 30
AI_GATEWAY_DEFAULT_REQUEST_SECONDS = 60
MODEL_HEADER = "x-ai-eg-model"
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def duration_seconds(value: Any) -> float | None:
    """A Gateway API / Envoy duration ("90s", "1m30s", "500ms") in seconds."""
    if not isinstance(value, str) or not value:
        return None
    parts = _DURATION_PART.findall(value)
    if "".join(n + u for n, u in parts) != value:
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def _rule_serves(rule: Mapping[str, Any], model: str) -> bool:
    return any(
        k8s.get(header, "name") == MODEL_HEADER and k8s.get(header, "value") == model
        for match in k8s.items(rule, "matches")
        for header in k8s.items(match, "headers")
    )


def request_timeouts(subjects: list[Subject], model: str) -> list[tuple[float, str]]:
    """(seconds, where) of every request deadline in front of a model: the AI route rules that
    match its name (all rules when none does), and request timeouts of BackendTrafficPolicies.
    A zero timeout means none at all (infinity)."""
    found: list[tuple[float, str]] = []
    for route in (s for s in subjects if s.gk == AI_ROUTE):
        rules = [r for r in k8s.items(route.props, "spec", "rules") if k8s.is_map(r)]
        rules = [r for r in rules if _rule_serves(r, model)] or rules
        for rule in rules:
            raw = k8s.get(rule, "timeouts", "request")
            seconds = duration_seconds(raw) if raw is not None else AI_GATEWAY_DEFAULT_REQUEST_SECONDS
            if seconds is not None:
                where = (
                    f"{route.label} rule {k8s.get(rule, 'name', default='?')} timeouts.request={raw or 'default 60s'}"
                )
                found.append((seconds if seconds > 0 else float("inf"), where))
    for policy in (s for s in subjects if s.gk == TRAFFIC_POLICY):
        seconds = duration_seconds(k8s.get(policy.props, "spec", "timeout", "http", "requestTimeout"))
        if seconds is not None:
            found.append((seconds if seconds > 0 else float("inf"), f"{policy.label} timeout.http.requestTimeout"))
    return found


def _pod_labels(isvc: Subject) -> dict[str, Any]:
    labels = dict(k8s.labels_of(isvc.props))
    labels.update(k8s.get(isvc.props, "spec", "predictor", "labels") or {})
    labels[ISVC_LABEL] = isvc.k8s_name
    labels["component"] = "predictor"
    return labels


def _selects(pdb: Subject, labels: Mapping[str, Any]) -> bool:
    selector = k8s.get(pdb.props, "spec", "selector")
    if not k8s.is_map(selector):
        return False
    if not k8s.get(selector, "matchLabels") and not k8s.items(selector, "matchExpressions"):
        return False  # an empty selector is a footgun; do not count it as covering the predictor
    return k8s.selector_matches(selector, labels)


def _blocks_all_evictions(pdb: Subject) -> bool:
    value = k8s.get(pdb.props, "spec", "maxUnavailable")
    if isinstance(value, str) and value.strip().endswith("%"):
        return k8s.quantity(value.strip()[:-1]) == 0
    return value is not None and k8s.quantity(value) == 0


def _check_predictors(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    subjects = [subject_of(r) for r in resources]
    pdbs = [s for s in subjects if s.gk == PDB]
    for isvc in (s for s in subjects if s.gk == k8s.INFERENCE_SERVICE):
        label, predictor = isvc.label, k8s.get(isvc.props, "spec", "predictor")
        if not k8s.is_map(predictor):
            continue
        serving = [c for n, c in k8s.containers(predictor) if not n.startswith("initContainers")]
        for probe in ("startupProbe", "readinessProbe"):
            if not any(k8s.is_map(k8s.get(c, probe)) for c in serving):
                yield f"{label}: predictor has no {probe}", isvc.urn
        if not any(k8s.is_map(k8s.get(c, "lifecycle", "preStop")) for c in serving):
            yield (
                f"{label}: predictor has no preStop hook (SIGTERM would stop the engine with requests in flight)",
                isvc.urn,
            )

        grace = float(k8s.get(predictor, "terminationGracePeriodSeconds", default=DEFAULT_GRACE_SECONDS))
        deadlines = request_timeouts(subjects, isvc.k8s_name)
        timeout = k8s.get(predictor, "timeout")
        if timeout is not None:
            deadlines.append((float(timeout), "spec.predictor.timeout"))
        if deadlines:
            longest, where = max(deadlines)
            if grace < longest:
                yield (
                    f"{label}: terminationGracePeriodSeconds {grace:g} is shorter than the request timeout "
                    f"{longest:g}s ({where}); in-flight streams would be cut on scale-in",
                    isvc.urn,
                )

        covering = [p for p in pdbs if p.namespace == isvc.namespace and _selects(p, _pod_labels(isvc))]
        if not covering:
            yield f"{label}: no PodDisruptionBudget selects its predictor pods", isvc.urn
        for pdb in covering:
            if _blocks_all_evictions(pdb):
                yield f"{label}: {pdb.label} has maxUnavailable 0 and blocks every node drain", pdb.urn


predictors_drain = stack_policy(
    name="predictors-probed-drained-and-disruption-budgeted",
    description=(
        "Every InferenceService predictor has startup and readiness probes, a preStop drain hook, a termination "
        "grace period at least as long as the longest request timeout in front of it, and a PodDisruptionBudget."
    ),
    remediation=(
        "Keep the probes and the preStop drain of components/serving/objects.py; raise serving.terminationGracePeriodSeconds above "
        "gateway.timeouts.requestSeconds (AI gateway default 60s); create a PodDisruptionBudget selecting "
        f"{ISVC_LABEL}=<model> with maxUnavailable 1."
    ),
    check=_check_predictors,
)

POLICIES = [predictors_drain]
