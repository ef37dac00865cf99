"""GPU facts shared by the program, its policies and the capacity tooling: the resource name,
the taint that keeps other pods off GPU nodes, the pool label, and the instance families."""

from __future__ import annotations

GPU_RESOURCE = "nvidia.com/gpu"
# Only pods that tolerate this taint (the predictors) land on expensive GPU nodes.
GPU_TAINT = {"key": GPU_RESOURCE, "value": "true", "effect": "NoSchedule"}
# Every GPU node carries the name of the NodePool that launched it.
POOL_LABEL = "inference-platform/gpu-pool"

# The most GPUs one instance of each family carries (g5/g6/g6e.48xlarge, p5.48xlarge: 8;
# gr6 and the fractional-GPU g6f sizes: at most 1). A replica's GPUs must fit on one node.
# These are the families with NVIDIA GPUs that vLLM supports; a typo such as "g7x" is caught.
MAX_GPUS_PER_INSTANCE = {
    "g4dn": 8, "g5": 8, "g6": 8, "g6e": 8, "g6f": 1, "gr6": 1,
    "p4d": 8, "p4de": 8, "p5": 8, "p5e": 8, "p5en": 8, "p6-b200": 8,
}  # fmt: skip
GPU_FAMILIES = tuple(MAX_GPUS_PER_INSTANCE)
