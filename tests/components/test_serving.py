"""Serving: one KServe InferenceService per model, shaped to start slowly, stop gently and
hold no AWS permissions; asserted on what each stack registers and on the pure builders."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from components.gpu_capacity import node_pool_spec
from components.model_store import claim_name
from components.serving.objects import (
    DRAIN_SCRIPT,
    KSERVE_CHART,
    KSERVE_CRD_CHART,
    KSERVE_VERSION,
    METRICS_CONTAINER,
    METRICS_PORT,
    METRICS_PORT_NAME,
    METRICS_PROXY_SCRIPT,
    MODEL_MOUNT,
    inference_service,
    startup_budget_seconds,
)
from contract import names
from contract.gpu import GPU_OF_FAMILY, GPU_RESOURCE, GPU_TAINT, POOL_LABEL, instance_family_label
from contract.settings import SettingsError, parse
from contract.settings.gpu_capacity import NodePoolSettings
from contract.settings.models import ModelSettings
from contract.settings.serving import ServingSettings
from contract.settings.stack_file import load_stack
from tests.contract.test_settings import stack_raw, with_value
from tests.harness import ROOT, StackRun
from tests.k8s_schemas import validate

RELEASE = "kubernetes:helm.sh/v3:Release"


def settings(stack: StackRun):
    return load_stack(stack.stack, ROOT)


def isvcs(stack: StackRun) -> dict[str, dict[str, Any]]:
    return {
        r.inputs["metadata"]["name"]: r.inputs for r in stack.of_kind("serving.kserve.io/v1beta1", "InferenceService")
    }


def predictor_spec(stack: StackRun, model: str) -> dict[str, Any]:
    return isvcs(stack)[model]["spec"]["predictor"]


def main_container(stack: StackRun, model: str) -> dict[str, Any]:
    (container,) = [c for c in predictor_spec(stack, model)["containers"] if c["name"] == "kserve-container"]
    return container


def small_model(**changes: Any) -> ModelSettings:
    base = load_stack("dev", ROOT).models[0]
    return base.model_copy(update=changes)


def predictor(
    model: ModelSettings, serving: ServingSettings | None = None, provisioner: str = "auto-mode"
) -> dict[str, Any]:
    isvc = inference_service(
        model, serving or ServingSettings(), 1, 2, instance_family_label=instance_family_label(provisioner)
    )
    return isvc["spec"]["predictor"]


def node_requirements_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return term["matchExpressions"]


def test_every_model_has_one_inference_service_in_the_serving_namespace(stack: StackRun) -> None:
    s = settings(stack)
    made = isvcs(stack)
    assert sorted(made) == sorted(m.name for m in s.models)
    assert {obj["metadata"]["namespace"] for obj in made.values()} == {s.serving.namespace}


def test_kserve_runs_standard_mode_and_leaves_scaling_to_keda(stack: StackRun) -> None:
    for obj in isvcs(stack).values():
        annotations = obj["metadata"]["annotations"]
        assert annotations["serving.kserve.io/deploymentMode"] == "Standard"
        assert annotations["serving.kserve.io/autoscalerClass"] == "external"


def test_kserve_and_cert_manager_charts_are_pinned(stack: StackRun) -> None:
    releases = {r.inputs["chart"]: r.inputs for r in stack.of_type(RELEASE)}
    assert releases[KSERVE_CRD_CHART]["version"] == KSERVE_VERSION == "v0.20.0"
    assert releases[KSERVE_CHART]["version"] == KSERVE_VERSION
    assert releases[KSERVE_CHART]["values"]["kserve"]["controller"]["deploymentMode"] == "Standard"
    cert_manager = releases["oci://quay.io/jetstack/charts/cert-manager"]
    # The OCI chart needs no repository; v1.21.2 is past the GHSA-gx3x-vq4p-mhhv fix (1.19.3).
    assert (cert_manager["version"], cert_manager.get("repositoryOpts")) == ("v1.21.2", None)


def test_each_predictor_mounts_its_own_weights_claim_read_only(stack: StackRun) -> None:
    claims = {r.inputs["metadata"]["name"] for r in stack.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    for model in settings(stack).models:
        spec = predictor_spec(stack, model.name)
        volume = next(v for v in spec["volumes"] if "persistentVolumeClaim" in v)
        assert volume["persistentVolumeClaim"] == {"claimName": claim_name(model), "readOnly": True}
        assert claim_name(model) in claims
        mount = next(m for m in main_container(stack, model.name)["volumeMounts"] if m["name"] == volume["name"])
        assert mount == {"name": volume["name"], "mountPath": MODEL_MOUNT, "readOnly": True}


def test_predictor_waits_for_the_synced_manifest_on_the_same_volume(stack: StackRun) -> None:
    for model in settings(stack).models:
        spec = predictor_spec(stack, model.name)
        (init,) = spec["initContainers"]
        assert init["volumeMounts"][0]["mountPath"] == MODEL_MOUNT
        assert init["volumeMounts"][0]["name"] in {v["name"] for v in spec["volumes"]}


def test_vllm_serves_the_pinned_image_under_the_served_name(stack: StackRun) -> None:
    for model in settings(stack).models:
        container = main_container(stack, model.name)
        assert container["image"] == model.image
        assert container["args"][0] == MODEL_MOUNT
        assert f"--served-model-name={model.name}" in container["args"]
        assert f"--tensor-parallel-size={model.gpus_per_replica}" in container["args"]
        assert f"--max-num-seqs={model.engine.max_num_seqs}" in container["args"]


def test_gpu_requests_equal_limits_equal_gpus_per_replica(stack: StackRun) -> None:
    for model in settings(stack).models:
        resources = main_container(stack, model.name)["resources"]
        assert resources["requests"][GPU_RESOURCE] == resources["limits"][GPU_RESOURCE] == str(model.gpus_per_replica)


def test_predictor_tolerates_the_gpu_taint_and_runs_only_on_its_pools(stack: StackRun) -> None:
    for model in settings(stack).models:
        spec = predictor_spec(stack, model.name)
        assert {
            "key": GPU_TAINT["key"],
            "operator": "Equal",
            "value": GPU_TAINT["value"],
            "effect": GPU_TAINT["effect"],
        } in spec["tolerations"]
        assert node_requirements_of(spec)[0] == {"key": POOL_LABEL, "operator": "In", "values": model.pools}


def test_a_pinned_model_runs_only_on_nodes_of_its_instance_families(stack: StackRun) -> None:
    s = settings(stack)
    for model in s.models:
        family = {
            "key": instance_family_label(s.gpu_capacity.provisioner),
            "operator": "In",
            "values": model.instance_families,
        }
        expected = [] if model.instance_families is None else [family]
        assert node_requirements_of(predictor_spec(stack, model.name))[1:] == expected


def test_prod_pins_every_model_to_the_gpu_of_its_profile(prod: StackRun) -> None:
    for model in settings(prod).models:
        assert model.instance_families and model.capacity_profile
        (gpu,) = {GPU_OF_FAMILY[family] for family in model.instance_families}
        assert model.capacity_profile.startswith(f"{gpu}-")  # profiles are named <gpu>-<model>
        assert node_requirements_of(predictor_spec(prod, model.name))[1]["values"] == model.instance_families


@pytest.mark.parametrize(
    ("provisioner", "label"),
    [("auto-mode", "eks.amazonaws.com/instance-family"), ("karpenter", "karpenter.k8s.aws/instance-family")],
)
def test_the_family_pin_uses_the_label_the_provisioners_nodes_carry(provisioner: str, label: str) -> None:
    # Well-known labels, set on nodes and usable in pod nodeAffinity: Karpenter v1.14.1
    # pkg/apis/v1/labels.go (LabelInstanceFamily in WellKnownLabels), pkg/cloudprovider/cloudprovider.go
    # instanceToNodeClaim (labels a node with each single-valued instance-type requirement), docs
    # concepts/scheduling.md "Labels"; EKS user guide create-node-pool "EKS Auto Mode Supported Labels".
    requirements = node_requirements_of(predictor(small_model(instance_families=["g6"]), provisioner=provisioner))
    assert requirements[1] == {"key": label, "operator": "In", "values": ["g6"]}
    pool = NodePoolSettings(name="gpu-spot", capacity_type="spot", weight=100, gpu_limit=2)
    assert label in {r["key"] for r in node_pool_spec(pool, provisioner)["template"]["spec"]["requirements"]}


def test_a_pinned_inference_service_matches_the_kserve_crd() -> None:
    model = small_model(instance_families=["g5", "g6"])
    isvc = inference_service(model, ServingSettings(), 1, 2, instance_family_label=instance_family_label("karpenter"))
    assert validate(isvc) == []


def test_metrics_port_keeps_the_scrape_contract(stack: StackRun) -> None:
    for model in settings(stack).models:
        ports = main_container(stack, model.name)["ports"]
        assert {"name": names.PORT_NAME, "containerPort": names.PORT, "protocol": "TCP"} in ports


def test_probes_check_health_and_startup_budget_covers_weight_loading(stack: StackRun) -> None:
    s = settings(stack)
    for model in s.models:
        container = main_container(stack, model.name)
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"]["path"] == "/health"
        startup = container["startupProbe"]
        assert startup["periodSeconds"] * startup["failureThreshold"] >= startup_budget_seconds(model, s.serving)


def test_startup_budget_grows_with_model_size() -> None:
    serving = ServingSettings()
    assert startup_budget_seconds(small_model(size_gib=30.0), serving) > startup_budget_seconds(small_model(), serving)
    assert startup_budget_seconds(small_model(size_gib=10.0), serving) == 300 + 100  # 10 GiB at 0.1 GiB/s


def test_shared_memory_is_sized_per_tensor_parallel_gpu() -> None:
    spec = predictor(small_model(gpus_per_replica=4))
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}


def test_grace_period_covers_the_gateway_request_deadline_plus_drain(stack: StackRun) -> None:
    s = settings(stack)
    for model in s.models:
        grace = predictor_spec(stack, model.name)["terminationGracePeriodSeconds"]
        assert grace >= s.gateway.timeouts.request_seconds + s.serving.drain_seconds


def test_do_not_disrupt_is_set_only_when_configured() -> None:
    on = predictor(small_model(), ServingSettings(do_not_disrupt=True))
    off = predictor(small_model(), ServingSettings(do_not_disrupt=False))
    assert on["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert "annotations" not in off


def test_every_predictor_has_a_disruption_budget_selecting_its_pods(stack: StackRun) -> None:
    pdbs = {r.inputs["metadata"]["name"]: r.inputs for r in stack.of_kind("policy/v1", "PodDisruptionBudget")}
    for model in settings(stack).models:
        pdb = pdbs[names.deployment_name(model)]
        assert pdb["spec"]["maxUnavailable"] == 1
        assert pdb["spec"]["selector"]["matchLabels"] == {names.ISVC_LABEL: model.name}


def test_predictor_service_account_carries_no_aws_identity(stack: StackRun) -> None:
    accounts = {r.inputs["metadata"]["name"]: r.inputs for r in stack.of_kind("v1", "ServiceAccount")}
    associated = {
        r.inputs["serviceAccount"] for r in stack.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    }
    for model in settings(stack).models:
        name = predictor_spec(stack, model.name)["serviceAccountName"]
        account = accounts[name]
        assert not any("eks.amazonaws.com" in k for k in (account["metadata"].get("annotations") or {}))
        assert account["automountServiceAccountToken"] is False
        assert name not in associated


# Hardening and isolation ---------------------------------------------------------------------


def test_predictor_runs_as_a_fixed_non_root_user_with_runtime_default_seccomp(stack: StackRun) -> None:
    for model in settings(stack).models:
        pod = predictor_spec(stack, model.name)["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
        container = main_container(stack, model.name)["securityContext"]
        assert container["allowPrivilegeEscalation"] is False
        assert container["capabilities"] == {"drop": ["ALL"]}


def test_every_predictor_reports_usage_on_every_response_for_the_token_budgets(stack: StackRun) -> None:
    """Token budgets charge a response's usage; without the flag a streamed /v1/completions that
    does not ask for usage reports none and is charged 0 tokens (AI Gateway v1.1 forces usage
    for chat completions only)."""
    for model in settings(stack).models:
        assert "--enable-force-include-usage" in main_container(stack, names.inference_service_name(model))["args"]


def test_read_only_root_leaves_every_vllm_cache_path_on_a_volume(stack: StackRun) -> None:
    for model in settings(stack).models:
        container = main_container(stack, model.name)
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        mounts = [m["mountPath"] for m in container["volumeMounts"]]
        env = {e["name"]: e.get("value") for e in container["env"]}
        for variable in (
            "HOME",
            "XDG_CACHE_HOME",
            "HF_HOME",
            "VLLM_CACHE_ROOT",
            "VLLM_CONFIG_ROOT",
            "TRITON_CACHE_DIR",
            "TORCHINDUCTOR_CACHE_DIR",
            "TMPDIR",
        ):
            assert any(env[variable] == m or env[variable].startswith(f"{m}/") for m in mounts), variable
        # getpass.getuser() (PyTorch's default cache dir) needs USER: the UID has no passwd entry.
        assert env["USER"]


def test_predictors_require_the_key_only_the_gateway_holds(stack: StackRun) -> None:
    secrets = {
        (o.inputs["metadata"]["namespace"], o.inputs["metadata"]["name"]): o for o in stack.of_kind("v1", "Secret")
    }
    serving = settings(stack).serving
    for model in settings(stack).models:
        (key,) = [e for e in main_container(stack, model.name)["env"] if e["name"] == "VLLM_API_KEY"]
        ref = key["valueFrom"]["secretKeyRef"]
        secret = secrets[(serving.namespace, ref["name"])]
        assert ref["key"] in secret.inputs["stringData"] and "stringData" in str(secret.secret_paths)
        assert "--api-key" not in " ".join(main_container(stack, model.name)["args"])


def test_serving_namespace_denies_ingress_except_gateway_proxies_and_prometheus(stack: StackRun) -> None:
    namespace = settings(stack).serving.namespace
    policies = {
        o.inputs["metadata"]["name"]: o.inputs
        for o in stack.of_kind("networking.k8s.io/v1", "NetworkPolicy")
        if o.inputs["metadata"]["namespace"] == namespace
    }
    assert policies["default-deny-ingress"]["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    api, metrics = policies["predictors"]["spec"]["ingress"]

    def sources(rule: dict[str, Any]) -> set[tuple[str, str]]:
        return {
            (
                p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
                p["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
            )
            for p in rule["from"]
        }

    # Envoy alone reaches vLLM's port; Prometheus reaches only the metrics-only sidecar.
    assert api["ports"] == [{"protocol": "TCP", "port": names.PORT}]
    assert sources(api) == {("envoy-gateway-system", "envoy")}
    assert metrics["ports"] == [{"protocol": "TCP", "port": METRICS_PORT}]
    assert sources(metrics) == {(settings(stack).observability.namespace, "prometheus")}


def test_prometheus_scrapes_the_metrics_only_sidecar_not_the_engines_port(stack: StackRun) -> None:
    for model in settings(stack).models:
        containers = {c["name"]: c for c in predictor_spec(stack, model.name)["containers"]}
        assert next(iter(containers)) == "kserve-container"  # KServe's Service serves the first container's port
        sidecar = containers[METRICS_CONTAINER]
        assert sidecar["image"] == model.image
        assert sidecar["ports"] == [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}]
        assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True
    for monitor in stack.of_kind("monitoring.coreos.com/v1", "PodMonitor"):
        assert [e["port"] for e in monitor.inputs["spec"]["podMetricsEndpoints"]] == [METRICS_PORT_NAME]


@pytest.fixture
def metrics_only(metrics_server):
    _, upstream = metrics_server
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proxy = subprocess.Popen([sys.executable, "-c", METRICS_PROXY_SCRIPT, str(port), upstream])
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(base + "/metrics", timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    yield base
    proxy.terminate()
    proxy.wait(timeout=10)


def test_the_metrics_sidecar_serves_the_engines_metrics(metrics_only) -> None:
    body = urllib.request.urlopen(metrics_only + "/metrics", timeout=5).read().decode()
    assert body.startswith("vllm:num_requests_running")


@pytest.mark.parametrize("path", ["/invocations", "/pause", "/update_weights", "/v1/completions", "/metrics/../pause"])
def test_the_metrics_sidecar_answers_no_other_path(metrics_only, path: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(metrics_only + path, timeout=5)
    assert refused.value.code == 404


def test_the_metrics_sidecar_answers_no_other_method(metrics_only) -> None:
    request = urllib.request.Request(metrics_only + "/metrics", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 501


class _Metrics(BaseHTTPRequestHandler):
    running = 1.0

    def do_GET(self) -> None:
        body = f'vllm:num_requests_running{{engine="0",model_name="m"}} {type(self).running}\n'.encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        """Silent: one line per probe request would flood the test output."""


@pytest.fixture
def metrics_server():
    _Metrics.running = 1.0
    server = HTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_port}/metrics"
    server.shutdown()


def test_pre_stop_waits_until_the_engine_has_no_running_request(metrics_server) -> None:
    _, url = metrics_server
    drain = subprocess.Popen([sys.executable, "-c", DRAIN_SCRIPT, "0", url])
    time.sleep(1.5)
    assert drain.poll() is None, "returned while a request was still running"
    _Metrics.running = 0.0
    assert drain.wait(timeout=10) == 0


def test_pre_stop_returns_when_the_engine_is_already_gone() -> None:
    done = subprocess.run([sys.executable, "-c", DRAIN_SCRIPT, "0", "http://127.0.0.1:9/metrics"], timeout=10)
    assert done.returncode == 0


def test_gpus_per_replica_beyond_every_instance_of_a_pool_is_rejected() -> None:
    raw = with_value(stack_raw("prod"), ["gpuCapacity", "pools", 0, "instanceFamilies"], ["gr6"])
    raw["models"][0]["gpusPerReplica"] = 2
    del raw["models"][0]["instanceFamilies"]  # pinned to g5 it would never land on the gr6 pool
    raw["models"][1]["pools"] = ["gpu-on-demand"]
    with pytest.raises(SettingsError) as caught:
        parse(raw)
    assert "inference-platform:models[0].gpusPerReplica (2) is more GPUs than any instance of pool 'gpu-spot'" in str(
        caught.value
    )
