"""The operator charts keep the restrictions the platform sets in their values: the pack cannot see
the pods a chart renders, but it reads the values that decide what they may do.

- kube-prometheus-stack's Grafana: RBAC namespaced (a Role, not a ClusterRole that reads every
  Secret) and sidecars that read the monitoring namespace only (grafana chart 12.x values.yaml:
  `rbac.namespaced`, default false; `sidecar.dashboards.searchNamespace` / `sidecar.datasources.
  searchNamespace`, "ALL" for every namespace).
- Prometheus: each *NamespaceSelector set and non-empty (prometheus-operator API, PrometheusSpec:
  "An empty label selector matches all namespaces"; kube-prometheus-stack-88.5.3 values.yaml
  defaults each to `{}`), so a PrometheusRule or monitor in any namespace is not loaded.
- KEDA: operator and metrics server read Secrets of their own namespace only (keda-2.20.2
  values.yaml `permissions.operator.restrict.secret`, `permissions.metricServer.restrict.secret`).
- The DCGM exporter: no SYS_ADMIN (dcgm-exporter chart values.yaml `securityContext` adds it by
  default, "Required for profiling metrics (DCGM_FI_PROF_*)", which the platform does not read).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from . import k8s
from .base import Subject, resource_policy

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
PROMETHEUS_SELECTORS = (
    "ruleNamespaceSelector",
    "serviceMonitorNamespaceSelector",
    "podMonitorNamespaceSelector",
    "probeNamespaceSelector",
    "scrapeConfigNamespaceSelector",
)
GRAFANA_SIDECARS = ("dashboards", "datasources")


def _chart(subject: Subject) -> str:
    return str(k8s.get(subject.props, "chart", default="", unknown="")).rsplit("/", 1)[-1]


def _values(subject: Subject, *path: str) -> Any:
    return k8s.get(subject.props, "values", *path, unknown=None)


def _kube_prometheus_stack(subject: Subject) -> Iterator[str]:
    if _values(subject, "grafana", "enabled") is not False:
        if _values(subject, "grafana", "rbac", "namespaced") is not True:
            yield (
                "grafana.rbac.namespaced is not true: Grafana's service account gets a ClusterRole that gets and "
                "lists Secrets in every namespace"
            )
        for sidecar in GRAFANA_SIDECARS:
            where = _values(subject, "grafana", "sidecar", sidecar, "searchNamespace")
            searched = [str(w) for w in where] if k8s.is_list(where) else [str(where)] if where is not None else []
            if any(s.upper() == "ALL" for s in searched):
                yield f"grafana.sidecar.{sidecar}.searchNamespace is ALL: the sidecar reads every namespace"
    spec = _values(subject, "prometheus", "prometheusSpec")
    for selector in PROMETHEUS_SELECTORS:
        value = k8s.get(spec, selector, unknown={"?": "?"})
        if value is None or k8s.selector_is_empty(value):
            yield (
                f"prometheus.prometheusSpec.{selector} is {'unset' if value is None else 'empty'}: Prometheus loads "
                "them from every namespace (a rule there can silence or forge the platform's alerts)"
            )


def _keda(subject: Subject) -> Iterator[str]:
    for part in ("operator", "metricServer"):
        if _values(subject, "permissions", part, "restrict", "secret") is not True:
            yield f"permissions.{part}.restrict.secret is not true: KEDA reads Secrets in every namespace"


def _dcgm_exporter(subject: Subject) -> Iterator[str]:
    context = _values(subject, "securityContext")
    if not k8s.is_map(context):
        yield "securityContext is the chart's default, which adds SYS_ADMIN"
        return
    added = [str(c) for c in k8s.known_items(context, "capabilities", "add")]
    if added:
        yield f"securityContext adds capabilities {added}; the platform reads no profiling metric that needs them"
    if "ALL" not in [str(c) for c in k8s.known_items(context, "capabilities", "drop")]:
        yield "securityContext does not drop ALL capabilities"
    if k8s.get(context, "allowPrivilegeEscalation", unknown=None) is not False:
        yield "securityContext does not set allowPrivilegeEscalation: false"


CHECKS = {"kube-prometheus-stack": _kube_prometheus_stack, "keda": _keda, "dcgm-exporter": _dcgm_exporter}


def _check_operator_values(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if subject.resource_type != HELM_RELEASE or _chart(subject) not in CHECKS:
        return
    for problem in CHECKS[_chart(subject)](subject):
        yield f"Helm release '{subject.name}' ({_chart(subject)}): {problem}"


operator_values = resource_policy(
    name="operator-charts-keep-their-restrictions",
    description=(
        "The operator charts keep the restrictions the platform sets: Grafana's RBAC namespaced and its sidecars "
        "on its own namespace, Prometheus loading rules and monitors from named namespaces only, KEDA reading "
        "Secrets of its own namespace only, the DCGM exporter without added capabilities."
    ),
    remediation=(
        "Keep the values of components/observability/objects.py (grafana_values, prometheus namespace selectors, "
        "dcgm_values) and components/autoscaling (KEDA permissions.*.restrict.secret)."
    ),
    check=_check_operator_values,
)

POLICIES = [operator_values]
