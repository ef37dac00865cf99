"""How long a new replica takes to serve, from the start features a stack deploys.

`derived_startup` is a pure function of the features (provisioner, SOCI parallel pull, the GPU
nodes' AMI family, the weight loader, a shared compile cache, the model's size); every figure
names its source and how far it can be trusted. `stack_startup` lays a stack's own measured
figures (`capacityPlanning.startup` keys it sets) over the derived ones. The simulator gets the
result as plain numbers (capacity/planning/stack.py); docs/tasks/fast-starts-and-headroom.md explains it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .settings import StackSettings
from .settings.capacity_planning import SecondsRange
from .settings.models import ModelSettings, quantity

# measured: a published measurement of this step on this setup; extrapolated: a published
# measurement on other hardware or another path, carried over by a stated ratio or margin;
# assumed: the platform's own estimate, not measured anywhere it can cite; stack: the stack's own
# figure (capacityPlanning.startup), which the operator vouches for.
Trust = Literal["measured", "extrapolated", "assumed", "stack"]

BLUEPRINT = "aws-samples/karpenter-blueprints blueprints/soci-snapshotter/README.md"
RUNAI_WHITEPAPER = "Run:ai Model Streamer: Performance Benchmarks (run.ai blog, 2024-10-29; NVIDIA technical blog)"


@dataclass(frozen=True)
class Figure:
    """A duration range in seconds (or, for the weight load, a rate in GiB/s as low == high)."""

    low: float
    high: float
    source: str
    trust: Trust


@dataclass(frozen=True)
class StartFeatures:
    """What a stack deploys that decides how fast a replica starts (plain data)."""

    provisioner: Literal["auto-mode", "karpenter"]
    ami_family: Literal["al2023", "bottlerocket"]
    soci_parallel_pull: bool
    weight_loader: Literal["default", "runai-streamer"]
    compile_cache: bool
    size_gib: float


@dataclass(frozen=True)
class StartupFigures:
    node_provisioning_s: Figure
    image_pull_s: Figure
    weight_load_gib_per_s: Figure
    engine_init_s: Figure

    def figures(self) -> dict[str, Figure]:
        """Each figure by its `capacityPlanning.startup` key."""
        return {
            "nodeProvisioningSeconds": self.node_provisioning_s,
            "imagePullSeconds": self.image_pull_s,
            "weightLoadGiBPerSecond": self.weight_load_gib_per_s,
            "engineInitSeconds": self.engine_init_s,
        }


# EC2 launch to a Ready GPU node with its device plugin: the platform's earlier free-standing default.
NODE_PROVISIONING = Figure(60, 120, "the platform's estimate (no published GPU-node launch time found)", "assumed")

# A ~10 GB vLLM image, default containerd pull on AL2023: 1m52.33s for 10,778,400,361 bytes
# (karpenter-blueprints@48a2104, the vLLM DLC) and 2m10.813s for 9,354,342,327 bytes (@529b88c,
# vLLM DLC 0.22.0), on instances with > 8000 Mbps network and EBS bandwidth and a 16,000 IOPS /
# 1,000 MiB/s gp3 root. Bottlerocket without SOCI was not measured: the same range is used.
PULL_DEFAULT = Figure(112.3, 130.8, f"{BLUEPRINT} (default containerd, AL2023, two runs)", "measured")
# SOCI parallel pull/unpack on AL2023: 59.813 s (@48a2104) and 39.553 s (@529b88c), same images.
PULL_SOCI_AL2023 = Figure(39.6, 59.8, f"{BLUEPRINT} (SOCI parallel mode, AL2023, two runs)", "measured")
# SOCI on Bottlerocket (its faster decompression library): 44.974 s (@48a2104) and 23.229 s (@529b88c).
PULL_SOCI_BOTTLEROCKET = Figure(23.2, 45.0, f"{BLUEPRINT} (SOCI parallel mode, Bottlerocket, two runs)", "measured")
# Auto Mode's own SOCI on its Bottlerocket GPU nodes: no published pull time; the self-managed
# Bottlerocket figures, carried over.
PULL_SOCI_AUTO_MODE = Figure(
    23.2, 45.0, f"{BLUEPRINT} (Bottlerocket SOCI figures; Auto Mode's own not published)", "extrapolated"
)

# Weights through Mountpoint with vLLM's safetensors loader: the platform's earlier default rate.
WEIGHT_LOAD_DEFAULT_GIB_S = 0.5
WEIGHT_LOAD_DEFAULT = Figure(
    WEIGHT_LOAD_DEFAULT_GIB_S,
    WEIGHT_LOAD_DEFAULT_GIB_S,
    "the platform's estimate of vLLM's safetensors loader over Mountpoint (not measured)",
    "assumed",
)
# Run:ai Model Streamer against vLLM's safetensors loader on a g5.12xlarge (A10G), gp3 SSD: 14.34 s
# at concurrency 16 against 47.99 s for Llama 3 8B. The ratio is carried over to the Mountpoint
# mount; the node's network bandwidth caps it, which is not modelled.
RUNAI_SPEEDUP = 47.99 / 14.34
WEIGHT_LOAD_RUNAI = Figure(
    WEIGHT_LOAD_DEFAULT_GIB_S * RUNAI_SPEEDUP,
    WEIGHT_LOAD_DEFAULT_GIB_S * RUNAI_SPEEDUP,
    f"{RUNAI_WHITEPAPER}: 3.35x the safetensors loader on g5 gp3, applied to the Mountpoint rate",
    "extrapolated",
)

# vLLM start after the weights: torch.compile, memory profiling, KV cache, CUDA graphs.
ENGINE_INIT = Figure(20, 60, "the platform's estimate (no published figure for this engine and GPU)", "assumed")
# A warm compile cache skips Inductor's compilation (vLLM docs/design/torch_compile.md: "Inductor
# compilation is completely bypassed"); compilation is ~39 s of a 35B MoE's cold start on one GPU
# (route179.dev, 2026-06-30, "Optimizing vLLM cold start with model streaming and compile caching")
# and a cache load 1-3 s in published vLLM logs. Taken off the estimate: 15 s at the low end, 30 s at
# the high end, never below 10 s (profiling and CUDA graph capture remain).
COMPILE_SAVING_S = (15.0, 30.0)
ENGINE_INIT_FLOOR_S = 10.0
ENGINE_INIT_CACHED = Figure(
    max(ENGINE_INIT_FLOOR_S, ENGINE_INIT.low - COMPILE_SAVING_S[0]),
    max(ENGINE_INIT_FLOOR_S, ENGINE_INIT.high - COMPILE_SAVING_S[1]),
    "the estimate less the compile time a warm cache skips (vLLM torch_compile design doc; one published log)",
    "extrapolated",
)


def image_pull(features: StartFeatures) -> Figure:
    if not features.soci_parallel_pull:
        return PULL_DEFAULT
    if features.provisioner == "auto-mode":
        return PULL_SOCI_AUTO_MODE
    return PULL_SOCI_BOTTLEROCKET if features.ami_family == "bottlerocket" else PULL_SOCI_AL2023


def derived_startup(features: StartFeatures) -> StartupFigures:
    """The startup ranges that follow from the start features alone, each with its source."""
    return StartupFigures(
        node_provisioning_s=NODE_PROVISIONING,
        image_pull_s=image_pull(features),
        weight_load_gib_per_s=WEIGHT_LOAD_RUNAI if features.weight_loader == "runai-streamer" else WEIGHT_LOAD_DEFAULT,
        engine_init_s=ENGINE_INIT_CACHED if features.compile_cache else ENGINE_INIT,
    )


def start_features(settings: StackSettings, model: ModelSettings) -> StartFeatures:
    """The start features `settings` deploys for `model`'s replicas."""
    gpu, fast = settings.gpu_capacity, settings.serving.fast_start
    return StartFeatures(
        provisioner=gpu.provisioner,
        ami_family="bottlerocket" if gpu.ami_family == "bottlerocket" else "al2023",
        soci_parallel_pull=gpu.soci_parallel_pull,
        weight_loader=fast.weight_loader,
        compile_cache=fast.compile_cache is not None,
        size_gib=model.size_gib,
    )


def _stack_range(value: SecondsRange | None, derived: Figure, key: str) -> Figure:
    if value is None:
        return derived
    return Figure(value.min, value.max, f"the stack's capacityPlanning.startup.{key}", "stack")


def stack_startup(settings: StackSettings, model: ModelSettings) -> StartupFigures:
    """The derived figures with the stack's own (`capacityPlanning.startup` keys it sets) over them."""
    derived = derived_startup(start_features(settings, model))
    own = settings.capacity_planning.startup
    rate = own.weight_load_gib_per_second
    return StartupFigures(
        node_provisioning_s=_stack_range(
            own.node_provisioning_seconds, derived.node_provisioning_s, "nodeProvisioningSeconds"
        ),
        image_pull_s=_stack_range(own.image_pull_seconds, derived.image_pull_s, "imagePullSeconds"),
        weight_load_gib_per_s=derived.weight_load_gib_per_s
        if rate is None
        else Figure(rate, rate, "the stack's capacityPlanning.startup.weightLoadGiBPerSecond", "stack"),
        engine_init_s=_stack_range(own.engine_init_seconds, derived.engine_init_s, "engineInitSeconds"),
    )


def headroom_for(settings: StackSettings, model: ModelSettings) -> int:
    """The placeholders whose nodes a new replica of `model` can take with its image already there:
    all of them if the placeholders are shaped like its replica (`gpuCapacity.headroom.model`), or
    like a replica of a model with the same image, GPU count, pools and instance families whose
    requests are no smaller (one buffer serves every such model); else none."""
    held = settings.headroom_model()
    if held is None:
        return 0
    same_node = (
        held.image == model.image
        and held.gpus_per_replica == model.gpus_per_replica
        and held.pools == model.pools
        and held.instance_families == model.instance_families
    )
    ours, theirs = model.container_resources()["requests"], held.container_resources()["requests"]
    fits = all(quantity(ours[r]) <= quantity(theirs[r]) for r in ("cpu", "memory"))
    return settings.gpu_capacity.headroom.placeholders if same_node and fits else 0
