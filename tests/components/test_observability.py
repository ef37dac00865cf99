"""Observability: pinned charts, retention and storage from config, Grafana's admin password
a secret, Alertmanager receivers from config, DCGM only on GPU nodes, a PodMonitor per
predictor, and Amazon Managed Service for Prometheus when the stack asks for it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from components.observability import objects as obs_module
from components.observability.objects import alertmanager_config, prometheus_url
from contract.gpu import GPU_TAINT, POOL_LABEL
from contract.settings.observability import Receiver
from contract.signals import Dcgm
from tests.harness import ProgramFailed, StackRun, run_program, stack_config
from tests.k8s_schemas import validate


def release(run: StackRun, chart: str) -> dict[str, Any]:
    (found,) = [r.inputs for r in run.of_type("kubernetes:helm.sh/v3:Release") if r.inputs.get("chart") == chart]
    return found


def test_kube_prometheus_stack_is_pinned_to_the_release_shipping_operator_v0_93(stack: StackRun) -> None:
    stack_release = release(stack, "kube-prometheus-stack")
    # kube-prometheus-stack-88.5.3 Chart.yaml: appVersion v0.93.1 (CRD schemas equal to v0.93.0's).
    assert stack_release["version"] == "88.5.3"
    assert stack_release["repositoryOpts"]["repo"] == "https://prometheus-community.github.io/helm-charts"


def test_dcgm_exporter_chart_is_pinned(stack: StackRun) -> None:
    dcgm = release(stack, "dcgm-exporter")
    assert (dcgm["version"], dcgm["repositoryOpts"]["repo"]) == (
        "4.8.3",
        "https://nvidia.github.io/dcgm-exporter/helm-charts",
    )


@pytest.mark.parametrize(("stack_name", "retention", "volume"), [("dev", "3d", "20Gi"), ("prod", "30d", "200Gi")])
def test_retention_and_storage_come_from_config(
    stack_name: str, retention: str, volume: str, request: pytest.FixtureRequest
) -> None:
    run: StackRun = request.getfixturevalue(stack_name)
    spec = release(run, "kube-prometheus-stack")["values"]["prometheus"]["prometheusSpec"]
    assert spec["retention"] == retention
    assert spec["storageSpec"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"] == volume
    assert spec["scrapeInterval"] == "15s"


def test_grafana_admin_password_is_random_and_exported_as_a_secret(stack: StackRun) -> None:
    assert stack.of_type("random:index/randomPassword:RandomPassword")
    assert "grafanaAdminPassword" in stack.secret_outputs
    grafana = release(stack, "kube-prometheus-stack")["values"]["grafana"]
    assert grafana["admin"]["existingSecret"] == obs_module.GRAFANA_ADMIN_SECRET
    assert "adminPassword" not in grafana  # never a plain chart value


def test_grafana_rbac_is_a_role_in_the_monitoring_namespace_not_a_cluster_role(stack: StackRun) -> None:
    """grafana-12.11.1 templates/clusterrole.yaml renders a ClusterRole reading every Secret in the
    cluster unless rbac.namespaced; templates/role.yaml then renders a Role in Grafana's namespace."""
    grafana = release(stack, "kube-prometheus-stack")["values"]["grafana"]
    assert grafana["rbac"]["namespaced"] is True
    assert not grafana["rbac"].get("namespaces")  # no extra namespaces get the Role
    assert not grafana["rbac"].get("extraClusterRoleRules")


@pytest.mark.parametrize("sidecar", ["dashboards", "datasources"])
def test_grafana_sidecars_read_only_configmaps_of_the_monitoring_namespace(stack: StackRun, sidecar: str) -> None:
    values = release(stack, "kube-prometheus-stack")["values"]
    found = values["grafana"]["sidecar"][sidecar]
    assert found["searchNamespace"] == "monitoring" != "ALL"
    assert found["resource"] == "configmap"
    # Every dashboard the program ships is where the sidecar looks.
    dashboards = [r for r in stack.of_type("kubernetes:core/v1:ConfigMap") if "-obs-dashboard-" in r.name]
    assert dashboards and {d.inputs["metadata"]["namespace"] for d in dashboards} == {"monitoring"}


def test_dev_alertmanager_has_no_receivers(dev: StackRun) -> None:
    (secret,) = [
        r.inputs
        for r in dev.of_kind("v1", "Secret")
        if r.inputs["metadata"]["name"] == obs_module.ALERTMANAGER_CONFIG_SECRET
    ]
    config = yaml.safe_load(secret["stringData"]["alertmanager.yaml"])
    assert config["receivers"] == [{"name": "null"}] and config["route"]["routes"] == []


def test_each_receiver_gets_the_alerts_of_its_severities() -> None:
    pager = Receiver(name="pager", webhook_url="https://hooks.example.com/T0", severities=["critical"])
    config = alertmanager_config([pager])
    assert config["route"]["routes"] == [{"receiver": "pager", "matchers": ['severity=~"critical"'], "continue": True}]
    assert config["receivers"][1]["webhook_configs"] == [{"url": "https://hooks.example.com/T0", "send_resolved": True}]


def test_dcgm_exporter_runs_only_on_gpu_nodes_and_tolerates_their_taint(dev: StackRun) -> None:
    values = release(dev, "dcgm-exporter")["values"]
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": POOL_LABEL, "operator": "Exists"}]}]
    assert values["tolerations"] == [{**GPU_TAINT, "operator": "Equal"}]


def test_dcgm_exporter_adds_no_capability_and_reads_no_profiling_metric(stack: StackRun) -> None:
    """The chart's default adds SYS_ADMIN for DCGM_FI_PROF_* only (NVIDIA/dcgm-exporter
    deployment/values.yaml); the platform reads DCGM_FI_DEV_* fields, which need none."""
    context = release(stack, "dcgm-exporter")["values"]["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"]} and context["allowPrivilegeEscalation"] is False
    fields = [v for k, v in vars(Dcgm).items() if k.isupper()]
    assert fields and all(f.startswith("DCGM_FI_DEV_") for f in fields)


def test_dcgm_series_carry_the_node_name_and_a_fixed_job(dev: StackRun) -> None:
    (monitor,) = [r.inputs for r in dev.of_kind("monitoring.coreos.com/v1", "ServiceMonitor")]
    relabel = monitor["spec"]["endpoints"][0]["relabelings"]
    assert {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"} in relabel
    assert {"action": "replace", "targetLabel": "job", "replacement": "dcgm-exporter"} in relabel


def test_every_predictor_has_a_pod_monitor_on_its_metrics_port(prod: StackRun) -> None:
    monitors = {
        r.inputs["spec"]["selector"]["matchLabels"]["inference-platform/model"]: r.inputs
        for r in prod.of_kind("monitoring.coreos.com/v1", "PodMonitor")
    }
    assert sorted(monitors) == ["qwen25-14b-awq", "qwen25-7b-awq"]
    for monitor in monitors.values():
        assert monitor["metadata"]["namespace"] == "inference"
        assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "15s"}]


def test_platform_rules_are_one_prometheus_rule_with_recording_and_alert_groups(stack: StackRun) -> None:
    (rule,) = [r.inputs for r in stack.of_kind("monitoring.coreos.com/v1", "PrometheusRule")]
    assert [g["name"] for g in rule["spec"]["groups"]] == ["inference-recording", "inference-alerts", "gpu-alerts"]


def test_prometheus_selects_monitors_and_rules_whatever_their_labels(dev: StackRun) -> None:
    spec = release(dev, "kube-prometheus-stack")["values"]["prometheus"]["prometheusSpec"]
    for key in (
        "podMonitorSelectorNilUsesHelmValues",
        "serviceMonitorSelectorNilUsesHelmValues",
        "ruleSelectorNilUsesHelmValues",
    ):
        assert spec[key] is False


def test_prometheus_url_names_the_stack_release_service(dev: StackRun) -> None:
    values = release(dev, "kube-prometheus-stack")["values"]
    assert prometheus_url("monitoring") == f"http://{values['fullnameOverride']}-prometheus.monitoring.svc:9090"
    assert dev.outputs["prometheusUrl"] == prometheus_url("monitoring")


def test_the_remote_write_role_may_write_to_its_own_workspace_only(prod: StackRun) -> None:
    (workspace,) = prod.of_type("aws:amp/workspace:Workspace")
    (role,) = [r for r in prod.of_type("aws:iam/role:Role") if r.name.endswith("-amp-writer")]
    assert not [a for a in prod.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment") if a.parent == role.urn]
    (policy,) = [p for p in prod.of_type("aws:iam/rolePolicy:RolePolicy") if p.parent == role.urn]
    (statement,) = json.loads(policy.inputs["policy"])["Statement"]
    assert statement == {
        "Effect": "Allow",
        "Action": "aps:RemoteWrite",
        "Resource": f"arn:aws:amp:us-west-2:123456789012:{workspace.name}",
    }


@pytest.mark.parametrize(
    "selector",
    [
        "podMonitorNamespaceSelector",
        "serviceMonitorNamespaceSelector",
        "ruleNamespaceSelector",
        "probeNamespaceSelector",
        "scrapeConfigNamespaceSelector",
    ],
)
def test_prometheus_loads_monitors_and_rules_from_the_monitoring_exporters_and_serving_namespaces_only(
    stack: StackRun, selector: str
) -> None:
    """`{}` (the chart's default) is every namespace: any workload could add targets or rules. The
    exporters' namespace holds node-exporter's ServiceMonitor (the subchart renders it in its
    namespaceOverride)."""
    spec = release(stack, "kube-prometheus-stack")["values"]["prometheus"]["prometheusSpec"]
    assert spec[selector] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "In",
                "values": ["inference", "monitoring", "monitoring-exporters"],
            }
        ]
    }
    monitors = stack.of_kind("monitoring.coreos.com/v1", "PodMonitor") + stack.of_kind(
        "monitoring.coreos.com/v1", "PrometheusRule"
    )
    assert monitors and {m.inputs["metadata"]["namespace"] for m in monitors} <= {"inference", "monitoring"}


def test_the_host_level_exporters_run_in_their_own_namespace(stack: StackRun) -> None:
    """node-exporter through the subchart's namespaceOverride (kube-prometheus-stack-88.5.3
    values.yaml), the DCGM exporter as its own release there; the DCGM ServiceMonitor stays beside
    Prometheus and selects the exporters' namespace."""
    values = release(stack, "kube-prometheus-stack")["values"]
    assert values["prometheus-node-exporter"]["namespaceOverride"] == "monitoring-exporters"
    assert release(stack, "dcgm-exporter")["namespace"] == "monitoring-exporters"
    (monitor,) = [
        m.inputs
        for m in stack.of_kind("monitoring.coreos.com/v1", "ServiceMonitor")
        if m.inputs["metadata"]["name"] == "dcgm-exporter"
    ]
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["monitoring-exporters"]}


def test_prod_remote_writes_to_managed_prometheus_through_pod_identity(prod: StackRun) -> None:
    assert len(prod.of_type("aws:amp/workspace:Workspace")) == 1
    (association,) = [
        r.inputs
        for r in prod.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if r.inputs["serviceAccount"] == obs_module.PROMETHEUS_SERVICE_ACCOUNT
    ]
    assert association["namespace"] == "monitoring"
    values = release(prod, "kube-prometheus-stack")["values"]["prometheus"]
    assert values["serviceAccount"]["name"] == obs_module.PROMETHEUS_SERVICE_ACCOUNT
    (remote,) = values["prometheusSpec"]["remoteWrite"]
    assert remote["url"].endswith("/api/v1/remote_write") and remote["sigv4"] == {"region": "us-west-2"}


def test_dev_has_no_managed_prometheus(dev: StackRun) -> None:
    assert dev.of_type("aws:amp/workspace:Workspace") == []
    assert "remoteWrite" not in release(dev, "kube-prometheus-stack")["values"]["prometheus"]["prometheusSpec"]


def test_alertmanager_config_and_grafana_password_stay_pulumi_secrets(prod: StackRun) -> None:
    secrets = {r.inputs["metadata"]["name"]: r.secret_paths for r in prod.of_kind("v1", "Secret")}
    assert any(p.startswith("stringData") for p in secrets[obs_module.ALERTMANAGER_CONFIG_SECRET])
    assert any(p.startswith("stringData") for p in secrets[obs_module.GRAFANA_ADMIN_SECRET])


def test_the_program_stops_on_a_plaintext_webhook_before_creating_observability() -> None:
    config = stack_config("dev")
    observability = json.loads(config["inference-platform:observability"])
    observability["alertmanager"] = {"receivers": [{"name": "oncall", "webhookUrl": "https://hooks.example.com/T0"}]}
    config["inference-platform:observability"] = json.dumps(observability)
    with pytest.raises(ProgramFailed, match=r"receivers\[0\]\.webhookUrl must be set with"):
        run_program("dev", config)


def test_monitors_and_rules_match_the_prometheus_operator_v0_93_crds(prod: StackRun) -> None:
    kinds = ("PodMonitor", "ServiceMonitor", "PrometheusRule")
    objects = [r.inputs for kind in kinds for r in prod.of_kind("monitoring.coreos.com/v1", kind)]
    assert {o["kind"] for o in objects} == set(kinds)
    assert [p for o in objects for p in validate(o)] == []


def test_kube_state_metrics_exports_the_gpu_pool_node_label(dev: StackRun) -> None:
    values = release(dev, "kube-prometheus-stack")["values"]
    assert values["kube-state-metrics"]["metricLabelsAllowlist"] == [f"nodes=[{POOL_LABEL}]"]
