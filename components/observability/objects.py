"""Observability's Kubernetes objects and chart values, as pure functions of the settings
(tests and policies read exactly what the component applies); the rules and dashboards have
their own modules."""

from __future__ import annotations

import json
from typing import Any

from contract import names, signals
from contract.gpu import GPU_TAINT, POOL_LABEL
from contract.manifests.monitored import MonitoredModel
from contract.settings.observability import ObservabilitySettings, Receiver

from ..serving.objects import METRICS_PORT_NAME

STACK_CHART = "kube-prometheus-stack"
STACK_REPOSITORY = "https://prometheus-community.github.io/helm-charts"
STACK_VERSION = "88.5.3"
# The operator release the chart ships (its Chart.yaml appVersion), whose CRDs it installs; the
# CRD test compares its minor with ../shared/crds/README.md. Its five CRD schemas equal the shared
# v0.93.0 ones (compared at kube-prometheus-stack-88.5.3, charts/crds/crds).
STACK_OPERATOR_VERSION = "v0.93.1"
DCGM_CHART = "dcgm-exporter"
DCGM_REPOSITORY = "https://nvidia.github.io/dcgm-exporter/helm-charts"
DCGM_VERSION = "4.8.3"
# The exporters' metrics ports, which Prometheus reaches across namespaces: the DCGM exporter's
# (NVIDIA/dcgm-exporter deployment/values.yaml service.port / address ":9400") and node-exporter's
# (prometheus-node-exporter-4.56.1, the subchart kube-prometheus-stack-88.5.3 pins: values.yaml
# service.port 9100; it runs on the host network, where NetworkPolicies do not reach).
DCGM_PORT = 9400
NODE_EXPORTER_PORT = 9100

# Labels prometheus-operator puts on every Prometheus pod (pkg/prometheus/statefulset.go), so
# NetworkPolicies can admit the scraper.
PROMETHEUS_POD_LABELS = {"app.kubernetes.io/name": "prometheus", "app.kubernetes.io/managed-by": "prometheus-operator"}
# Short fixed names, so in-cluster addresses are known before anything is deployed.
STACK_FULLNAME = "kps"
PROMETHEUS_SERVICE_ACCOUNT = "prometheus"
GRAFANA_ADMIN_SECRET = "grafana-admin"
ALERTMANAGER_CONFIG_SECRET = "alertmanager-platform"
STORAGE_CLASS = "monitoring-gp3"
# Grafana's dashboard sidecar loads every ConfigMap carrying this label.
SIDECAR_LABEL = "grafana_dashboard"
# Prometheus deletes the oldest blocks past this share of its volume, before the disk fills.
RETENTION_SIZE_SHARE = 0.85


def prometheus_url(namespace: str) -> str:
    """The in-cluster Prometheus that KEDA queries."""
    return f"http://{STACK_FULLNAME}-prometheus.{namespace}.svc:9090"


def _interval(obs: ObservabilitySettings) -> str:
    return f"{obs.scrape_interval_seconds}s"


def _volume(gib: int) -> dict[str, Any]:
    return {
        "volumeClaimTemplate": {
            "spec": {
                "storageClassName": STORAGE_CLASS,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": f"{gib}Gi"}},
            }
        }
    }


# The prometheus-operator selectors of what Prometheus loads (kube-prometheus-stack-88.5.3 values.yaml
# prometheus.prometheusSpec.*NamespaceSelector; `{}` there means every namespace).
MONITOR_NAMESPACE_SELECTORS = (
    "podMonitorNamespaceSelector",
    "serviceMonitorNamespaceSelector",
    "ruleNamespaceSelector",
    "probeNamespaceSelector",
    "scrapeConfigNamespaceSelector",
)


def monitored_namespaces_selector(namespaces: list[str]) -> dict[str, Any]:
    """Namespaces by the name Kubernetes sets (`kubernetes.io/metadata.name`), which no label
    edit can fake."""
    return {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(namespaces)}]
    }


def stack_values(
    obs: ObservabilitySettings,
    remote_write: list[dict[str, Any]] | None = None,
    monitored_namespaces: list[str] | None = None,
) -> dict[str, Any]:
    """kube-prometheus-stack values; Prometheus loads monitors and rules from the monitoring
    namespace and `monitored_namespaces` only (the predictors' PodMonitors live beside them), so
    a workload elsewhere cannot add scrape targets, silence alerts with rules or relabel series."""
    p = obs.prometheus
    # The exporters' namespace holds node-exporter's ServiceMonitor: the subchart renders it in its
    # namespaceOverride (prometheus-node-exporter-4.56.1 templates/_helpers.tpl "monitor-namespace").
    selector = monitored_namespaces_selector([obs.namespace, obs.exporters_namespace, *(monitored_namespaces or [])])
    prometheus_spec: dict[str, Any] = {
        "scrapeInterval": _interval(obs),
        "evaluationInterval": _interval(obs),
        "retention": p.retention,
        "retentionSize": f"{int(p.volume_gib * RETENTION_SIZE_SHARE)}GB",
        # Select the platform's monitors and rules whatever their labels (not only this release's).
        "podMonitorSelectorNilUsesHelmValues": False,
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "ruleSelectorNilUsesHelmValues": False,
        "probeSelectorNilUsesHelmValues": False,
        "storageSpec": _volume(p.volume_gib),
        **{key: selector for key in MONITOR_NAMESPACE_SELECTORS},
    }
    if remote_write:
        prometheus_spec["remoteWrite"] = remote_write
    return {
        "fullnameOverride": STACK_FULLNAME,
        "crds": {"enabled": True},
        "prometheus": {
            # A fixed name: the Pod Identity association for remote write refers to it.
            "serviceAccount": {"create": True, "name": PROMETHEUS_SERVICE_ACCOUNT},
            "prometheusSpec": prometheus_spec,
        },
        "alertmanager": {
            "alertmanagerSpec": {
                "useExistingSecret": True,
                "configSecret": ALERTMANAGER_CONFIG_SECRET,
                "storage": _volume(5),
            }
        },
        "grafana": {
            "admin": {"existingSecret": GRAFANA_ADMIN_SECRET, "userKey": "admin-user", "passwordKey": "admin-password"},
            **grafana_access(obs),
        },
        # Node labels are dropped by default; the GPU pool label groups GPUs by NodePool.
        "kube-state-metrics": {"metricLabelsAllowlist": [f"nodes=[{POOL_LABEL}]"]},
        # node-exporter runs on the host (network, PID, root filesystem): in the exporters' namespace,
        # so this one can enforce baseline (kube-prometheus-stack-88.5.3 values.yaml
        # prometheus-node-exporter.namespaceOverride, "for multi-namespace deployments in combined charts").
        "prometheus-node-exporter": {"namespaceOverride": obs.exporters_namespace},
        # EKS runs these control-plane parts itself; there is nothing to scrape.
        "kubeControllerManager": {"enabled": False},
        "kubeScheduler": {"enabled": False},
        "kubeEtcd": {"enabled": False},
        "kubeProxy": {"enabled": False},
    }


def grafana_access(obs: ObservabilitySettings) -> dict[str, Any]:
    """What Grafana's sidecars may read: ConfigMaps of the monitoring namespace only.

    The chart's sidecars get/list/watch ConfigMaps *and Secrets* through a ClusterRole unless
    `rbac.namespaced` is true, which renders a Role in Grafana's own namespace instead
    (grafana-community/helm-charts grafana-12.11.1, the subchart kube-prometheus-stack-88.5.3
    pins: templates/clusterrole.yaml, templates/role.yaml). kube-prometheus-stack's default
    dashboard search is `ALL` namespaces (its values.yaml, grafana.sidecar.dashboards); every
    platform dashboard is a ConfigMap in this namespace, so the search stays here and reads no
    Secret (`resource: configmap`).
    """
    own_namespace = {"searchNamespace": obs.namespace, "resource": "configmap"}
    return {
        "rbac": {"namespaced": True},
        "sidecar": {
            "dashboards": {"enabled": True, "label": SIDECAR_LABEL, "labelValue": "1", **own_namespace},
            "datasources": own_namespace,
        },
    }


def dcgm_values() -> dict[str, Any]:
    """DCGM exporter values: a DaemonSet on GPU nodes only (every GPU node carries POOL_LABEL)."""
    return {
        "fullnameOverride": "dcgm-exporter",
        # The platform's own ServiceMonitor (schema-checked, node label, fixed job) scrapes it.
        "serviceMonitor": {"enabled": False},
        "tolerations": [{**GPU_TAINT, "operator": "Equal"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": POOL_LABEL, "operator": "Exists"}]}]
                }
            }
        },
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": DCGM_SECURITY_CONTEXT,
    }


# The chart's default container securityContext adds SYS_ADMIN, "Required for profiling metrics
# (DCGM_FI_PROF_*)" (NVIDIA/dcgm-exporter deployment/values.yaml, chart 4.8.2 at d5e5f51; 4.8.3 is
# not in the snapshot read). The platform reads DCGM_FI_DEV_* only (contract/signals.py Dcgm), and
# without the capability the exporter skips profiling fields and serves the rest
# (pkg/cmd/app.go queryDCPMetrics: "Not collecting DCP metrics"; internal/pkg/capabilities
# WarnIfMissingProfilingCapabilities only warns). It stays root: the per-pod labels
# model_gpu_utilization matches on come from the kubelet's pod-resources socket (the chart's
# hostPath volume), which the kubelet creates owned by root.
DCGM_SECURITY_CONTEXT = {
    "runAsNonRoot": False,
    "runAsUser": 0,
    "capabilities": {"drop": ["ALL"]},
    "allowPrivilegeEscalation": False,
}


def dcgm_service_monitor_spec(obs: ObservabilitySettings) -> dict[str, Any]:
    return {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "dcgm-exporter"}},
        # The exporter runs in the exporters' namespace; this monitor stays with Prometheus.
        "namespaceSelector": {"matchNames": [obs.exporters_namespace]},
        "endpoints": [
            {
                "port": "metrics",
                "path": "/metrics",
                "interval": _interval(obs),
                # Keep the exporter's namespace/pod labels: they name the workload using each GPU.
                "honorLabels": True,
                "relabelings": [
                    {
                        "action": "replace",
                        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                        "targetLabel": signals.NODE_LABEL,
                    },
                    {"action": "replace", "targetLabel": "job", "replacement": signals.DCGM_JOB},
                ],
            }
        ],
    }


def pod_monitor_spec(m: MonitoredModel, obs: ObservabilitySettings) -> dict[str, Any]:
    """Scrape every predictor pod of one model on its vLLM port."""
    return {
        "selector": {"matchLabels": {names.MODEL_LABEL: m.name}},
        "namespaceSelector": {"matchNames": [m.workload.namespace]},
        # The metrics-only sidecar's port: Prometheus never reaches vLLM's API port.
        "podMetricsEndpoints": [{"port": METRICS_PORT_NAME, "path": names.METRICS_PATH, "interval": _interval(obs)}],
    }


def alertmanager_config(receivers: list[Receiver]) -> dict[str, Any]:
    """Every alert goes to each receiver whose severities match; with none, alerts stay in the UI."""
    return {
        "route": {
            "receiver": "null",
            "group_by": ["alertname", "model_name", "namespace"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": [
                {"receiver": r.name, "matchers": [f'severity=~"{"|".join(r.severities)}"'], "continue": True}
                for r in receivers
            ],
        },
        "receivers": [
            {"name": "null"},
            *({"name": r.name, "webhook_configs": [{"url": r.webhook_url, "send_resolved": True}]} for r in receivers),
        ],
    }


def dcgm_service_monitor(obs: ObservabilitySettings) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "dcgm-exporter", "namespace": obs.namespace, "labels": names.PART_OF},
        "spec": dcgm_service_monitor_spec(obs),
    }


def pod_monitor(m: MonitoredModel, obs: ObservabilitySettings) -> dict[str, Any]:
    """One PodMonitor per predictor, beside it in the serving namespace."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {
            "name": names.deployment_name(m.model),
            "namespace": m.workload.namespace,
            "labels": {**names.PART_OF, names.MODEL_LABEL: m.name},
        },
        "spec": pod_monitor_spec(m, obs),
    }


def prometheus_rule(groups: list[dict[str, Any]], obs: ObservabilitySettings) -> dict[str, Any]:
    """The platform's one PrometheusRule (`groups` from `rules.rule_groups`)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "inference-platform", "namespace": obs.namespace, "labels": names.PART_OF},
        "spec": {"groups": groups},
    }


def dashboard_config_map(key: str, dashboard: dict[str, Any], obs: ObservabilitySettings) -> dict[str, Any]:
    """A Grafana dashboard as the ConfigMap Grafana's sidecar loads (`key` names both)."""
    return {
        "metadata": {
            "name": f"dashboard-{key}",
            "namespace": obs.namespace,
            "labels": {**names.PART_OF, SIDECAR_LABEL: "1"},
        },
        "data": {f"{key}.json": json.dumps(dashboard, indent=1, sort_keys=True)},
    }
