"""The endpoint picker sits on the request path: every request of a model routed by it waits for
its pick (the InferencePool's EPP, FailClose by default), so a single replica or one a drain can
take away stops that model. In prod it runs a standby (the chart's leader election) and a
PodDisruptionBudget over its pods (the chart ships none).

Read from the `inferencepool` chart's Helm release (kubernetes-sigs/gateway-api-inference-extension
@v1.0.2 config/charts/inferencepool): `inferenceExtension.replicas` (default 1) and the pod label
`inferencepool: <release>-epp` of templates/_helpers.tpl, which the budget must select.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import PolicyConfigSchema

from contract.names import ENDPOINT_PICKER_POD_LABEL, endpoint_picker_of_release

from . import k8s
from .base import Subject, of_kind, stack_policy, subject_of

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CHART = "/inferencepool"
DEFAULT_MIN_REPLICAS = 2


def _pickers(resources: list[Any]) -> list[Subject]:
    subjects = (subject_of(r) for r in resources if r.resource_type == HELM_RELEASE)
    return [s for s in subjects if str(k8s.get(s.props, "chart", default="", unknown="")).endswith(CHART)]


def _selects(budget: Subject, namespace: Any, label: str) -> bool:
    selector = k8s.get(budget.props, "spec", "selector", "matchLabels", default={}, unknown={})
    return budget.namespace == namespace and k8s.get(selector, ENDPOINT_PICKER_POD_LABEL, unknown=None) == label


def _check(resources: list[Any], config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    minimum = int(config.get("minReplicas", DEFAULT_MIN_REPLICAS))
    budgets = of_kind(resources, "policy", "PodDisruptionBudget")
    for release in _pickers(resources):
        name = k8s.get(release.props, "name", default=None, unknown=None)
        namespace = k8s.get(release.props, "namespace", default=None, unknown=None)
        replicas = k8s.get(release.props, "values", "inferenceExtension", "replicas", default=1, unknown=None)
        if isinstance(replicas, (int, float)) and not isinstance(replicas, bool) and replicas < minimum:
            yield (
                f"{release.label}: the endpoint picker runs {replicas:g} replica(s); at least {minimum} on the "
                "request path (values.inferenceExtension.replicas)",
                release.urn,
            )
        if not isinstance(name, str):
            continue  # an auto-named release: the label is not known before `up`
        label = endpoint_picker_of_release(name)
        if not any(_selects(budget, namespace, label) for budget in budgets):
            yield (
                f"{release.label}: no PodDisruptionBudget in namespace {namespace} selects the endpoint picker's "
                f"pods ({ENDPOINT_PICKER_POD_LABEL}: {label}); a drain could take every replica at once",
                release.urn,
            )


endpoint_picker_available = stack_policy(
    name="endpoint-picker-highly-available",
    description=(
        "An endpoint picker (the inferencepool chart's EPP) runs at least minReplicas replicas and a "
        "PodDisruptionBudget selects its pods: it is on the request path of its model."
    ),
    remediation=(
        "Run more than one gateway replica (gateway.replicas; the endpoint picker follows it with a standby "
        "and a disruption budget) or route the model least-request (models[].serving.routing); dev stacks "
        "disable this policy in policies/config/dev.json."
    ),
    check=_check,
    config=PolicyConfigSchema(
        properties={"minReplicas": {"type": "integer", "minimum": 1, "default": DEFAULT_MIN_REPLICAS}}
    ),
)

POLICIES = [endpoint_picker_available]
