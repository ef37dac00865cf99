"""Names and labels shared by everything that finds a model's objects: Serving creates the
predictor, Observability scrapes it, Autoscaling scales it, the Gateway routes to it, the
policy pack checks it and the capacity tooling reads its series."""

from __future__ import annotations

from .settings.models import ModelSettings

PACKAGE = "inference-platform"
# On every Kubernetes object the platform creates.
PART_OF = {"app.kubernetes.io/part-of": PACKAGE}

# vLLM's OpenAI server serves the API and /metrics on one port.
PORT = 8080
PORT_NAME = "http1"  # KServe's name for the predictor container port
METRICS_PATH = "/metrics"
MODEL_LABEL = f"{PACKAGE}/model"
# `interactive` or `batch`: says on the objects themselves whether scale-to-zero is intended.
WORKLOAD_LABEL = f"{PACKAGE}/workload"
# KServe labels every predictor pod with its InferenceService name.
ISVC_LABEL = "serving.kserve.io/inferenceservice"
# KServe (Standard deployment mode) names the predictor Deployment and Service `<isvc>-predictor`.
PREDICTOR_SUFFIX = "-predictor"
# KEDA names the HPA it creates for a ScaledObject `keda-hpa-<scaledobject>`.
KEDA_HPA_PREFIX = "keda-hpa-"


def inference_service_name(model: ModelSettings) -> str:
    return model.name


def deployment_name(model: ModelSettings) -> str:
    return f"{inference_service_name(model)}{PREDICTOR_SUFFIX}"


def service_name(model: ModelSettings) -> str:
    """The predictor's ClusterIP Service, which the gateway Backend points at."""
    return f"{inference_service_name(model)}{PREDICTOR_SUFFIX}"


def scaled_object_name(model: ModelSettings) -> str:
    """One ScaledObject per model, named after it."""
    return model.name


def hpa_name(model: ModelSettings) -> str:
    return f"{KEDA_HPA_PREFIX}{scaled_object_name(model)}"


# The endpoint picker's chart (`inferencepool` v1.0.2) names the InferencePool after its Helm
# release and labels its EPP pods `inferencepool: <release, lowercased, trimmed, cut to 40>-epp`
# (kubernetes-sigs/gateway-api-inference-extension@v1.0.2 config/charts/inferencepool/templates/_helpers.tpl).
ENDPOINT_PICKER_POD_LABEL = "inferencepool"
# The PriorityClass of the warm-headroom placeholders (components/headroom.py): below every
# predictor, off the request path.
HEADROOM_PRIORITY_CLASS = "gpu-headroom"


def inference_pool_name(model: ModelSettings) -> str:
    """The model's InferencePool, and the Helm release of its endpoint picker."""
    return f"{inference_service_name(model)}-pool"


def endpoint_picker_name(model: ModelSettings) -> str:
    """The EPP Deployment, Service and pod label value of the model's pool."""
    return endpoint_picker_of_release(inference_pool_name(model))


def endpoint_picker_of_release(release: str) -> str:
    """What the chart derives from its release name for the EPP's objects and pod label."""
    return f"{release.lower().strip()[:40]}-epp"
