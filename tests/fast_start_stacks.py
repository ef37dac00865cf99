"""Test stacks that deploy the start features and warm headroom (docs/tasks/fast-starts-and-headroom.md);
neither committed stack enables them yet (the planner decides), so tests build them from dev."""

from __future__ import annotations

import json

from tests.harness import stack_config

SERVING = "inference-platform:serving"
GPU = "inference-platform:gpuCapacity"
CLUSTER = "inference-platform:cluster"


def fast_start_config(provisioner: str = "karpenter", ami_alias: str | None = None) -> dict[str, str]:
    """dev with SOCI parallel pull (Karpenter: its EC2NodeClass; Auto Mode: its own), the Run:ai
    streamer, a shared compile cache and one warm placeholder (gpu-spot gpuLimit 3, so maxReplicas 3
    plus the placeholder fit the 4 GPUs dev's policy config allows)."""
    config = stack_config("dev")
    gpu = json.loads(config[GPU])
    gpu["provisioner"] = provisioner
    gpu["pools"][0]["gpuLimit"] = 3
    gpu["headroom"] = {"placeholders": 1}
    if provisioner == "karpenter":
        gpu["nodeClass"]["sociParallelPull"] = True
        if ami_alias:
            gpu["nodeClass"]["amiAlias"] = ami_alias
        cluster = json.loads(config[CLUSTER])
        config[CLUSTER] = json.dumps({**cluster, "autoMode": False})
    config[GPU] = json.dumps(gpu)
    serving = json.loads(config.get(SERVING, "{}"))
    serving["fastStart"] = {"weightLoader": "runai-streamer", "compileCache": {"storageClass": "efs-sc"}}
    config[SERVING] = json.dumps(serving)
    return config
