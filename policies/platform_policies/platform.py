"""The facts the policies share with the Pulumi program, imported from `contract/` so the
pack and the program cannot drift (one GPU taint, one metric catalogue, one naming contract).
`contract/` has no Pulumi imports, so loading the pack loads no cloud SDK."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contract.gpu import GPU_RESOURCE, GPU_TAINT, POOL_LABEL
from contract.names import ISVC_LABEL, MODEL_LABEL, PREDICTOR_SUFFIX, WORKLOAD_LABEL
from contract.settings.cluster import REQUIRED_LOGS
from contract.signals import VLLM_IMAGE_REPOSITORY, VLLM_IMAGE_TAG, Vllm

from . import k8s

__all__ = [
    "GPU_RESOURCE",
    "GPU_TAINT",
    "ISVC_LABEL",
    "MODEL_LABEL",
    "POOL_LABEL",
    "PREDICTOR_SUFFIX",
    "REQUIRED_LOGS",
    "VLLM_IMAGE_REPOSITORY",
    "VLLM_IMAGE_TAG",
    "WORKLOAD_LABEL",
    "gpus_of",
    "known_vllm_metrics",
    "removed_vllm_metrics",
    "workload_class",
]

_HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


def known_vllm_metrics() -> set[str]:
    """Every series name the pinned vLLM exposes according to `contract.signals.Vllm`
    (histograms, the `*_seconds` names, also as their `_bucket`/`_sum`/`_count` series)."""
    names = {v for k, v in vars(Vllm).items() if k.isupper() and isinstance(v, str)}
    return names | {n + s for n in names if n.endswith("_seconds") for s in _HISTOGRAM_SERIES}


def removed_vllm_metrics() -> set[str]:
    return {n + s for n in Vllm.REMOVED for s in ("", *_HISTOGRAM_SERIES)}


def workload_class(props: Mapping[str, Any]) -> str:
    """`batch` only when the object says so (label or annotation); else `interactive`."""
    for field in ("labels", "annotations"):
        value = k8s.get(props, "metadata", field, WORKLOAD_LABEL)
        if isinstance(value, str):
            return value
    return "interactive"


def gpus_of(container: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(requested, limited) GPUs of one container; None where not set."""
    request = k8s.get(container, "resources", "requests", GPU_RESOURCE)
    limit = k8s.get(container, "resources", "limits", GPU_RESOURCE)
    return (
        k8s.quantity(request) if request is not None else None,
        k8s.quantity(limit) if limit is not None else None,
    )
