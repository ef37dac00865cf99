"""What every planned policy keeps, whatever the search traffic asked for: the platform's
guardrail triggers on, with thresholds healthy traffic does not reach, and maxReplicas as a
cost ceiling with headroom. A policy replayed on traffic it was not planned on is then still
protected by the ceiling and the guardrails.

- KV demand (`triggers.kvCache`): its target per replica is at least the KV fraction a full
  replica holds for the searched traffic: maxNumSeqs sequences (the most vLLM runs at once), each
  holding the traffic's mean prompt plus half its mean output (a decoding sequence is halfway
  through its answer on average), over the profile's KV cache; at most KV_CEILING. A replica
  above that is full, so the trigger fires at saturation, not on healthy load.
- Latency (`triggers.e2eLatency`): its threshold is above the end-to-end latency an SLO-meeting
  request at the guardrail's quantile of the searched output lengths takes (TTFT target + TPOT
  target x (output - 1)), and above `slo.e2eP99Seconds` when one is set. Each SLO-meeting
  request finishes within that bound for its own length, and the bound grows with length, so the
  quantile over requests that meet the SLO stays under it: the trigger fires only when requests
  are slower than the SLO allows.
- `maxReplicas` is the pools' replica budget for the model (`stack.replica_budget`: what the GPU
  limits of the pools it may run on hold, after the maxReplicas the stack gives the other models
  there; the settings refuse more), not the search traffic's peak need: while the triggers stay
  quiet the ceiling costs nothing, and a burst the search never saw is bounded by the pools, not
  by what the search happened to need. Models sharing pools split them by their ceilings, so
  the one planned first takes what the others' current ceilings leave.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from capacity.engine import EngineProfile
from capacity.planning.stack import Policy, StackModel, replica_budget
from capacity.workload.traces import Trace

KV_CEILING = 0.95  # the highest KV target searched: at a full cache vLLM preempts, too late to scale
MAX_REPLICAS_RULE = "the pools' replica budget for the model"  # after the other models' maxReplicas on them


@dataclass(frozen=True)
class Guardrails:
    """The planner's rules for one model and its searched traffic. `kept`: False lets the search
    turn the guardrail triggers off (`--allow-dropping-guardrails`); the ceiling holds either way."""

    kept: bool
    tokens_in_flight: float  # per sequence: mean prompt + half the mean output of the searched traffic
    e2e_bound_s: float  # what an SLO-meeting request at the guardrail's quantile of output lengths takes
    max_replicas: int

    def kv_floor(self, profile: EngineProfile) -> float:
        """The KV fraction a full replica of `profile` holds for this traffic, at most KV_CEILING."""
        return round(min(KV_CEILING, profile.max_num_seqs * self.tokens_in_flight / profile.kv_cache_tokens), 3)

    def kv_target(self, profile: EngineProfile, headroom: float) -> float:
        """`headroom` of the way from the full-replica floor (0) up to KV_CEILING (1)."""
        floor = self.kv_floor(profile)
        # Rounded up to the printed two decimals: rounded to nearest, a headroom of 0 could land
        # below the floor (0.112 -> 0.11) and break the rule it stands for.
        return math.ceil(round((floor + headroom * (KV_CEILING - floor)) * 100, 6)) / 100

    def breaks(self, policy: Policy, profile: EngineProfile) -> list[str]:
        """The rules a policy of this model breaks, one line each (none for a planned one)."""
        problems = (
            []
            if policy.max_replicas == self.max_replicas
            else [f"maxReplicas {policy.max_replicas} is not {MAX_REPLICAS_RULE} ({self.max_replicas})"]
        )
        if not self.kept:
            return problems
        kv, e2e, floor = policy.triggers.kv_cache, policy.triggers.e2e_latency, self.kv_floor(profile)
        if not kv.enabled:
            problems.append("the kvCache guardrail is off")
        elif kv.target_per_replica < floor:
            problems.append(
                f"triggers.kvCache.targetPerReplica {kv.target_per_replica:g} is below {floor:g}, "
                "what a full replica holds for this traffic"
            )
        if not e2e.enabled:
            problems.append("the e2eLatency guardrail is off")
        elif e2e.threshold_seconds < self.e2e_bound_s:
            problems.append(
                f"triggers.e2eLatency.thresholdSeconds {e2e.threshold_seconds:g} is below "
                f"{self.e2e_bound_s:g} s, what an SLO-meeting request takes at the guardrail's quantile"
            )
        return problems

    def describe(self, policy: Policy, profile: EngineProfile, search_peak: int) -> str:
        """One line for the plan's output and the evidence comment: the rule each value follows."""
        ceiling = (
            f"maxReplicas {policy.max_replicas}: {MAX_REPLICAS_RULE}, a cost ceiling, not the search's need "
            f"(it peaked at {search_peak})"
        )
        if not self.kept:
            return f"{ceiling}; guardrails may be off (--allow-dropping-guardrails)"
        kv, e2e = policy.triggers.kv_cache, policy.triggers.e2e_latency
        return (
            f"{ceiling}; kvCache {kv.target_per_replica:g} >= {self.kv_floor(profile):g} (a full replica's KV for "
            f"this traffic); e2eLatency {e2e.threshold_seconds:g} s >= {self.e2e_bound_s:g} s (an SLO-meeting "
            f"request at the p{e2e.quantile * 100:g} output length)"
        )


def guardrails(sm: StackModel, traces: Sequence[Trace], kept: bool = True) -> Guardrails:
    """The rules for `sm` planned on `traces` (the searched traffic)."""
    prompts = np.concatenate([t.prompt_tokens for t in traces])
    outputs = np.concatenate([t.output_tokens for t in traces])
    policy = sm.policy
    quantile = policy.triggers.e2e_latency.quantile
    longest = float(np.quantile(outputs, quantile)) if len(outputs) else 1.0
    bound = policy.slo.ttft_p95_seconds + policy.slo.tpot_p95_seconds * max(longest - 1, 0.0)
    bound = max(bound, policy.slo.e2e_p99_seconds or 0.0)
    in_flight = float(prompts.mean() + outputs.mean() / 2) if len(prompts) else 0.0
    return Guardrails(kept, round(in_flight, 1), round(bound, 1), replica_budget(sm))
