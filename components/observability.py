"""Observability: kube-prometheus-stack (Prometheus, Alertmanager, Grafana), the NVIDIA DCGM
exporter on GPU nodes, a PodMonitor per predictor, the platform's rules and dashboards, and
optionally remote write to Amazon Managed Service for Prometheus.

The values and object specs are pure functions, so tests read exactly what is applied.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pulumi_random as random
import yaml
from pulumi.runtime.config import is_config_secret

from contract import names, signals
from contract.gpu import GPU_TAINT, POOL_LABEL
from contract.settings import NAMESPACE, StackSettings
from contract.settings.observability import ObservabilitySettings, Receiver

from . import iam
from .dashboards import SIDECAR_LABEL, dashboards
from .naming import type_token
from .rules import MonitoredModel, monitored_models, rule_groups

STACK_CHART = "kube-prometheus-stack"
STACK_REPOSITORY = "https://prometheus-community.github.io/helm-charts"
STACK_VERSION = "88.0.0"  # ships prometheus-operator v0.93.0, the CRDs in ../shared/crds
DCGM_CHART = "dcgm-exporter"
DCGM_REPOSITORY = "https://nvidia.github.io/dcgm-exporter/helm-charts"
DCGM_VERSION = "4.8.3"

# Short fixed names, so in-cluster addresses are known before anything is deployed.
STACK_FULLNAME = "kps"
PROMETHEUS_SERVICE_ACCOUNT = "prometheus"
GRAFANA_ADMIN_SECRET = "grafana-admin"
ALERTMANAGER_CONFIG_SECRET = "alertmanager-platform"
STORAGE_CLASS = "monitoring-gp3"
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


def stack_values(obs: ObservabilitySettings, remote_write: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """kube-prometheus-stack values."""
    p = obs.prometheus
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
            "sidecar": {
                "dashboards": {"enabled": True, "label": SIDECAR_LABEL, "labelValue": "1", "searchNamespace": "ALL"}
            },
        },
        # Node labels are dropped by default; the GPU pool label groups GPUs by NodePool.
        "kube-state-metrics": {"metricLabelsAllowlist": [f"nodes=[{POOL_LABEL}]"]},
        # EKS runs these control-plane parts itself; there is nothing to scrape.
        "kubeControllerManager": {"enabled": False},
        "kubeScheduler": {"enabled": False},
        "kubeEtcd": {"enabled": False},
        "kubeProxy": {"enabled": False},
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
    }


def dcgm_service_monitor_spec(obs: ObservabilitySettings) -> dict[str, Any]:
    return {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "dcgm-exporter"}},
        "namespaceSelector": {"matchNames": [obs.namespace]},
        "endpoints": [
            {
                "port": "metrics",
                "path": "/metrics",
                "interval": _interval(obs),
                # Keep the exporter's namespace/pod labels: they name the workload using each GPU.
                "honorLabels": True,
                "relabelings": [
                    {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                     "targetLabel": signals.NODE_LABEL},
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
        "podMetricsEndpoints": [
            {"port": names.PORT_NAME, "path": names.METRICS_PATH, "interval": _interval(obs)}
        ],
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


def plaintext_webhook_problems(obs: ObservabilitySettings, is_secret: Callable[[str], bool]) -> list[str]:
    """Webhook URLs carry credentials: refuse them unless the config value is a Pulumi secret."""
    if not obs.alertmanager.receivers or is_secret(f"{NAMESPACE}:observability"):
        return []
    return [
        f"{NAMESPACE}:observability.alertmanager.receivers[{i}].webhookUrl must be set with "
        f"`pulumi config set --secret --path 'observability.alertmanager.receivers[{i}].webhookUrl' ...`"
        for i in range(len(obs.alertmanager.receivers))
    ]


@dataclass(frozen=True)
class ObservabilityArgs:
    settings: StackSettings
    cluster_name: pulumi.Input[str]
    provider: k8s.Provider
    tags: dict[str, str]
    # The predictors' namespace: PodMonitors live there.
    serving_namespace: k8s.core.v1.Namespace


class Observability(pulumi.ComponentResource):
    namespace: str
    prometheus_url: str
    grafana_admin_password: pulumi.Output[str]
    remote_write_url: pulumi.Output[str] | None

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("observability", "Observability"), name, None, opts)
        s, obs = args.settings, args.settings.observability
        problems = plaintext_webhook_problems(obs, is_config_secret)
        if problems:
            raise pulumi.RunError("\n".join(problems))
        self.namespace = obs.namespace
        self.prometheus_url = prometheus_url(obs.namespace)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)

        namespace = k8s.core.v1.Namespace(f"{name}-ns", metadata={"name": obs.namespace, "labels": names.PART_OF},
                                          opts=k8s_opts)
        in_namespace = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace])
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-gp3",
            metadata={"name": STORAGE_CLASS, "labels": names.PART_OF},
            # Auto Mode ships its own EBS CSI driver; otherwise the upstream add-on's provisioner.
            provisioner="ebs.csi.eks.amazonaws.com" if s.cluster.auto_mode else "ebs.csi.aws.com",
            parameters={"type": "gp3", "encrypted": "true"},
            volume_binding_mode="WaitForFirstConsumer",
            allow_volume_expansion=True,
            reclaim_policy="Retain",
            opts=k8s_opts,
        )
        password = random.RandomPassword(f"{name}-grafana-password", length=32, special=False,
                                         opts=pulumi.ResourceOptions(parent=self))
        self.grafana_admin_password = pulumi.Output.secret(password.result)
        grafana_secret = k8s.core.v1.Secret(
            f"{name}-grafana-admin",
            metadata={"name": GRAFANA_ADMIN_SECRET, "namespace": obs.namespace, "labels": names.PART_OF},
            string_data={"admin-user": "admin", "admin-password": self.grafana_admin_password},
            opts=in_namespace,
        )
        alertmanager_secret = k8s.core.v1.Secret(
            f"{name}-alertmanager",
            metadata={"name": ALERTMANAGER_CONFIG_SECRET, "namespace": obs.namespace, "labels": names.PART_OF},
            # Webhook URLs are credentials: the rendered config stays a Pulumi secret.
            string_data={
                "alertmanager.yaml": pulumi.Output.secret(
                    yaml.safe_dump(alertmanager_config(obs.alertmanager.receivers), sort_keys=False)
                )
            },
            opts=in_namespace,
        )

        remote_write, self.remote_write_url, writer = None, None, []
        if obs.managed_prometheus.enabled:
            self.remote_write_url, writer = self._managed_prometheus(name, args)
            remote_write = [{"url": self.remote_write_url, "sigv4": {"region": s.network.region}}]

        stack = k8s.helm.v3.Release(
            f"{name}-stack",
            chart=STACK_CHART,
            version=STACK_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=STACK_REPOSITORY),
            namespace=obs.namespace,
            values=stack_values(obs, remote_write),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                depends_on=[namespace, storage_class, grafana_secret, alertmanager_secret, *writer],
            ),
        )
        k8s.helm.v3.Release(
            f"{name}-dcgm",
            chart=DCGM_CHART,
            version=DCGM_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=DCGM_REPOSITORY),
            namespace=obs.namespace,
            values=dcgm_values(),
            opts=in_namespace,
        )

        # Custom resources need the operator's CRDs, which the stack release installs.
        after_stack = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[stack])
        k8s.apiextensions.CustomResource(
            f"{name}-dcgm-monitor",
            api_version="monitoring.coreos.com/v1",
            kind="ServiceMonitor",
            metadata={"name": "dcgm-exporter", "namespace": obs.namespace, "labels": names.PART_OF},
            spec=dcgm_service_monitor_spec(obs),
            opts=after_stack,
        )
        predictors_opts = pulumi.ResourceOptions(
            parent=self, provider=args.provider, depends_on=[stack, args.serving_namespace]
        )
        for m in monitored_models(s):
            k8s.apiextensions.CustomResource(
                f"{name}-{m.name}",
                api_version="monitoring.coreos.com/v1",
                kind="PodMonitor",
                metadata={"name": names.deployment_name(m.model), "namespace": m.workload.namespace,
                          "labels": {**names.PART_OF, names.MODEL_LABEL: m.name}},
                spec=pod_monitor_spec(m, obs),
                opts=predictors_opts,
            )
        k8s.apiextensions.CustomResource(
            f"{name}-rules",
            api_version="monitoring.coreos.com/v1",
            kind="PrometheusRule",
            metadata={"name": "inference-platform", "namespace": obs.namespace, "labels": names.PART_OF},
            spec={"groups": rule_groups(s)},
            opts=after_stack,
        )
        for key, dashboard in dashboards(s).items():
            k8s.core.v1.ConfigMap(
                f"{name}-dashboard-{key}",
                metadata={"name": f"dashboard-{key}", "namespace": obs.namespace,
                          "labels": {**names.PART_OF, SIDECAR_LABEL: "1"}},
                data={f"{key}.json": json.dumps(dashboard, indent=1, sort_keys=True)},
                opts=in_namespace,
            )
        self.register_outputs({"prometheusUrl": self.prometheus_url, "grafanaAdminPassword": self.grafana_admin_password})

    def _managed_prometheus(
        self, name: str, args: ObservabilityArgs
    ) -> tuple[pulumi.Output[str], list[pulumi.Resource]]:
        """An AMP workspace and the right for the Prometheus service account to write to it."""
        aws_opts = pulumi.ResourceOptions(parent=self)
        workspace = aws.amp.Workspace(f"{name}-amp", alias=name, tags=args.tags, opts=aws_opts)
        role = aws.iam.Role(
            f"{name}-amp-writer",
            assume_role_policy=iam.pod_identity_trust(),
            description="Prometheus remote write to Amazon Managed Service for Prometheus",
            tags=args.tags,
            opts=aws_opts,
        )
        aws.iam.RolePolicyAttachment(
            f"{name}-amp-writer",
            role=role.name,
            policy_arn="arn:aws:iam::aws:policy/AmazonPrometheusRemoteWriteAccess",
            opts=pulumi.ResourceOptions(parent=role),
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-amp-writer",
            cluster_name=args.cluster_name,
            namespace=args.settings.observability.namespace,
            service_account=PROMETHEUS_SERVICE_ACCOUNT,
            role_arn=role.arn,
            tags=args.tags,
            opts=aws_opts,
        )
        url = workspace.prometheus_endpoint.apply(lambda endpoint: f"{endpoint.rstrip('/')}/api/v1/remote_write")
        return url, [association]
