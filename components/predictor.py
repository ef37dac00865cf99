"""Names shared by everything that finds a model's predictor: Serving creates it,
Observability scrapes it, Autoscaling scales it, the Gateway routes to it."""

from __future__ import annotations

from .settings.models import ModelSettings

# vLLM's OpenAI server serves the API and /metrics on one port.
PORT = 8080
PORT_NAME = "http1"  # KServe's name for the predictor container port
METRICS_PATH = "/metrics"
MODEL_LABEL = "inference-platform/model"
# `interactive` or `batch`: says on the objects themselves whether scale-to-zero is intended.
WORKLOAD_LABEL = "inference-platform/workload"
# KServe labels every predictor pod with its InferenceService name.
ISVC_LABEL = "serving.kserve.io/inferenceservice"


def inference_service_name(model: ModelSettings) -> str:
    return model.name


def deployment_name(model: ModelSettings) -> str:
    """KServe (Standard deployment mode) names the predictor Deployment `<isvc>-predictor`."""
    return f"{inference_service_name(model)}-predictor"


def service_name(model: ModelSettings) -> str:
    """The predictor's ClusterIP Service, which the gateway Backend points at."""
    return f"{inference_service_name(model)}-predictor"
