"""The toy scenario the simulator's tests replay: an engine profile of small, fast steps and a
40k-token KV cache (numbers chosen for readable timings, not any GPU), a step of traffic and a
queue-depth policy that scales it."""

from capacity.engine import EngineProfile
from capacity.engine.roofline import StepCost
from contract.settings.autoscaling import ModelAutoscaling

TOY = EngineProfile(
    "toy",
    "toy",
    "toy",
    max_num_seqs=16,
    max_num_batched_tokens=2048,
    kv_cache_tokens=40_000,
    max_model_len=4096,
    cost=StepCost(step_s=0.02, seq_s=0.002, token_s=1e-4),
)

# 0.5 req/s, then 12 from 120 s for 600 s, 1500 s in all.
STEP = "synthetic:step:base=0.5,peak=12,at=120,length=600,duration=1500,prompt=256,output=64"
# Scales 1..6 on queue depth 2 (30 s window), down one pod per 30 s after a 60 s window.
POLICY = ModelAutoscaling.model_validate(
    {
        "minReplicas": 1,
        "maxReplicas": 6,
        "triggers": {"queueDepth": {"targetPerReplica": 2, "windowSeconds": 30}},
        "behavior": {
            "scaleDown": {
                "stabilizationWindowSeconds": 60,
                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 30}],
            }
        },
    }
)
