"""GPU facts shared by the program, its policies and the capacity tooling: the resource name,
the taint that keeps other pods off GPU nodes, the pool label, the instance families, the GPU
each carries and the node label that names a node's family."""

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
    "g4dn": 8,
    "g5": 8,
    "g6": 8,
    "g6e": 8,
    "g6f": 1,
    "gr6": 1,
    "p4d": 8,
    "p4de": 8,
    "p5": 8,
    "p5e": 8,
    "p5en": 8,
    "p6-b200": 8,
}
GPU_FAMILIES = tuple(MAX_GPUS_PER_INSTANCE)

# Instance family -> the GPU it carries, by the name capacity profiles start with
# (`<gpu>-<model short>`, capacity/engine/profiles.py; the engine's data/gpus.yaml names).
# Families whose GPU the capacity engine has no datasheet for are absent: no profile models them.
GPU_OF_FAMILY = {
    "g5": "a10g",
    "g6": "l4",
    "g6e": "l40s",
    "p4de": "a100-80gb",
    "p5": "h100",
    "p5e": "h200",
    "p5en": "h200",
}

# Where each provisioner puts its well-known instance labels (NodePool requirements and node labels).
# Karpenter v1.14.1: pkg/apis/v1/labels.go registers karpenter.k8s.aws/instance-family in
# WellKnownLabels, and pkg/cloudprovider/cloudprovider.go instanceToNodeClaim labels each node with
# every single-valued instance-type requirement (its family among them); its scheduling docs
# (website/content/en/docs/concepts/scheduling.md, "Labels"): well-known labels "may be specified as
# NodePool requirements or pod scheduling constraints". EKS Auto Mode uses eks.amazonaws.com/ instead
# (EKS user guide, create-node-pool "EKS Auto Mode Supported Labels"; auto-accelerated selects pods
# onto nodes by these labels with a nodeSelector).
INSTANCE_LABEL_PREFIX = {"auto-mode": "eks.amazonaws.com", "karpenter": "karpenter.k8s.aws"}


def instance_family_label(provisioner: str) -> str:
    """The node label holding the EC2 instance family (g5, g6, ...) under this provisioner."""
    return f"{INSTANCE_LABEL_PREFIX[provisioner]}/instance-family"
