"""The service level as the simulator judges it, as plain data: per request, TTFT and TPOT
against their targets (the rule `contract.settings.autoscaling.Slo` states), and which requests
no fleet can serve within it.

A request meets the SLO when it finished, its TTFT <= `ttft_s` and its TPOT <= `tpot_s`; a
single-token output has no TPOT (NaN) and is judged on its TTFT alone. Attainment is the share
of feasible requests that meet it; the fleet objective is `objective` of them (the P95 of the
key names). A request is infeasible when no number of replicas serves it within the SLO: vLLM
refuses it (longer than max_model_len or the KV cache), or even an idle replica of the engine
profile misses its TTFT or TPOT target. Infeasible requests are counted apart: no policy and
no oracle is charged for them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capacity.engine import EngineProfile, Finished, ReplicaEngine, Request
from capacity.sim.simulator import OK, admissible
from capacity.workload.traces import Trace


@dataclass(frozen=True)
class SloTargets:
    ttft_s: float
    tpot_s: float
    objective: float  # share of requests that must meet both targets


def met(outcome: np.ndarray, ttft: np.ndarray, tpot: np.ndarray, slo: SloTargets) -> np.ndarray:
    """Per request: finished, TTFT and TPOT within target (NaN TPOT: single token, TTFT only).
    `contract.settings.autoscaling.Slo.met_by` is the same rule for one measured request."""
    with np.errstate(invalid="ignore"):
        met: np.ndarray = (outcome == OK) & (ttft <= slo.ttft_s) & ~(tpot > slo.tpot_s)
        return met


def attainment(met_mask: np.ndarray, feasible_mask: np.ndarray) -> float:
    """The share of feasible requests that meet the SLO (1.0 when none is feasible)."""
    n = int(feasible_mask.sum())
    return float((met_mask & feasible_mask).sum() / n) if n else 1.0


def idle_latencies(trace: Trace, profile: EngineProfile) -> tuple[np.ndarray, np.ndarray]:
    """Each request's TTFT and TPOT alone on a warm replica of the profile: the best any fleet
    can do (NaN TTFT where vLLM refuses the request, NaN TPOT for a single-token output).
    One engine run per distinct (prompt, output) shape."""
    ttft = np.full(len(trace), np.nan)
    tpot = np.full(len(trace), np.nan)
    ok = admissible(trace, profile)
    shapes: dict[tuple[int, int], tuple[float, float]] = {}
    for i in np.flatnonzero(ok):
        shape = (int(trace.prompt_tokens[i]), int(trace.output_tokens[i]))
        if shape not in shapes:
            done = _alone(profile, *shape)
            decode = done.finish_time - done.first_token_time
            shapes[shape] = (done.ttft, decode / (shape[1] - 1) if shape[1] > 1 else np.nan)
        ttft[i], tpot[i] = shapes[shape]
    return ttft, tpot


def _alone(profile: EngineProfile, prompt_tokens: int, output_tokens: int) -> Finished:
    """One request on an idle replica, run event by event until it finishes."""
    engine = ReplicaEngine(profile, 0.0)
    engine.submit(Request(0, 0.0, prompt_tokens, output_tokens), 0.0)
    finished: list[Finished] = []
    while not finished and (t := engine.next_event_time()) is not None:
        finished = engine.advance(t)
    return finished[0]


def feasible(trace: Trace, profile: EngineProfile, slo: SloTargets) -> np.ndarray:
    """Per request: could some fleet serve it within the SLO (an idle replica meets it)?"""
    ttft, tpot = idle_latencies(trace, profile)
    with np.errstate(invalid="ignore"):
        return (ttft <= slo.ttft_s) & ~(tpot > slo.tpot_s)
