"""The replica engine model from physics: architectures and GPUs as data (hardware), a roofline
step time (roofline) with three fitted efficiency factors (fit), profiles (GPU + model + vLLM
flags), the event-driven replica that follows vLLM's scheduler, its closed-loop steady state,
and which bound limits it (explain)."""

from capacity.engine.profile import EngineProfile
from capacity.engine.profiles import DEFAULT_PROFILE, PROFILES, get_profile, profile_names
from capacity.engine.replica import Finished, IterationStats, ReplicaEngine, Request
from capacity.engine.steady_state import SteadyState, predict

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "EngineProfile",
    "Finished",
    "IterationStats",
    "ReplicaEngine",
    "Request",
    "SteadyState",
    "get_profile",
    "predict",
    "profile_names",
]
