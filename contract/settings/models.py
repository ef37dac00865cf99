"""Model settings: what is served, at which pinned revision, on which pools, with which engine."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ..gpu import GPU_OF_FAMILY
from ..images import VLLM_IMAGE, repository_name
from ..images import parse as parse_image
from ..instances import daemonset_overhead, instance_sizes, landing_size, pod_requests
from ..signals import VLLM_IMAGE_REPOSITORY
from .base import RuleViolation, Section
from .errors import NAMESPACE
from .gpu_capacity import GpuCapacitySettings, NodePoolSettings, gpu_families

_SERVED_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
_HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_REVISION = re.compile(r"^[0-9a-f]{40}$")
_QUANTITY = re.compile(r"^\d+(\.\d+)?(m|Ki|Mi|Gi|Ti)?$")
_QUANTITY_SCALE = {"": 1.0, "m": 1e-3, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
# vLLM flags the platform sets itself, each with the setting that owns it.
_OWNED_FLAGS = {
    "--model": "models[].huggingFaceId",
    "--served-model-name": "models[].name",
    "--port": "the platform (the predictor port)",
    "--tensor-parallel-size": "models[].gpusPerReplica",
    "--revision": "models[].revision",
    "--max-model-len": "engine.maxModelLen",
    "--max-num-seqs": "engine.maxNumSeqs",
    "--gpu-memory-utilization": "engine.gpuMemoryUtilization",
    "--max-num-batched-tokens": "engine.maxNumBatchedTokens",
    "--api-key": "the platform (the gateway holds the keys)",
    # Token budgets are charged from every response's usage (components/serving/objects.py).
    "--enable-force-include-usage": "the platform (token budgets need usage on every response)",
    "--no-enable-force-include-usage": "the platform (token budgets need usage on every response)",
    "--enable-prefix-caching": "engine.prefixCaching",
    "--no-enable-prefix-caching": "engine.prefixCaching",
    "--kv-transfer-config": "engine.lmcache",
    "--kv-offloading-backend": "engine.lmcache",
    "--kv-offloading-size": "engine.lmcache",
    "--load-format": "serving.fastStart.weightLoader",
    "--model-loader-extra-config": "serving.fastStart (streamerConcurrency, streamerMemoryLimitGiB)",
}
_BYTES = re.compile(r"^\d+(Ki|Mi|Gi|Ti)?$")
# LMCache allocates `max_local_cpu_size` GiB (x 1024**3) of pinned host memory per engine; less
# than one GiB holds a few 256-token chunks of a 7B model and is almost surely a unit mistake
# (LMCache/LMCache lmcache/v1/config.py _CONFIG_DEFINITIONS, v1/memory_management: MixedMemoryAllocator).
LMCACHE_MIN_BYTES = 2**30


def _bytes_quantity(value: int) -> str:
    """Bytes as the largest binary unit that holds them exactly (Gi, Mi, Ki)."""
    for unit, scale in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value % scale == 0:
            return f"{value // scale}{unit}"
    return str(value)


def quantity(text: str) -> float:
    """A Kubernetes quantity ("500m", "4", "14Gi") as a number (cores or bytes)."""
    number = text.rstrip("mKiMGT")
    return float(number) * _QUANTITY_SCALE[text[len(number) :]]


class EngineSettings(Section):
    """vLLM engine arguments that decide a replica's capacity envelope."""

    max_model_len: int = Field(default=8192, ge=256, le=1_048_576)
    gpu_memory_utilization: float = Field(
        default=0.90, gt=0.1, le=0.98, description="share of GPU memory vLLM takes; what the weights leave is KV cache"
    )
    max_num_seqs: int = Field(
        default=64, ge=1, le=4096, description="sequences one replica runs at once: throughput against each one's speed"
    )
    max_num_batched_tokens: int = Field(
        default=2048, ge=64, description="tokens per engine step: the prefill chunk interleaved with decode"
    )
    # vLLM's automatic prefix caching: on by default in the pinned engine (vllm/config/cache.py,
    # CacheConfig.enable_prefix_caching: bool = True); a cached prefix skips its prefill.
    prefix_caching: bool = Field(
        default=True,
        description="vLLM's automatic prefix caching (--enable-prefix-caching / --no-enable-prefix-caching)",
    )
    # LMCache must be in the image: the stock vllm/vllm-openai is refused (see ModelSettings._engine_fits).
    lmcache: str | None = Field(
        default=None,
        description="pinned host memory per replica for LMCache's CPU KV tier (bytes, e.g. 16Gi); unset: no LMCache",
    )
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("lmcache")
    @classmethod
    def _lmcache(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not _BYTES.match(value):
            raise ValueError('must be a byte quantity like "16Gi" (LMCache\'s CPU tier per replica) or unset')
        if quantity(value) < LMCACHE_MIN_BYTES:
            raise ValueError("must be at least 1Gi (LMCache sizes its CPU tier in GiB)")
        return value

    @property
    def lmcache_bytes(self) -> int:
        """Pinned host memory LMCache takes per replica (0 without LMCache)."""
        return int(quantity(self.lmcache)) if self.lmcache else 0

    @field_validator("extra_args")
    @classmethod
    def _extra(cls, args: list[str]) -> list[str]:
        for arg in args:
            flag = arg.split("=")[0]
            if flag in _OWNED_FLAGS:
                raise ValueError(f"must not set {flag}: the platform sets it from {_OWNED_FLAGS[flag]}")
        return args


class Resources(Section):
    cpu: str
    memory: str

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        if not _QUANTITY.match(value):
            raise ValueError('must be a Kubernetes quantity like "4", "500m" or "32Gi"')
        return value


class ResourceSettings(Section):
    requests: Resources = Field(default_factory=lambda: Resources(cpu="3", memory="14Gi"))
    limits: Resources = Field(default_factory=lambda: Resources(cpu="4", memory="15Gi"))

    @model_validator(mode="after")
    def _requests_within_limits(self) -> ResourceSettings:
        for resource in ("cpu", "memory"):
            request, limit = getattr(self.requests, resource), getattr(self.limits, resource)
            if quantity(request) > quantity(limit):
                raise RuleViolation(f"requests.{resource}", request, f"must be <= limits.{resource} ({limit})")
        return self


class ModelServingSettings(Section):
    """How the gateway picks a replica of this model."""

    # least-request: Envoy's least-request over the predictor Service (today's default).
    # endpoint-picker: an InferencePool whose endpoint picker (the Gateway API Inference
    # Extension's EPP, chart `inferencepool` v1.0.2) scores queue, KV-cache use and prefix-cache
    # affinity (config/charts/inferencepool/templates/epp-config.yaml, default-plugins.yaml).
    routing: Literal["least-request", "endpoint-picker"] = Field(
        default="least-request", description="how the gateway picks a replica: least-request or the endpoint picker"
    )


class ModelSettings(Section):
    # vLLM --served-model-name: the `model` field clients send and the `model_name` metric label.
    name: str
    hugging_face_id: str
    # The exact Hugging Face commit: what is synced, verified and served never drifts.
    revision: str
    size_gib: float = Field(alias="sizeGiB", gt=0, le=2048)
    s3_prefix: str | None = None
    gpus_per_replica: int = Field(default=1, ge=1, le=8)
    pools: list[str] = Field(default_factory=lambda: ["gpu-spot", "gpu-on-demand"])
    workload: Literal["interactive", "batch"] = "interactive"
    # The EC2 instance families replicas may land on (within the pools' own); unset: any the pools allow.
    # Pin the family of the GPU the capacity profile (and so every scaling threshold) was derived for.
    instance_families: list[str] | None = None
    capacity_profile: str | None = None
    # What the predictor's gate checks before serving: "sha256" reads every file through the mount and
    # compares it with the published manifest (refuses an object overwritten in place with the same size;
    # costs one full read per replica start), "size" compares sizes only (no read: for very large models).
    gate_verification: Literal["sha256", "size"] = "sha256"
    image: str = VLLM_IMAGE
    engine: EngineSettings = Field(default_factory=EngineSettings)
    resources: ResourceSettings = Field(default_factory=ResourceSettings)
    serving: ModelServingSettings = Field(default_factory=ModelServingSettings)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _SERVED_NAME.match(value):
            raise ValueError("must be a lowercase DNS label of at most 40 characters (it names Kubernetes objects)")
        return value

    @field_validator("hugging_face_id")
    @classmethod
    def _hf_id(cls, value: str) -> str:
        if not _HF_ID.match(value):
            raise ValueError('must be a Hugging Face model id like "Qwen/Qwen2.5-7B-Instruct-AWQ"')
        return value

    @field_validator("revision")
    @classmethod
    def _revision(cls, value: str) -> str:
        if not _REVISION.match(value):
            raise ValueError("must be a full 40-hex commit id (a branch or tag can move)")
        return value

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        ref = parse_image(value)
        if ref is None or not ref.names_a_release:
            raise ValueError(
                'must be pinned by tag or digest, e.g. "vllm/vllm-openai:v0.25.1@sha256:<digest>" (never latest)'
            )
        return value

    @field_validator("pools")
    @classmethod
    def _pools(cls, pools: list[str]) -> list[str]:
        if not pools:
            raise ValueError("must name at least one GPU NodePool")
        return pools

    @field_validator("instance_families")
    @classmethod
    def _families(cls, families: list[str] | None) -> list[str] | None:
        return None if families is None else gpu_families(families, " (or be unset: any the pools allow)")

    @field_validator("s3_prefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        if value is not None and (not value or value.startswith("/") or value.endswith("/") or ".." in value):
            raise ValueError("must be a relative S3 key prefix without leading/trailing '/' or '..'")
        return value

    @model_validator(mode="after")
    def _engine_fits(self) -> ModelSettings:
        engine = self.engine
        if engine.max_num_batched_tokens < engine.max_num_seqs:
            raise RuleViolation(
                "engine.maxNumBatchedTokens",
                engine.max_num_batched_tokens,
                f"must be >= engine.maxNumSeqs ({engine.max_num_seqs}) so every running sequence can decode each step",
            )
        if engine.lmcache and repository_name(self.image) == VLLM_IMAGE_REPOSITORY:
            raise RuleViolation(
                "engine.lmcache",
                engine.lmcache,
                f"needs an image that ships LMCache, and {VLLM_IMAGE_REPOSITORY} is not known to: vLLM's "
                "docker/Dockerfile installs requirements/kv_connectors.txt (lmcache) only when built with "
                "INSTALL_KV_CONNECTORS=true (default false); set image to such a build of the same vLLM release, "
                "pinned by tag or digest",
            )
        if self.serving.routing == "endpoint-picker" and not engine.prefix_caching:
            raise RuleViolation(
                "serving.routing",
                self.serving.routing,
                "needs engine.prefixCaching: the endpoint picker's prefix-cache scorer would steer requests to "
                "replicas for cache hits that never happen (set engine.prefixCaching true or routing least-request)",
            )
        return self

    def container_resources(self) -> dict[str, dict[str, str]]:
        """The predictor container's cpu and memory: `resources` plus LMCache's pinned host memory,
        which the engine allocates in its own process (so it counts against the memory cgroup)."""
        extra = self.engine.lmcache_bytes
        out: dict[str, dict[str, str]] = {}
        for side, res in (("requests", self.resources.requests), ("limits", self.resources.limits)):
            memory = res.memory if not extra else _bytes_quantity(int(quantity(res.memory)) + extra)
            out[side] = {"cpu": res.cpu, "memory": memory}
        return out

    def families_in(self, pool: NodePoolSettings) -> list[str]:
        """The instance families this model's replicas may land on in `pool` (empty: never there)."""
        if pool.name not in self.pools:
            return []
        return [f for f in pool.instance_families if self.instance_families is None or f in self.instance_families]

    def landing_families(self, pools: list[NodePoolSettings]) -> list[str]:
        """Every instance family a replica may land on across the model's pools, in pool order."""
        return list(dict.fromkeys(f for p in pools for f in self.families_in(p)))

    @property
    def store_prefix(self) -> str:
        """Where the weights live in the model store bucket (the PV mounts exactly this)."""
        return self.s3_prefix or f"{self.hugging_face_id}/{self.revision}"


def instance_family_problems(models: list[ModelSettings], pools: list[NodePoolSettings]) -> list[str]:
    """A model's `instanceFamilies` are launched by its pools and carry the GPU of its capacity profile."""
    problems: list[str] = []
    for i, model in enumerate(models):
        if model.instance_families is None:
            continue
        key = f"{NAMESPACE}:models[{i}]"
        own = [p for p in pools if p.name in model.pools]
        allowed = {f for p in own for f in p.instance_families}
        missing = [f for f in model.instance_families if f not in allowed]
        if missing and own:  # no known pool at all is the unknown-pool rule's to report
            offered = "; ".join(f"{p.name}: {list(p.instance_families)}" for p in own)
            problems.append(
                f"{key}.instanceFamilies ({missing}) are allowed by none of the model's pools ({offered}); "
                "pin a family a pool allows or add it to that pool's instanceFamilies"
            )
        if model.capacity_profile is not None:
            problems += _profile_gpu_problems(key, model.instance_families, model.capacity_profile)
    return problems


def _profile_gpu_problems(key: str, families: list[str], profile: str) -> list[str]:
    """Profiles are named `<gpu>-<model>`: the name says which GPU its thresholds were derived for."""
    gpus = {f: GPU_OF_FAMILY.get(f) for f in families}
    unmodelled = [f for f, gpu in gpus.items() if gpu is None]
    if unmodelled:
        return [
            f"{key}.instanceFamilies ({unmodelled}) carry a GPU no capacity profile models, so capacityProfile "
            f"({profile!r}) cannot describe them; pin a family of {sorted(GPU_OF_FAMILY)} or unset capacityProfile"
        ]
    distinct = sorted({gpu for gpu in gpus.values() if gpu})
    if len(distinct) > 1:
        return [
            f"{key}.instanceFamilies ({families}) carry different GPUs ({distinct}) but capacityProfile "
            f"({profile!r}) models one; pin the families of the profile's GPU"
        ]
    (gpu,) = distinct
    if not profile.startswith(f"{gpu}-"):
        return [
            f"{key}.capacityProfile ({profile!r}) must model the GPU of instanceFamilies ({families}: {gpu}), "
            f"i.e. be named '{gpu}-<model>'; the scaling thresholds were derived for the profile's GPU"
        ]
    return []


def request_fit_problems(models: list[ModelSettings], gpu_capacity: GpuCapacitySettings) -> list[str]:
    """A model's predictor requests (CPU, memory, GPUs) plus the DaemonSets of a GPU node fit some
    instance size its pools launch (contract/instances.py: Karpenter's allocatable per size)."""
    overhead = daemonset_overhead(gpu_capacity.provisioner, gpu_capacity.node_class.needs_device_plugin)
    problems: list[str] = []
    for i, model in enumerate(models):
        families = model.landing_families(gpu_capacity.pools)
        sizes = [s for f in families for s in instance_sizes(f)]
        if not sizes or model.gpus_per_replica > max(s.gpus for s in sizes):
            continue  # no pool hosts it, or too many GPUs: the pool and gpusPerReplica rules report those
        requests = model.container_resources()["requests"]  # LMCache's host memory included
        pod = pod_requests(quantity(requests["cpu"]), quantity(requests["memory"]), model.gpus_per_replica)
        if any(landing_size(f, pod, overhead) for f in families):
            continue
        largest = max(sizes, key=lambda s: (s.allocatable_memory_mib, s.allocatable_cpu_milli))
        problems.append(
            f"{NAMESPACE}:models[{i}].resources.requests (cpu {requests['cpu']}, memory {requests['memory']}, "
            f"{model.gpus_per_replica} GPU) plus the GPU node's DaemonSets ({overhead.cpu_milli}m, "
            f"{overhead.memory_mib}Mi) fit no instance size the model's pools launch ({families}); the largest "
            f"allocatable is {largest.name}: {largest.allocatable_cpu_milli}m CPU, "
            f"{largest.allocatable_memory_mib}Mi memory, {largest.gpus} GPUs"
        )
    return problems
