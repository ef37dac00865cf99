"""NamespaceIsolation: the NetworkPolicies and Pod Security Admission labels of the operator
namespaces (monitoring, KEDA, KServe, cert-manager, Envoy Gateway, Envoy AI Gateway), applied once
their charts have created them. The serving, model-sync and gateway namespaces are isolated by the
components that own them; the builders are in `isolation.py`.

What each namespace admits, and why:
- every operator namespace: its own pods, and the control plane on its webhook / aggregated-API
  ports (the ports below, read from each pinned chart);
- monitoring, in addition: KEDA's operator on Prometheus' port (it evaluates the triggers);
- the exporters' namespace (node-exporter and the DCGM exporter, the only privileged one): nothing
  but Prometheus, on the exporters' metrics ports;
- envoy-ai-gateway-system, in addition: Envoy Gateway's namespace on the extension server
  (1063) and the rate-limit xDS port (18002) (ai-gateway-helm v1.1.0 values.yaml controller.service);
- envoy-gateway-system: the rate-limit service admits only this Gateway's Envoy proxies on its
  gRPC port; its HTTP/JSON and debug ports are closed. The rest of that namespace (the Envoy
  proxies behind the NLB, the controller's xDS) is not restricted here (README, "Security").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from . import isolation
from .isolation import PodSecurityLevel, namespace_peer
from .naming import type_token
from .observability.objects import DCGM_PORT, NODE_EXPORTER_PORT

# Ports the control plane calls, per pinned chart:
# cert-manager v1.21.1 values.yaml webhook.securePort 10250 (the webhook Deployment's container port);
CERT_MANAGER_WEBHOOK_PORTS = [10250]
# kserve-resources v0.20.0 files/kserve/resources.yaml: the controller's webhook-server port 9443;
KSERVE_WEBHOOK_PORTS = [9443]
# keda-2.20.2 values.yaml: service.portHttpsTarget 6443 (metrics API server), webhooks.port 9443;
KEDA_API_PORTS = [6443, 9443]
# ai-gateway-helm v1.1.0 values.yaml controller.mutatingWebhook.port 9443;
AI_GATEWAY_WEBHOOK_PORTS = [9443]
AI_GATEWAY_FROM_ENVOY_GATEWAY_PORTS = [1063, 18002]
# kube-prometheus-stack-88.5.3 values.yaml prometheusOperator.tls.internalPort 10250 (its admission
# webhook), on the operator's pods (templates/prometheus-operator/_prometheus-operator.tpl labels).
PROMETHEUS_OPERATOR_WEBHOOK_PORTS = [10250]
PROMETHEUS_OPERATOR_POD_LABELS = {"app": "kube-prometheus-stack-operator"}
PROMETHEUS_PORT = 9090
# keda-2.20.2 templates/manager/deployment.yaml: the operator's pod label `app: keda-operator`.
KEDA_OPERATOR_POD_LABELS = {"app": "keda-operator"}
# Envoy Gateway v1.9.0 internal/infrastructure/kubernetes/ratelimit/resource.go: InfraGRPCPort.
RATE_LIMIT_GRPC_PORT = 8081


@dataclass(frozen=True)
class IsolatedNamespace:
    name: str
    # Pod Security Admission level enforced (warn and audit are always restricted).
    enforce: PodSecurityLevel
    policies: list[dict[str, Any]]


@dataclass(frozen=True)
class NamespaceIsolationArgs:
    kubernetes_version: str
    monitoring_namespace: str
    # Where node-exporter and the DCGM exporter run (observability.exportersNamespace).
    exporters_namespace: str
    keda_namespace: str
    kserve_namespace: str
    cert_manager_namespace: str
    envoy_gateway_namespace: str
    ai_gateway_namespace: str
    # The gateway's own namespace (its policies are the Gateway component's): labelled here.
    gateway_namespace: str
    # The Envoy proxies' pod labels (Gateway), peers of the rate-limit service.
    envoy_pod_labels: dict[str, str]
    rate_limit_pod_labels: dict[str, str]
    prometheus_pod_labels: dict[str, str]
    provider: k8s.Provider
    # The components whose charts create these namespaces.
    depends_on: list[pulumi.Resource]


def operator_namespaces(args: NamespaceIsolationArgs) -> list[IsolatedNamespace]:
    """Every namespace this component labels, with what it enforces and admits (pure, for tests
    and policies)."""
    monitoring, exporters = args.monitoring_namespace, args.exporters_namespace
    return [
        # Prometheus, Grafana, Alertmanager, the operator and kube-state-metrics: no host access, so
        # baseline admits them (the chart's host-level pods run in the exporters' namespace).
        IsolatedNamespace(
            monitoring,
            "baseline",
            [
                isolation.default_deny_ingress(monitoring),
                isolation.same_namespace_ingress(monitoring),
                isolation.api_server_ingress(
                    monitoring,
                    "operator-webhook",
                    PROMETHEUS_OPERATOR_WEBHOOK_PORTS,
                    {"matchLabels": PROMETHEUS_OPERATOR_POD_LABELS},
                ),
                isolation.peer_ingress(
                    monitoring,
                    "prometheus-from-keda",
                    {"matchLabels": args.prometheus_pod_labels},
                    [namespace_peer(args.keda_namespace, KEDA_OPERATOR_POD_LABELS)],
                    [PROMETHEUS_PORT],
                ),
            ],
        ),
        # node-exporter (hostNetwork, hostPID, hostPath) and the DCGM exporter (hostPath to the
        # kubelet's pod-resources socket, as root): no Pod Security level short of privileged admits
        # them, so nothing else runs here, and only Prometheus may call them.
        IsolatedNamespace(
            exporters,
            "privileged",
            [
                isolation.default_deny_ingress(exporters),
                isolation.peer_ingress(
                    exporters,
                    "prometheus",
                    {},
                    [namespace_peer(monitoring, args.prometheus_pod_labels)],
                    [DCGM_PORT, NODE_EXPORTER_PORT],
                ),
            ],
        ),
        IsolatedNamespace(
            args.keda_namespace, "baseline", isolation.operator_namespace_policies(args.keda_namespace, KEDA_API_PORTS)
        ),
        IsolatedNamespace(
            args.kserve_namespace,
            "baseline",
            isolation.operator_namespace_policies(args.kserve_namespace, KSERVE_WEBHOOK_PORTS),
        ),
        IsolatedNamespace(
            args.cert_manager_namespace,
            "baseline",
            isolation.operator_namespace_policies(args.cert_manager_namespace, CERT_MANAGER_WEBHOOK_PORTS),
        ),
        IsolatedNamespace(
            args.ai_gateway_namespace,
            "baseline",
            [
                *isolation.operator_namespace_policies(args.ai_gateway_namespace, AI_GATEWAY_WEBHOOK_PORTS),
                isolation.peer_ingress(
                    args.ai_gateway_namespace,
                    "from-envoy-gateway",
                    {},
                    [
                        {
                            "namespaceSelector": {
                                "matchLabels": {"kubernetes.io/metadata.name": args.envoy_gateway_namespace}
                            }
                        }
                    ],
                    AI_GATEWAY_FROM_ENVOY_GATEWAY_PORTS,
                ),
            ],
        ),
        # Redis and Sentinel run restricted (components/pod_security.py).
        IsolatedNamespace(args.gateway_namespace, "restricted", []),
        IsolatedNamespace(
            args.envoy_gateway_namespace,
            "baseline",
            [
                isolation.peer_ingress(
                    args.envoy_gateway_namespace,
                    "rate-limit",
                    {"matchLabels": args.rate_limit_pod_labels},
                    [namespace_peer(args.envoy_gateway_namespace, args.envoy_pod_labels)],
                    [RATE_LIMIT_GRPC_PORT],
                )
            ],
        ),
    ]


class NamespaceIsolation(pulumi.ComponentResource):
    def __init__(self, name: str, args: NamespaceIsolationArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("isolation", "NamespaceIsolation"), name, None, opts)
        after = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on)
        for namespace in operator_namespaces(args):
            # A patch (server-side apply) adds the labels to a namespace another owner created.
            k8s.core.v1.NamespacePatch(
                f"{name}-{namespace.name}",
                metadata={
                    "name": namespace.name,
                    "labels": isolation.pod_security_labels(namespace.enforce, args.kubernetes_version),
                },
                opts=after,
            )
            for policy in namespace.policies:
                metadata = policy["metadata"]
                k8s.networking.v1.NetworkPolicy(
                    f"{name}-{namespace.name}-{metadata['name']}", metadata=metadata, spec=policy["spec"], opts=after
                )
        self.register_outputs({})
