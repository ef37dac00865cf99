"""The pods the platform runs itself (predictors, model sync, the rate-limit store) keep the
restricted security context of contract/pod_security.py and no Kubernetes API token.

Which pods: every InferenceService, and every workload labelled `app.kubernetes.io/part-of:
inference-platform`. Operator charts (KServe, Envoy Gateway, Prometheus) bring their own
pods, which this pack cannot see inside a Helm release."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from contract.names import PART_OF

from . import k8s
from .base import Subject, of_kind, resource_policy, stack_policy, subject_of

WORKLOAD_KINDS = {
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("", "Pod"),
}
# Pod Security Standards, "Restricted" (kubernetes.io/docs/concepts/security/pod-security-standards):
# seccomp RuntimeDefault or Localhost, capabilities drop ALL and add at most NET_BIND_SERVICE,
# no privilege escalation, non-root; "Baseline" below it: no host namespaces, hostPath
# volumes, host ports or privileged containers.
SECCOMP_TYPES = ("RuntimeDefault", "Localhost")
ADDABLE_CAPABILITIES = {"NET_BIND_SERVICE"}
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")


def platform_pod_specs(subject: Subject) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The pod specs of a platform-owned object (an InferenceService, or a workload the platform labels)."""
    gk = subject.gk
    if gk == k8s.INFERENCE_SERVICE:
        yield from k8s.pod_specs(gk, subject.props)
    elif gk in WORKLOAD_KINDS:
        labels = k8s.labels_of(subject.props)
        if all(k8s.get(labels, key, unknown=None) == value for key, value in PART_OF.items()):
            yield from k8s.pod_specs(gk, subject.props)


def _effective(pod_spec: Mapping[str, Any], container: Mapping[str, Any], *path: str) -> Any:
    """A security setting as the kubelet applies it: the container's, else the pod's."""
    value = k8s.get(container, "securityContext", *path, unknown=None)
    return value if value is not None else k8s.get(pod_spec, "securityContext", *path, unknown=None)


def _pod_problems(pod_spec: Mapping[str, Any]) -> Iterator[str]:
    for field in HOST_NAMESPACES:
        if k8s.get(pod_spec, field, unknown=None) is True:
            yield f"sets {field}: true (shares the node's namespace)"
    for volume in k8s.known_items(pod_spec, "volumes"):
        if k8s.get(volume, "hostPath", unknown=None) is not None:
            yield f"mounts hostPath volume {k8s.get(volume, 'name', unknown='?')!r} (the node's filesystem)"


def _container_problems(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> Iterator[str]:
    context = k8s.get(container, "securityContext", unknown=None)
    if k8s.get(context, "privileged", unknown=None) is True:
        yield "is privileged (every device and capability of the node)"
    added = {str(c) for c in k8s.known_items(context, "capabilities", "add")} - ADDABLE_CAPABILITIES
    if added:
        yield f"adds capabilities {sorted(added)}"
    if "ALL" not in {str(c) for c in k8s.known_items(context, "capabilities", "drop")}:
        yield "does not drop ALL capabilities"
    if k8s.get(context, "allowPrivilegeEscalation", unknown=None) is not False:
        yield "does not set allowPrivilegeEscalation: false"
    if k8s.get(context, "readOnlyRootFilesystem", unknown=None) is not True:
        yield "does not set readOnlyRootFilesystem: true"
    seccomp = _effective(pod_spec, container, "seccompProfile", "type")
    if seccomp not in SECCOMP_TYPES:
        yield f"runs with seccomp profile {seccomp or 'unset (Unconfined)'}, not RuntimeDefault"
    if _effective(pod_spec, container, "runAsNonRoot") is not True or _effective(pod_spec, container, "runAsUser") == 0:
        yield "may run as root (runAsNonRoot is not true, or runAsUser is 0)"
    ports = [p for p in k8s.known_items(container, "ports") if k8s.get(p, "hostPort", unknown=None)]
    if ports:
        yield f"binds host ports {[k8s.get(p, 'hostPort') for p in ports]}"


def _check_restricted(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    for where, pod_spec in platform_pod_specs(subject):
        for problem in _pod_problems(pod_spec):
            yield f"{subject.label}: {where} {problem}"
        for name, container in k8s.containers(pod_spec):
            for problem in _container_problems(pod_spec, container):
                yield f"{subject.label}: {where}.{name} {problem}"


platform_pods_restricted = resource_policy(
    name="platform-pods-run-restricted",
    description=(
        "The platform's own pods (predictors, model sync, the rate-limit store) meet the Kubernetes Pod Security "
        "Standards 'restricted' profile: no host namespaces, hostPath, host ports or privileged containers, "
        "capabilities dropped (at most NET_BIND_SERVICE added), no privilege escalation, seccomp RuntimeDefault, "
        "non-root; and a read-only root filesystem. A predictor runs model code from the internet: it must not "
        "reach the node."
    ),
    remediation=(
        "Build pod and container security contexts with contract/pod_security.py (pod_security_context, "
        "container_security_context); give scratch space as emptyDir volumes, never hostPath."
    ),
    check=_check_restricted,
)


# --- no API token -------------------------------------------------------------------------------


def _service_account_automounts(resources: list[Any]) -> dict[tuple[str | None, str], Any]:
    return {
        (s.namespace, s.k8s_name): k8s.get(s.props, "automountServiceAccountToken", unknown=None)
        for s in of_kind(resources, "", "ServiceAccount")
    }


def _check_tokens(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    accounts = _service_account_automounts(resources)
    for subject in (subject_of(r) for r in resources):
        for where, pod_spec in platform_pod_specs(subject):
            pod_value = k8s.get(pod_spec, "automountServiceAccountToken", unknown=None)
            account = str(k8s.get(pod_spec, "serviceAccountName", unknown=None) or "default")
            # The pod's field wins over its service account's (Kubernetes docs, "Configure Service
            # Accounts for Pods": if both specify a value, the Pod spec takes precedence).
            if pod_value is False or (pod_value is None and accounts.get((subject.namespace, account)) is False):
                continue
            why = (
                "sets automountServiceAccountToken: true"
                if pod_value is True
                else (f"leaves automountServiceAccountToken unset and service account {account} does not turn it off")
            )
            yield (
                f"{subject.label}: {where} {why}; its pods would carry a Kubernetes API token they never use",
                subject.urn,
            )


platform_pods_without_token = stack_policy(
    name="platform-pods-mount-no-api-token",
    description=(
        "The platform's own pods mount no Kubernetes API token (automountServiceAccountToken: false on the pod, or "
        "unset there and false on its service account): none of them calls the API, and a token in a predictor "
        "that runs downloaded model code is a credential for whatever RBAC grants its service account."
    ),
    remediation=(
        "Keep automountServiceAccountToken: false on the pod specs of components/serving/objects.py, "
        "components/model_sync.py and components/gateway/store.py (and on their service accounts)."
    ),
    check=_check_tokens,
)

POLICIES = [platform_pods_restricted, platform_pods_without_token]
