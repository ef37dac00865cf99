"""Serving's Kubernetes objects and chart values, as pure functions of the settings (tests
and policies read exactly what the component applies)."""

from __future__ import annotations

import json
import math
from typing import Any

from contract import names
from contract.gpu import GPU_RESOURCE, GPU_TAINT, POOL_LABEL
from contract.pod_security import container_security_context, pod_security_context
from contract.settings.models import ModelSettings
from contract.settings.serving import FastStartSettings, ServingSettings
from contract.signals import Vllm

from ..isolation import PodSecurityLevel
from ..model_store import claim_name
from ..model_sync import manifest_wait_init_container

# cert-manager's charts moved to OCI (the classic repository is no longer updated); v1.21 is the
# current release line, supported until the release of 1.23, for Kubernetes 1.33 to 1.36
# (cert-manager.io "Supported releases"). v1.21.2 includes the GHSA-gx3x-vq4p-mhhv fix of 1.19.3.
CERT_MANAGER_CHART = "oci://quay.io/jetstack/charts/cert-manager"
CERT_MANAGER_VERSION = "v1.21.2"
CERT_MANAGER_NAMESPACE = "cert-manager"
KSERVE_CRD_CHART = "oci://ghcr.io/kserve/charts/kserve-crd"
KSERVE_CHART = "oci://ghcr.io/kserve/charts/kserve-resources"
KSERVE_VERSION = "v0.20.0"

# KServe's Standard mode (RawDeployment is deprecated in v0.20) builds a plain Deployment and
# Service; `external` leaves scaling to the KEDA ScaledObject of the autoscaling component.
DEPLOYMENT_MODE = "Standard"
AUTOSCALER_CLASS = "external"
# KServe's predictor Service listens on 80 and forwards to the container port.
SERVICE_PORT = 80
MODEL_MOUNT = "/mnt/models"
WEIGHTS_VOLUME = "model-weights"
CONTAINER = "kserve-container"
# vLLM reads its API key from here when no --api-key is given (vllm/entrypoints/openai/api_server.py,
# build_app) and checks `Authorization: Bearer <key>` on /v1 paths only, so /health (probes) and
# /metrics (Prometheus, preStop) stay open.
API_KEY_ENV = "VLLM_API_KEY"
PREDICTOR_KEY_SECRET = "predictor-api-key"
PREDICTOR_KEY_FIELD = "apiKey"
# Everything vLLM, PyTorch, Triton and the Hugging Face client write goes under these two
# volumes, so the root file system stays read-only: HOME (~/.cache/vllm torch.compile and
# CUDA-graph caches, ~/.triton, ~/.nv, ~/.config/vllm) and /tmp (TORCHINDUCTOR_CACHE_DIR).
HOME_DIR = "/home/vllm"
TMP_DIR = "/tmp"
PROBE_PATH = "/health"
# vLLM serves /metrics on its API port, beside /invocations, /pause and other paths `--api-key`
# does not guard (vllm/entrypoints/openai/cli_args.py FrontendArgs.api_key: "only authenticates
# endpoints under the /v1, /v2 and /inference path prefixes"). Prometheus scrapes this sidecar
# instead, which answers GET /metrics alone, and the predictors' NetworkPolicy admits Prometheus
# here only: a pod that wears Prometheus' labels still reaches nothing but the metrics.
METRICS_CONTAINER = "metrics-only"
METRICS_PORT = 8081
METRICS_PORT_NAME = "metrics"
STARTUP_PERIOD_SECONDS = 10


def kserve_values() -> dict[str, Any]:
    return {
        "kserve": {
            "controller": {
                "deploymentMode": DEPLOYMENT_MODE,
                # The AI gateway is the only way in; KServe creates no Ingress or HTTPRoute.
                "gateway": {"disableIngressCreation": True},
            }
        }
    }


def startup_budget_seconds(model: ModelSettings, serving: ServingSettings) -> int:
    """Weight load at the pessimistic read rate plus engine start (profiling, KV cache, CUDA graphs)."""
    load = model.size_gib / serving.startup.min_weight_load_gib_per_second
    return math.ceil(load + serving.startup.engine_init_seconds)


def shm_size(model: ModelSettings, serving: ServingSettings) -> str:
    return f"{serving.shm_gib_per_gpu * model.gpus_per_replica}Gi"


FORCE_INCLUDE_USAGE = "--enable-force-include-usage"


# LMCache's vLLM connector, both storing and loading KV (LMCache docker/README.md run example;
# vLLM registers `LMCacheConnectorV1` in vllm/distributed/kv_transfer/kv_connector/factory.py).
LMCACHE_KV_TRANSFER_CONFIG = json.dumps(
    {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}, separators=(",", ":")
)


def cache_args(model: ModelSettings) -> list[str]:
    """vLLM's prefix cache is on unless turned off (vllm/config/cache.py: enable_prefix_caching
    defaults to True, so the default renders no flag; vllm/engine/arg_utils.py adds it as the bool
    `--enable-prefix-caching`, whose negative is `--no-enable-prefix-caching`); LMCache attaches as
    a KV connector."""
    engine = model.engine
    args = [] if engine.prefix_caching else ["--no-enable-prefix-caching"]
    if engine.lmcache:
        args.append(f"--kv-transfer-config={LMCACHE_KV_TRANSFER_CONFIG}")
    return args


def lmcache_env(model: ModelSettings) -> list[dict[str, str]]:
    """LMCache reads its config from `LMCACHE_<KEY>` variables (LMCache/LMCache
    lmcache/v1/config.py, _CONFIG_DEFINITIONS): a local CPU tier of `max_local_cpu_size` GiB of
    pinned host memory (the container's memory request and limit include it)."""
    if not model.engine.lmcache:
        return []
    gib = model.engine.lmcache_bytes / 2**30
    return [
        {"name": "LMCACHE_LOCAL_CPU", "value": "True"},
        {"name": "LMCACHE_MAX_LOCAL_CPU_SIZE", "value": f"{gib:g}"},
    ]


def vllm_args(model: ModelSettings) -> list[str]:
    engine = model.engine
    return [
        MODEL_MOUNT,
        f"--served-model-name={model.name}",
        f"--port={names.PORT}",
        f"--tensor-parallel-size={model.gpus_per_replica}",
        f"--max-model-len={engine.max_model_len}",
        f"--gpu-memory-utilization={engine.gpu_memory_utilization}",
        f"--max-num-seqs={engine.max_num_seqs}",
        f"--max-num-batched-tokens={engine.max_num_batched_tokens}",
        # Usage on every response, streamed ones included, whatever the request's stream_options:
        # the gateway charges token budgets from it, and AI Gateway v1.1 forces it for chat only, so
        # a streamed /v1/completions would otherwise cost 0 tokens (vLLM cli_args.py
        # BaseFrontendArgs.enable_force_include_usage, at 789340fb and 00522333 of vllm-project/vllm).
        FORCE_INCLUDE_USAGE,
        *cache_args(model),
        *engine.extra_args,
    ]


# Run:ai Model Streamer through vLLM's loader (vLLM docs/models/extensions/runai_model_streamer.md:
# `--load-format runai_streamer`, tuned by `--model-loader-extra-config` with `concurrency`, the
# reader threads, and `memory_limit`, the CPU buffer in bytes). The vllm/vllm-openai image installs
# `runai-model-streamer` in its vllm-openai-base stage (vllm-project/vllm docker/Dockerfile), so the
# stock image needs nothing more; it reads the mounted safetensors as local files, concurrently.
RUNAI_LOAD_FORMAT = "runai_streamer"
# vLLM keeps torch.compile artifacts under $VLLM_CACHE_ROOT/torch_compile_cache/<hash>/rank_<i>_<j>
# (docs/design/torch_compile.md, "Compilation Cache"); only this directory is shared, not the rest
# of the cache root.
COMPILE_CACHE_VOLUME = "compile-cache"
COMPILE_CACHE_CLAIM = "vllm-compile-cache"


def weight_loader_args(fast: FastStartSettings) -> list[str]:
    """The vLLM flags of the weight loader (none for vLLM's default safetensors loader)."""
    if fast.weight_loader != "runai-streamer":
        return []
    extra = {"concurrency": fast.streamer_concurrency, "memory_limit": int(fast.streamer_memory_limit_gib * 2**30)}
    return [
        f"--load-format={RUNAI_LOAD_FORMAT}",
        f"--model-loader-extra-config={json.dumps(extra, separators=(',', ':'))}",
    ]


def compile_cache_dir() -> str:
    return f"{HOME_DIR}/.cache/vllm/torch_compile_cache"


def compile_cache_claim(serving: ServingSettings) -> dict[str, Any] | None:
    """The ReadWriteMany claim every predictor shares for vLLM's torch.compile cache (None: none).
    Node-local alternatives are refused: a hostPath breaks the namespace's restricted Pod Security,
    and a cache that lives on one node does not help a replica on a freshly launched one; the model
    store's Mountpoint mount cannot rename files, which Inductor's atomic writes need."""
    cache = serving.fast_start.compile_cache
    if cache is None:
        return None
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": COMPILE_CACHE_CLAIM, "namespace": serving.namespace, "labels": names.PART_OF},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": cache.storage_class,
            "resources": {"requests": {"storage": f"{cache.size_gib}Gi"}},
        },
    }


# preStop: wait for endpoint removal to reach every Envoy, then until the engine has no
# running or queued request. The kubelet sends SIGTERM only after this returns, and kills at
# the grace period, which covers the gateway's request deadline (checked by the settings).
DRAIN_SCRIPT = f"""\
import sys, time, urllib.request
delay, url = int(sys.argv[1]), sys.argv[2]
time.sleep(delay)
while True:
    try:
        body = urllib.request.urlopen(url, timeout=2).read().decode()
    except Exception:
        break
    busy = sum(float(line.rsplit(" ", 1)[-1]) for line in body.splitlines()
               if line.startswith(("{Vllm.REQUESTS_RUNNING}{{", "{Vllm.REQUESTS_WAITING}{{")))
    if busy == 0:
        break
    time.sleep(1)
"""


METRICS_PROXY_SCRIPT = f"""\
import sys, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
port, upstream = int(sys.argv[1]), sys.argv[2]
class OnlyMetrics(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.split("?", 1)[0] != "{names.METRICS_PATH}":
            self.send_error(404)
            return
        try:
            with urllib.request.urlopen(upstream, timeout=10) as reply:
                body, kind = reply.read(), reply.headers.get("Content-Type", "text/plain")
        except Exception:
            self.send_error(502)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
ThreadingHTTPServer(("", port), OnlyMetrics).serve_forever()
"""


def metrics_container(model: ModelSettings) -> dict[str, Any]:
    """The metrics-only sidecar, from the serving image (it has python3; nothing else to pull)."""
    upstream = f"http://127.0.0.1:{names.PORT}{names.METRICS_PATH}"
    return {
        "name": METRICS_CONTAINER,
        "image": model.image,
        "command": ["python3", "-c", METRICS_PROXY_SCRIPT, str(METRICS_PORT), upstream],
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "20m", "memory": "48Mi"}, "limits": {"memory": "96Mi"}},
        "securityContext": container_security_context(runAsNonRoot=True),
        "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
    }


def pre_stop(serving: ServingSettings) -> dict[str, Any]:
    metrics = f"http://127.0.0.1:{names.PORT}{names.METRICS_PATH}"
    return {"exec": {"command": ["python3", "-c", DRAIN_SCRIPT, str(serving.drain_seconds), metrics]}}


def probes(model: ModelSettings, serving: ServingSettings) -> dict[str, Any]:
    check = {"path": PROBE_PATH, "port": names.PORT_NAME}
    budget = startup_budget_seconds(model, serving)
    return {
        # Liveness and readiness start only after /health first answers within this budget.
        "startupProbe": {
            "httpGet": check,
            "periodSeconds": STARTUP_PERIOD_SECONDS,
            "timeoutSeconds": 5,
            "failureThreshold": math.ceil(budget / STARTUP_PERIOD_SECONDS),
        },
        "readinessProbe": {"httpGet": check, "periodSeconds": 5, "timeoutSeconds": 3, "failureThreshold": 3},
        # Generous: a busy engine answers /health late; a restart costs minutes of weight loading.
        "livenessProbe": {"httpGet": check, "periodSeconds": 15, "timeoutSeconds": 10, "failureThreshold": 4},
    }


def service_account_name(model: ModelSettings) -> str:
    return f"{names.inference_service_name(model)}-predictor"


def pod_labels(model: ModelSettings) -> dict[str, str]:
    return {names.MODEL_LABEL: model.name}


def container(model: ModelSettings, serving: ServingSettings) -> dict[str, Any]:
    gpus = str(model.gpus_per_replica)
    res = model.container_resources()
    return {
        "name": CONTAINER,
        "image": model.image,
        "command": ["vllm", "serve"],
        "args": [*vllm_args(model), *weight_loader_args(serving.fast_start)],
        "env": [
            # Weights come only from the mounted, verified revision; never from the Hub.
            {"name": "HF_HUB_OFFLINE", "value": "1"},
            {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
            {
                "name": API_KEY_ENV,
                "valueFrom": {"secretKeyRef": {"name": PREDICTOR_KEY_SECRET, "key": PREDICTOR_KEY_FIELD}},
            },
            *writable_paths_env(),
            *lmcache_env(model),
        ],
        "ports": [{"name": names.PORT_NAME, "containerPort": names.PORT, "protocol": "TCP"}],
        # Requests == limits for GPUs: a GPU is never shared or overcommitted.
        "resources": {
            "requests": {**res["requests"], GPU_RESOURCE: gpus},
            "limits": {**res["limits"], GPU_RESOURCE: gpus},
        },
        **probes(model, serving),
        "lifecycle": {"preStop": pre_stop(serving)},
        "securityContext": container_security_context(runAsNonRoot=True),
        "volumeMounts": [
            {"name": WEIGHTS_VOLUME, "mountPath": MODEL_MOUNT, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "home", "mountPath": HOME_DIR},
            {"name": "tmp", "mountPath": TMP_DIR},
            *(
                [{"name": COMPILE_CACHE_VOLUME, "mountPath": compile_cache_dir()}]
                if serving.fast_start.compile_cache
                else []
            ),
        ],
    }


def writable_paths_env() -> list[dict[str, str]]:
    """Point every cache at the writable volumes. USER names the fixed UID, which has no passwd
    entry: getpass.getuser() (PyTorch's default cache path) reads USER before the passwd file."""
    cache = f"{HOME_DIR}/.cache"
    return [
        {"name": "HOME", "value": HOME_DIR},
        {"name": "USER", "value": "vllm"},
        {"name": "XDG_CACHE_HOME", "value": cache},
        {"name": "HF_HOME", "value": f"{cache}/huggingface"},
        {"name": "VLLM_CACHE_ROOT", "value": f"{cache}/vllm"},
        {"name": "VLLM_CONFIG_ROOT", "value": f"{HOME_DIR}/.config/vllm"},
        {"name": "TRITON_CACHE_DIR", "value": f"{cache}/triton"},
        {"name": "TORCHINDUCTOR_CACHE_DIR", "value": f"{TMP_DIR}/torchinductor"},
        {"name": "TMPDIR", "value": TMP_DIR},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
    ]


def node_requirements(model: ModelSettings, instance_family_label: str) -> list[dict[str, Any]]:
    """Where a replica may run: its pools' nodes and, when pinned, only its instance families
    (the GPU its capacity profile and thresholds assume), by the provisioner's node label."""
    requirements = [{"key": POOL_LABEL, "operator": "In", "values": list(model.pools)}]
    if model.instance_families is not None:
        requirements.append({"key": instance_family_label, "operator": "In", "values": list(model.instance_families)})
    return requirements


def inference_service(
    model: ModelSettings, serving: ServingSettings, min_replicas: int, max_replicas: int, *, instance_family_label: str
) -> dict[str, Any]:
    """The whole `serving.kserve.io/v1beta1` InferenceService of one model; `instance_family_label`
    is the node label of the provisioner (contract.gpu.instance_family_label)."""
    annotations = {"karpenter.sh/do-not-disrupt": "true"} if serving.do_not_disrupt else {}
    spec = {
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
        "labels": pod_labels(model),
        "annotations": annotations,
        "serviceAccountName": service_account_name(model),
        "automountServiceAccountToken": False,
        "securityContext": pod_security_context(),
        "terminationGracePeriodSeconds": serving.termination_grace_period_seconds,
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": node_requirements(model, instance_family_label)}]
                }
            }
        },
        "tolerations": [
            {"key": GPU_TAINT["key"], "operator": "Equal", "value": GPU_TAINT["value"], "effect": GPU_TAINT["effect"]}
        ],
        # Prefer replicas in different zones, but never leave one pending for it.
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {names.ISVC_LABEL: names.inference_service_name(model)}},
            }
        ],
        "initContainers": [manifest_wait_init_container(model, MODEL_MOUNT, volume_name=WEIGHTS_VOLUME)],
        # The engine first: KServe finds it by name, and its Service serves the first container's port.
        "containers": [container(model, serving), metrics_container(model)],
        "volumes": [
            {"name": WEIGHTS_VOLUME, "persistentVolumeClaim": {"claimName": claim_name(model), "readOnly": True}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size(model, serving)}},
            # Compile caches run to a few GiB; they count against the node's ephemeral storage.
            {"name": "home", "emptyDir": {"sizeLimit": "20Gi"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "10Gi"}},
            *(
                [{"name": COMPILE_CACHE_VOLUME, "persistentVolumeClaim": {"claimName": COMPILE_CACHE_CLAIM}}]
                if serving.fast_start.compile_cache
                else []
            ),
        ],
    }
    if not annotations:
        del spec["annotations"]
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": names.inference_service_name(model),
            "namespace": serving.namespace,
            "labels": {**pod_labels(model), names.WORKLOAD_LABEL: model.workload},
            "annotations": {
                "serving.kserve.io/deploymentMode": DEPLOYMENT_MODE,
                "serving.kserve.io/autoscalerClass": AUTOSCALER_CLASS,
            },
        },
        "spec": {"predictor": spec},
    }


def pod_disruption_budget(model: ModelSettings, serving: ServingSettings) -> dict[str, Any]:
    """Voluntary evictions (node drains, consolidation) take one replica at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": names.deployment_name(model), "namespace": serving.namespace, "labels": pod_labels(model)},
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {names.ISVC_LABEL: names.inference_service_name(model)}},
        },
    }


def service_account(model: ModelSettings, serving: ServingSettings) -> dict[str, Any]:
    """No IRSA annotation and no Pod Identity association: predictors hold no AWS permissions
    (the weights arrive through the Mountpoint volume, whose driver has its own role)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": service_account_name(model), "namespace": serving.namespace, "labels": pod_labels(model)},
        "automountServiceAccountToken": False,
    }


def service_host(model: ModelSettings, serving: ServingSettings) -> str:
    """The predictor Service's cluster DNS name, which the gateway routes to."""
    return f"{names.service_name(model)}.{serving.namespace}.svc.cluster.local"


def predictor_network_policy(
    serving: ServingSettings, peers: list[dict[str, Any]], metrics_peers: list[dict[str, Any]]
) -> dict[str, Any]:
    """Predictors admit only `peers` (the gateway's Envoy proxies) on the vLLM port and
    `metrics_peers` (Prometheus) on the metrics-only port; the namespace's default-deny closes
    everything else, so no pod bypasses keys and quotas."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "predictors", "namespace": serving.namespace, "labels": names.PART_OF},
        "spec": {
            "podSelector": {"matchExpressions": [{"key": names.ISVC_LABEL, "operator": "Exists"}]},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": peers, "ports": [{"protocol": "TCP", "port": names.PORT}]},
                {"from": metrics_peers, "ports": [{"protocol": "TCP", "port": METRICS_PORT}]},
            ],
        },
    }


# --- The endpoint picker (serving.routing: endpoint-picker) ----------------------------------

# The Gateway API Inference Extension release Envoy AI Gateway v1.1.0 builds against (its go.mod);
# its chart deploys one InferencePool and its endpoint picker (EPP) per release, its CRDs come
# from the release's manifests.yaml (`kustomize build config/crd`: Makefile, artifacts target).
INFERENCE_EXTENSION_VERSION = "v1.0.2"
INFERENCEPOOL_CHART = "oci://registry.k8s.io/gateway-api-inference-extension/charts/inferencepool"
INFERENCE_EXTENSION_CRDS = (
    "https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/"
    f"{INFERENCE_EXTENSION_VERSION}/manifests.yaml"
)
INFERENCE_API = "inference.networking.k8s.io"
# The EPP's ext-proc port, which Envoy calls for every request (chart values: extProcPort).
EPP_EXT_PROC_PORT = 9002


def routes_by_endpoint_picker(models: list[ModelSettings]) -> list[ModelSettings]:
    return [m for m in models if m.serving.routing == "endpoint-picker"]


def inference_pool_values(model: ModelSettings, replicas: int) -> dict[str, Any]:
    """Values of the `inferencepool` chart (config/charts/inferencepool/values.yaml at v1.0.2): the
    pool selects the model's predictor pods on the vLLM port; the EPP keeps the chart's image
    (epp:v1.0.2) and default plugins (queue, KV-cache utilisation and prefix-cache scorers).
    More than one replica runs active-passive with leader election (the chart adds
    --ha-enable-leader-election; only the leader is ready: cmd/epp/runner/health.go)."""
    return {
        "inferenceExtension": {"replicas": replicas},
        "inferencePool": {
            "targetPorts": [{"number": names.PORT}],
            "modelServerType": "vllm",
            "modelServers": {"matchLabels": {names.ISVC_LABEL: names.inference_service_name(model)}},
        },
        # Envoy Gateway needs no provider-specific objects (only gke and istio have any).
        "provider": {"name": "none"},
    }


def inference_pool(model: ModelSettings, serving: ServingSettings) -> dict[str, Any]:
    """The InferencePool the chart renders from `inference_pool_values` (templates/inferencepool.yaml,
    apiVersion inference.networking.k8s.io/v1): what the AIGatewayRoute's backendRef names."""
    values = inference_pool_values(model, 1)["inferencePool"]
    return {
        "apiVersion": f"{INFERENCE_API}/v1",
        "kind": "InferencePool",
        "metadata": {"name": names.inference_pool_name(model), "namespace": serving.namespace},
        "spec": {
            "targetPorts": values["targetPorts"],
            "selector": {"matchLabels": values["modelServers"]["matchLabels"]},
            "endpointPickerRef": {
                "name": names.endpoint_picker_name(model),
                "port": {"number": EPP_EXT_PROC_PORT},
            },
        },
    }


def endpoint_picker_labels(model: ModelSettings) -> dict[str, str]:
    return {names.ENDPOINT_PICKER_POD_LABEL: names.endpoint_picker_name(model)}


def endpoint_picker_pdb(model: ModelSettings, serving: ServingSettings) -> dict[str, Any]:
    """The chart ships no PodDisruptionBudget. With two replicas only the leader is ready, so this
    budget holds the leader against voluntary eviction (a drain waits for it) while the never-ready
    standby may always move (`unhealthyPodEvictionPolicy: AlwaysAllow`)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": names.endpoint_picker_name(model),
            "namespace": serving.namespace,
            "labels": {**pod_labels(model), **names.PART_OF},
        },
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": endpoint_picker_labels(model)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def endpoint_picker_network_policy(
    model: ModelSettings, serving: ServingSettings, callers: list[dict[str, Any]]
) -> dict[str, Any]:
    """Only the gateway's Envoy proxies reach the EPP, on its ext-proc port (the namespace's
    default-deny closes its health and metrics ports to everyone else; kubelet probes stay allowed)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": names.endpoint_picker_name(model),
            "namespace": serving.namespace,
            "labels": names.PART_OF,
        },
        "spec": {
            "podSelector": {"matchLabels": endpoint_picker_labels(model)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": callers, "ports": [{"protocol": "TCP", "port": EPP_EXT_PROC_PORT}]}],
        },
    }


def endpoint_picker_egress_policy(
    model: ModelSettings, serving: ServingSettings, api_server_cidr: str
) -> dict[str, Any]:
    """The serving namespace denies all egress (predictors call nothing); the EPP must scrape the
    pool's pods on the vLLM port (its metrics) and watch its pool and pods through the Kubernetes
    API, which EKS serves from the control plane's ENIs inside the VPC (EKS user guide, "Cluster
    API server endpoint"): those two ways out, and DNS (the namespace's allow-dns)."""
    predictors = {"podSelector": {"matchExpressions": [{"key": names.ISVC_LABEL, "operator": "Exists"}]}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": f"{names.endpoint_picker_name(model)}-egress",
            "namespace": serving.namespace,
            "labels": names.PART_OF,
        },
        "spec": {
            "podSelector": {"matchLabels": endpoint_picker_labels(model)},
            "policyTypes": ["Egress"],
            "egress": [
                {"to": [predictors], "ports": [{"protocol": "TCP", "port": names.PORT}]},
                {"to": [{"ipBlock": {"cidr": api_server_cidr}}], "ports": [{"protocol": "TCP", "port": 443}]},
            ],
        },
    }


def serving_pod_security_level(models: list[ModelSettings]) -> PodSecurityLevel:
    """Predictors meet `restricted`; the endpoint picker's chart (inferencepool v1.0.2
    templates/epp-deployment.yaml) sets no securityContext and has no value for one, so its pods
    would be refused there: a namespace with an endpoint picker enforces `baseline` (warn and audit
    stay `restricted`, so the predictors' conformance is still reported)."""
    return "baseline" if routes_by_endpoint_picker(models) else "restricted"


def endpoint_picker_peer(models: list[ModelSettings]) -> list[dict[str, Any]]:
    """The EPP pods, as a same-namespace peer of the predictors: they scrape each pod's /metrics
    on the vLLM port (queue depth, KV-cache use: the scorers' inputs)."""
    pickers = [names.endpoint_picker_name(m) for m in routes_by_endpoint_picker(models)]
    if not pickers:
        return []
    expression = {"key": names.ENDPOINT_PICKER_POD_LABEL, "operator": "In", "values": pickers}
    return [{"podSelector": {"matchExpressions": [expression]}}]
