"""Serving settings: where predictors run and how they start and stop."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator

from ..gpu import MAX_GPUS_PER_INSTANCE
from .base import Section
from .errors import NAMESPACE

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class StartupSettings(Section):
    """The startup-probe budget: engine start plus weight load at a pessimistic read rate.

    Deliberately slower than `capacityPlanning.startup` (the simulator's expected case): a
    probe that gives up early restarts a replica that was about to become ready.
    """

    engine_init_seconds: int = Field(default=300, ge=30, le=3600)
    min_weight_load_gib_per_second: float = Field(default=0.1, alias="minWeightLoadGiBPerSecond", gt=0)


class CompileCacheSettings(Section):
    """vLLM's torch.compile cache on a ReadWriteMany volume every predictor mounts, so a replica on a
    fresh node loads the compiled graphs instead of compiling (the cache key covers the model, the
    engine flags, the GPU and the vLLM version, so models and GPU types share it safely; vLLM
    serialises concurrent writers with file locks: docs/design/torch_compile.md, "Concurrent Access
    Control"). The storage class must provide ReadWriteMany, e.g. Amazon EFS through its CSI driver,
    which the operator installs: EKS Auto Mode manages EBS block storage (ReadWriteOnce) only."""

    storage_class: str
    size_gib: int = Field(default=50, alias="sizeGiB", ge=1, le=16384)

    @field_validator("storage_class")
    @classmethod
    def _storage_class(cls, value: str) -> str:
        if not _DNS_SUBDOMAIN.match(value):
            raise ValueError("must be a StorageClass name (lowercase DNS subdomain)")
        return value


class FastStartSettings(Section):
    """How a new predictor gets its weights and compiled graphs (docs/tasks/fast-starts-and-headroom.md)."""

    # runai-streamer: vLLM's `--load-format runai_streamer` reads the safetensors through the
    # Mountpoint mount with `streamerConcurrency` threads and streams them to the GPU while reading
    # (vLLM docs/models/extensions/runai_model_streamer.md); default: vLLM's safetensors loader.
    weight_loader: Literal["default", "runai-streamer"] = "default"
    # Reader threads (each one concurrent range reads through Mountpoint): the streamer's `concurrency`.
    streamer_concurrency: int = Field(default=16, ge=1, le=64)
    # The streamer's CPU buffer (its `memory_limit`): counted against the predictor's memory limit.
    streamer_memory_limit_gib: float = Field(default=2, alias="streamerMemoryLimitGiB", gt=0, le=64)
    # Unset: the compile cache lives in the pod's own emptyDir (survives container restarts only).
    compile_cache: CompileCacheSettings | None = None


class ServingSettings(Section):
    namespace: str = "inference"
    kserve_namespace: str = "kserve"
    # Must cover the gateway's longest request plus `drainSeconds` (checked across sections).
    termination_grace_period_seconds: int = Field(default=360, ge=30, le=3600)
    # preStop waits this long before anything else, so endpoint removal reaches Envoy and
    # kube-proxy before the engine stops taking requests.
    drain_seconds: int = Field(default=15, ge=0, le=120)
    # `karpenter.sh/do-not-disrupt` on predictor pods: consolidation never cuts live streams.
    do_not_disrupt: bool = True
    # /dev/shm (memory-backed, counted against the pod's memory limit) per GPU of a replica;
    # tensor parallelism exchanges activations through it.
    shm_gib_per_gpu: int = Field(default=2, alias="shmGiBPerGpu", ge=1, le=64)
    startup: StartupSettings = Field(default_factory=StartupSettings)
    fast_start: FastStartSettings = Field(default_factory=FastStartSettings)

    @field_validator("namespace", "kserve_namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError("must be a Kubernetes namespace name (DNS label)")
        return value


def gpu_fit_problems(models: list[Any], pools: list[Any]) -> list[str]:
    """Every (model, pool) where no instance family of the pool has gpusPerReplica GPUs."""
    problems: list[str] = []
    by_name = {p.name: p for p in pools}
    for i, model in enumerate(models):
        for pool_name in model.pools:
            pool = by_name.get(pool_name)
            if pool is None:
                continue  # reported by the unknown-pool rule
            families = model.families_in(pool)
            if not families:
                continue  # the model never lands there (its instanceFamilies)
            largest = max(MAX_GPUS_PER_INSTANCE.get(f, 0) for f in families)
            if model.gpus_per_replica > largest:
                problems.append(
                    f"{NAMESPACE}:models[{i}].gpusPerReplica ({model.gpus_per_replica}) is more GPUs than any "
                    f"instance of pool {pool_name!r} carries (families {families}: at most "
                    f"{largest}); one replica must fit on one node"
                )
    return problems
