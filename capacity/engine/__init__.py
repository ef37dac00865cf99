"""The replica engine model: a profile (GPU + model + vLLM flags) as data, the event-driven
replica that follows vLLM's scheduler, and its closed-loop steady state."""

from capacity.engine.profile import EngineProfile
from capacity.engine.profiles import DEFAULT_PROFILE, PROFILES, get_profile
from capacity.engine.replica import Finished, IterationStats, ReplicaEngine, Request
from capacity.engine.steady_state import SteadyState, predict

__all__ = [
    "DEFAULT_PROFILE",
    "EngineProfile",
    "Finished",
    "IterationStats",
    "PROFILES",
    "ReplicaEngine",
    "Request",
    "SteadyState",
    "get_profile",
    "predict",
]
