"""Model store settings: the S3 bucket that holds pinned model weights."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import Section
from .errors import NAMESPACE


class ModelStoreSettings(Section):
    # Only a throwaway stack should let `pulumi destroy` delete a bucket full of weights.
    force_destroy: bool = False
    noncurrent_version_expiration_days: int = Field(default=30, ge=1, le=3650)
    abort_incomplete_multipart_days: int = Field(default=2, ge=1, le=30)
    # Name of a Secret (key `token`) in the model-sync namespace, for gated or private models.
    hugging_face_token_secret: str | None = Field(default=None, pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
    # Where the model-sync Jobs run: the only namespace whose service account may assume the
    # bucket's writer role, so creating a workload in the serving namespace never grants it.
    sync_namespace: str = Field(default="model-sync", pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def model_store_problems(settings: Any) -> list[str]:
    """The writer's namespace is its own: shared with another component, its workloads could run as
    the writer (and overwrite what predictors load)."""
    others = {
        "serving.namespace": settings.serving.namespace,
        "serving.kserveNamespace": settings.serving.kserve_namespace,
        "gateway.namespace": settings.gateway.namespace,
        "observability.namespace": settings.observability.namespace,
        "observability.exportersNamespace": settings.observability.exporters_namespace,
    }
    return [
        f"{NAMESPACE}:modelStore.syncNamespace ({settings.model_store.sync_namespace!r}) is also {key}; the model "
        "writer's service account needs a namespace of its own"
        for key, namespace in others.items()
        if namespace == settings.model_store.sync_namespace
    ]
