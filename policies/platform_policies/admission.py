"""Pod Security Admission on every namespace the platform runs pods in: the label that makes the
API server refuse a pod, whoever creates it (Kubernetes docs, "Pod Security Admission": the
`pod-security.kubernetes.io/<mode>` namespace labels; "Pod Security Standards" for the levels).

- namespaces with the platform's own pods (predictors, model sync, the rate-limit store) enforce
  `restricted`, unless a chart installs pods there too (the endpoint picker's inferencepool chart
  in the serving namespace: `baseline`);
- operator namespaces enforce at least `baseline`; `privileged` only where a chart runs host-level
  pods (node-exporter: host network, PID and paths; the DCGM exporter: the kubelet's pod-resources
  socket through hostPath, as root). kube-prometheus-stack runs node-exporter in its release's
  namespace unless `prometheus-node-exporter.namespaceOverride` names another (its values.yaml at
  88.5.3), so the namespace of Prometheus, Grafana and Alertmanager must then enforce `baseline`;
- every namespace warns and audits at `restricted`, so anything short of it is visible.

kube-system is EKS's own and is not labelled by the platform.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from contract.names import PART_OF

from . import k8s
from .base import Subject, stack_policy, subject_of

PSA = "pod-security.kubernetes.io"
LEVELS = ("privileged", "baseline", "restricted")
NAMESPACE_KINDS = {"kubernetes:core/v1:Namespace", "kubernetes:core/v1:NamespacePatch"}
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
STACK_CHART = "kube-prometheus-stack"
DCGM_CHART = "dcgm-exporter"
UNLABELLED = {"kube-system"}
WORKLOAD_KINDS = {("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet"), ("batch", "Job")}


def _chart(release: Subject) -> str:
    return str(k8s.get(release.props, "chart", default="", unknown="")).rsplit("/", 1)[-1]


def _host_level_namespaces(release: Subject, namespace: str) -> set[str]:
    """Where a release runs host-level pods: the DCGM exporter in its namespace; kube-prometheus-stack's
    node-exporter in its namespaceOverride, else the release's namespace (also when the values are
    not known yet), nowhere when `nodeExporter.enabled` is false."""
    chart = _chart(release)
    if chart == DCGM_CHART:
        return {namespace}
    if chart != STACK_CHART:
        return set()
    values = k8s.get(release.props, "values", unknown=None)
    if not k8s.is_map(values):
        return {namespace}
    if k8s.get(values, "nodeExporter", "enabled", default=True, unknown=True) is False:
        return set()
    override = k8s.get(values, "prometheus-node-exporter", "namespaceOverride", default="", unknown=None)
    if override is None:
        return {namespace}
    return {override if isinstance(override, str) and override else namespace}


def _labels(resources: list[Any]) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Namespace -> its Pod Security labels, from the Namespaces and NamespacePatches of the stack,
    and namespace -> the URN of the resource that labels it (what a violation points at)."""
    found: dict[str, dict[str, str]] = {}
    urns: dict[str, str] = {}
    for subject in (subject_of(r) for r in resources if r.resource_type in NAMESPACE_KINDS):
        labels = k8s.labels_of(subject.props)
        psa = {str(k): str(labels[k]) for k in labels if str(k).startswith(PSA + "/")}
        found.setdefault(subject.k8s_name, {}).update(psa)
        if psa or subject.k8s_name not in urns:
            urns[subject.k8s_name] = subject.urn
    return found, urns


def _wanted(resources: list[Any]) -> dict[str, tuple[str, str]]:
    """Namespace -> (the least level it must enforce, why), for every namespace the platform runs pods in."""
    wanted: dict[str, tuple[str, str]] = {}
    subjects = [subject_of(r) for r in resources]
    charts: dict[str, set[str]] = {}
    host_level: dict[str, set[str]] = {}
    for release in (s for s in subjects if s.resource_type == HELM_RELEASE):
        namespace = k8s.get(release.props, "namespace", unknown=None)
        if isinstance(namespace, str) and namespace not in UNLABELLED:
            charts.setdefault(namespace, set()).add(_chart(release))
            for host_namespace in _host_level_namespaces(release, namespace):
                host_level.setdefault(host_namespace, set()).add(_chart(release))
    for namespace, here in charts.items():
        wanted[namespace] = ("baseline", f"the {sorted(here)} charts'")
    for namespace, here in host_level.items():
        charts.setdefault(namespace, set()).update(here)
        wanted[namespace] = ("privileged", f"the {sorted(here)} charts' host-level")
    for subject in subjects:
        platform = subject.gk == k8s.INFERENCE_SERVICE or (
            subject.gk in WORKLOAD_KINDS
            and all(k8s.get(k8s.labels_of(subject.props), k, unknown=None) == v for k, v in PART_OF.items())
        )
        # A chart's pods in the same namespace (the endpoint picker's inferencepool chart sets no
        # securityContext) lower what the namespace can enforce to what they meet.
        if platform and subject.namespace and subject.namespace not in charts:
            wanted[subject.namespace] = ("restricted", f"{subject.label}'s")
    return wanted


def _check_pod_security(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    labels, urns = _labels(resources)
    for namespace, (least, whose) in sorted(_wanted(resources).items()):
        mine, urn = labels.get(namespace, {}), urns.get(namespace)
        enforce = mine.get(f"{PSA}/enforce")
        if enforce not in LEVELS:
            yield (
                f"namespace {namespace}: enforces no Pod Security level ({PSA}/enforce unset); any pod, privileged "
                f"or on the host, is admitted beside {whose} pods",
                urn,
            )
        elif LEVELS.index(enforce) < LEVELS.index(least):
            yield f"namespace {namespace}: enforces {enforce}, below {least} that {whose} pods meet", urn
        for mode in ("warn", "audit"):
            if mine.get(f"{PSA}/{mode}") != "restricted":
                yield f"namespace {namespace}: {PSA}/{mode} is not restricted; pods short of it go unnoticed", urn


pod_security_enforced = stack_policy(
    name="platform-namespaces-enforce-pod-security",
    description=(
        "Every namespace the platform runs pods in carries Pod Security Admission labels: restricted enforced "
        "where its own pods run, at least baseline in operator namespaces (privileged only beside node-exporter "
        "and the DCGM exporter), warn and audit restricted everywhere."
    ),
    remediation=(
        "Keep isolation.pod_security_labels on the serving, model-sync and gateway Namespaces and the "
        "NamespacePatches of components/namespace_isolation.py."
    ),
    check=_check_pod_security,
)

POLICIES = [pod_security_enforced]
