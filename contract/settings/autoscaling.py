"""Autoscaling settings: KEDA triggers on inference signals and the HPA behaviour around them.

`autoscaling.default` applies to every model; a block named after a served model overrides
it field by field (deep merge), so `pulumi config set --path
'autoscaling.<model>.triggers.queueDepth.targetPerReplica' 3` retunes one model only.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from .base import RuleViolation, Section, camel

_CRON = re.compile(r"^(\S+\s+){4}\S+$")


class Slo(Section):
    """The service level the thresholds defend, judged per request (alerts, dashboards, simulator,
    oracle, tuner and lab all use this definition).

    A request meets the SLO when its time to first token is within `ttftP95Seconds` and its time
    per output token after the first, TPOT = (e2e - TTFT) / (output tokens - 1) (what vLLM records
    per request in `vllm:request_time_per_output_token_seconds`), within `tpotP95Seconds`. A
    single-token output has no TPOT: its TTFT alone decides. A failed or unfinished request misses.
    Attainment (goodput share) is the share of requests that meet the SLO.

    The P95 in the names is the fleet objective, `OBJECTIVE`: at least 95% of requests meet the
    SLO. Each target is met by at least as many requests as both are, so meeting the objective
    puts the TTFT p95 and the TPOT p95 within their targets (what the alerts, which see one
    histogram each, watch: either firing means the objective is missed).
    """

    OBJECTIVE: ClassVar[float] = 0.95

    ttft_p95_seconds: float = Field(default=2.5, gt=0)
    tpot_p95_seconds: float = Field(default=0.1, gt=0)
    # Optional p99 end-to-end target: drawn on the dashboards, and the e2eLatency guardrail must
    # sit above it. Not part of attainment: end-to-end latency grows with the output length, so a
    # long generation misses any fixed target on an idle replica (TPOT is the length-free measure).
    e2e_p99_seconds: float | None = Field(default=None, gt=0)

    def met_by(self, ttft_s: float | None, e2e_s: float | None, output_tokens: int) -> bool:
        """One finished request against this SLO (None: it failed, or its TTFT was not seen)."""
        if ttft_s is None or e2e_s is None or ttft_s > self.ttft_p95_seconds:
            return False
        return output_tokens <= 1 or (e2e_s - ttft_s) / (output_tokens - 1) <= self.tpot_p95_seconds


class TriggerSection(Section):
    """Settings of one scaling trigger (declared in `contract.triggers`)."""

    # False for a trigger that reads no inference metric (cron): it cannot be the only one.
    reads_inference_signal: ClassVar[bool] = True
    enabled: bool


class QueueDepthTrigger(TriggerSection):
    enabled: bool = True
    target_per_replica: float = Field(
        default=4.0,
        gt=0,
        description="requests waiting per replica, averaged over the window, before another replica is bought",
    )
    window_seconds: int = Field(default=60, gt=0, description="seconds the waiting requests are averaged over")


class KvCacheTrigger(TriggerSection):
    enabled: bool = True
    target_per_replica: float = Field(
        default=0.7, gt=0, le=1, description="KV-cache fraction per replica (0..1) the fleet should run at"
    )


class PromptTokensTrigger(TriggerSection):
    enabled: bool = False
    # The planner searches the target; `python -m capacity model` / `sweep` show a replica's prefill rate.
    target_per_replica: float = Field(
        default=800.0,
        gt=0,
        description="prompt tokens per second per replica (prefill work) before another replica is bought",
    )
    window_seconds: int = Field(default=60, gt=0, description="seconds the prompt-token rate is taken over")


class SeasonalTrigger(TriggerSection):
    """Demand one period ago, moved forward by a replica's start: `sum(rate(prompt tokens[w]
    offset (period - lead)))`, so the replicas yesterday's traffic needed at this time plus
    `leadSeconds` are bought before the ramp. A forecast, not a reading of load, so it is never
    the only trigger (the reactive ones still catch what history did not foresee)."""

    reads_inference_signal: ClassVar[bool] = False
    enabled: bool = False
    target_per_replica: float = Field(
        default=800.0,
        gt=0,
        description="prompt tokens per second per replica the forecast demand is divided by",
    )
    window_seconds: int = Field(default=300, gt=0, description="seconds the past prompt-token rate is taken over")
    period_seconds: Literal[86400, 604800] = Field(
        default=86400, description="how far back the same time is: a day (86400) or a week (604800)"
    )
    lead_seconds: int = Field(
        default=300, gt=0, description="seconds ahead the forecast looks: about a new replica's start"
    )

    @model_validator(mode="after")
    def _lead_within_period(self) -> SeasonalTrigger:
        if self.lead_seconds + self.window_seconds >= self.period_seconds:
            raise RuleViolation(
                "leadSeconds",
                self.lead_seconds,
                f"plus windowSeconds must stay below periodSeconds ({self.period_seconds})",
            )
        return self

    @property
    def offset_seconds(self) -> int:
        """How far back the range ends: one period, less the lead."""
        return self.period_seconds - self.lead_seconds


class TrendTrigger(TriggerSection):
    """The prompt-token rate extrapolated `leadSeconds` ahead by a least-squares line through its
    last `rangeSeconds` (`predict_linear` over a subquery): catches a ramp history did not
    foresee before a queue forms. A forecast, so never the only trigger."""

    reads_inference_signal: ClassVar[bool] = False
    enabled: bool = False
    target_per_replica: float = Field(
        default=800.0, gt=0, description="prompt tokens per second per replica the extrapolated rate is divided by"
    )
    window_seconds: int = Field(default=60, gt=0, description="seconds each rate in the fit is taken over")
    range_seconds: int = Field(default=600, gt=0, description="seconds of recent rates the line is fitted to")
    step_seconds: int = Field(default=60, gt=0, description="seconds between the fitted rates (the subquery step)")
    lead_seconds: int = Field(default=300, gt=0, description="seconds ahead the line is read")

    @model_validator(mode="after")
    def _steps_in_range(self) -> TrendTrigger:
        if self.step_seconds * 2 > self.range_seconds:
            raise RuleViolation(
                "stepSeconds",
                self.step_seconds,
                f"must fit twice in rangeSeconds ({self.range_seconds}): a line needs two points",
            )
        return self


class LatencyTrigger(TriggerSection):
    enabled: bool = True
    quantile: float = Field(
        default=0.99, gt=0, lt=1, description="the end-to-end latency quantile the guardrail watches"
    )
    threshold_seconds: float = Field(
        default=40.0, gt=0, description="end-to-end latency at that quantile above which replicas are added"
    )
    window_seconds: int = Field(default=120, gt=0, description="seconds of requests the quantile is taken over")


class TtftTrigger(TriggerSection):
    enabled: bool = False
    quantile: float = Field(
        default=0.95, gt=0, lt=1, description="the time-to-first-token quantile the trigger watches"
    )
    threshold_seconds: float = Field(
        default=3.0, gt=0, description="time to first token at that quantile above which replicas are added"
    )
    window_seconds: int = Field(default=120, gt=0, description="seconds of requests the quantile is taken over")


class CronTrigger(TriggerSection):
    reads_inference_signal: ClassVar[bool] = False
    enabled: bool = False
    timezone: str = "UTC"
    start: str = "0 8 * * 1-5"
    end: str = "0 20 * * 1-5"
    desired_replicas: int = Field(default=2, ge=1, description="replicas held warm inside the cron window")

    @field_validator("start", "end")
    @classmethod
    def _cron(cls, value: str) -> str:
        if not _CRON.match(value.strip()):
            raise ValueError('must be a 5-field cron expression like "0 8 * * 1-5"')
        return value


class Triggers(Section):
    """One field per trigger of `contract.triggers.TRIGGERS`, keyed by its `Trigger.key`."""

    queue_depth: QueueDepthTrigger = Field(default_factory=QueueDepthTrigger)
    kv_cache: KvCacheTrigger = Field(default_factory=KvCacheTrigger)
    prompt_tokens: PromptTokensTrigger = Field(default_factory=PromptTokensTrigger)
    seasonal: SeasonalTrigger = Field(default_factory=SeasonalTrigger)
    trend: TrendTrigger = Field(default_factory=TrendTrigger)
    e2e_latency: LatencyTrigger = Field(default_factory=LatencyTrigger)
    ttft: TtftTrigger = Field(default_factory=TtftTrigger)
    cron: CronTrigger = Field(default_factory=CronTrigger)

    def sections(self) -> dict[str, TriggerSection]:
        """Every trigger's settings by its camelCase key."""
        return {camel(name): getattr(self, name) for name in type(self).model_fields}

    @model_validator(mode="after")
    def _one_signal(self) -> Triggers:
        sections = self.sections()
        if not any(t.enabled for t in sections.values() if t.reads_inference_signal):
            first = next(key for key, t in sections.items() if t.reads_inference_signal)
            raise RuleViolation(f"{first}.enabled", False, "at least one inference signal trigger must be enabled")
        return self


class ScalingPolicy(Section):
    type: Literal["Pods", "Percent"]
    value: int = Field(gt=0, description="replicas (Pods) or percent of them (Percent) the HPA may change per period")
    period_seconds: int = Field(gt=0, le=1800, description="seconds over which the policy's value holds")


class ScalingRules(Section):
    # Kubernetes' HPA: the lowest recommendation over the window wins when scaling up, the
    # highest when scaling down (`horizontal.go` stabilizeRecommendationWithBehaviors).
    stabilization_window_seconds: int = Field(
        ge=0, le=3600, description="seconds of past recommendations the HPA weighs before changing the replica count"
    )
    select_policy: Literal["Max", "Min", "Disabled"] = "Max"
    policies: list[ScalingPolicy] = Field(min_length=1)


def _scale_up() -> ScalingRules:
    # Fast: a new GPU replica takes minutes to become ready, so buy it early.
    return ScalingRules(
        stabilization_window_seconds=0,
        select_policy="Max",
        policies=[ScalingPolicy(type="Pods", value=2, period_seconds=60)],
    )


def _scale_down() -> ScalingRules:
    # Slow: one replica per 5 minutes after 10 minutes of lower demand, so bursts do not thrash.
    return ScalingRules(
        stabilization_window_seconds=600,
        select_policy="Min",
        policies=[ScalingPolicy(type="Pods", value=1, period_seconds=300)],
    )


class Behavior(Section):
    scale_up: ScalingRules = Field(default_factory=_scale_up)
    scale_down: ScalingRules = Field(default_factory=_scale_down)

    @model_validator(mode="after")
    def _down_slower(self) -> Behavior:
        up, down = self.scale_up.stabilization_window_seconds, self.scale_down.stabilization_window_seconds
        if down < up:
            raise RuleViolation(
                "scaleDown.stabilizationWindowSeconds",
                down,
                f"must be >= scaleUp.stabilizationWindowSeconds ({up}): scale down slower than up",
            )
        return self


class ModelAutoscaling(Section):
    """The complete, merged autoscaling policy of one model."""

    min_replicas: int = Field(default=1, ge=0, description="replicas kept warm whatever the triggers say")
    max_replicas: int = Field(default=4, ge=1, le=100, description="the most replicas the triggers may ask for")
    polling_interval_seconds: int = Field(
        default=15, ge=5, le=300, description="seconds between KEDA's reads of the triggers"
    )
    cooldown_period_seconds: int = Field(
        default=300, ge=0, description="seconds after the last active trigger before KEDA scales 1 -> 0 (minReplicas 0)"
    )
    # Through any trigger, AverageValue or Value; null runs without a fallback.
    fallback_replicas: int | None = Field(
        default=1, ge=1, description="replicas KEDA holds while Prometheus is unreachable"
    )
    # While Prometheus is unreachable KEDA holds fallbackReplicas; "currentReplicasIfHigher" never
    # shrinks a fleet that is busy when the metrics go away.
    fallback_behavior: Literal["static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"] = (
        "currentReplicasIfHigher"
    )
    fallback_failure_threshold: int = Field(
        default=3, ge=1, le=20, description="consecutive failed metric reads before the fallback applies"
    )
    slo: Slo = Field(default_factory=Slo)
    triggers: Triggers = Field(default_factory=Triggers)
    behavior: Behavior = Field(default_factory=Behavior)

    @model_validator(mode="after")
    def _consistent(self) -> ModelAutoscaling:
        if self.max_replicas < self.min_replicas:
            raise RuleViolation("maxReplicas", self.max_replicas, f"must be >= minReplicas ({self.min_replicas})")
        if self.fallback_replicas is not None:
            self._fallback_can_act(self.fallback_replicas)
        if self.min_replicas == 0 and not self.triggers.cron.enabled:
            raise RuleViolation(
                "minReplicas",
                0,
                "needs triggers.cron.enabled: a model at zero replicas exports no vLLM metrics, so no "
                "inference trigger can wake it; the cron window brings it up for its batch work "
                "(or keep minReplicas >= 1)",
            )
        latency, e2e_slo = self.triggers.e2e_latency, self.slo.e2e_p99_seconds
        if latency.enabled and e2e_slo is not None and latency.threshold_seconds <= e2e_slo:
            raise RuleViolation(
                "triggers.e2eLatency.thresholdSeconds",
                latency.threshold_seconds,
                f"must be above slo.e2eP99Seconds ({e2e_slo}): it is a guardrail, "
                "queue and KV triggers should scale before the SLO is at risk",
            )
        ttft = self.triggers.ttft
        if ttft.enabled and ttft.threshold_seconds <= self.slo.ttft_p95_seconds:
            raise RuleViolation(
                "triggers.ttft.thresholdSeconds",
                ttft.threshold_seconds,
                f"must be above slo.ttftP95Seconds ({self.slo.ttft_p95_seconds})",
            )
        return self

    def _fallback_can_act(self, replicas: int) -> None:
        """KEDA 2.20.2 falls back through every trigger type (`pkg/fallback` `doFallback`): an
        AverageValue trigger reports target x fallbackReplicas, a Value trigger target x
        fallbackReplicas / ready pods, neither target truncated, so a 0.7 KV target or a 2.5
        queue target fall back to exactly fallbackReplicas. Its admission webhook only asks for
        one trigger that is not cpu or memory (`CheckFallbackValid`), which every trigger here
        is. Left to check: the HPA caps the fallback at maxReplicas, so a larger one is a typo."""
        if replicas > self.max_replicas:
            raise RuleViolation("fallbackReplicas", replicas, f"must be <= maxReplicas ({self.max_replicas})")

    def windows(self) -> dict[str, int]:
        """Every PromQL window in use, by key path, for the scrape-interval rule."""
        return {
            f"triggers.{key}.windowSeconds": t.window_seconds  # type: ignore[attr-defined]  # only sections whose model has the field
            for key, t in self.triggers.sections().items()
            if t.enabled and "window_seconds" in type(t).model_fields
        }


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Override wins key by key; nested mappings merge, lists and scalars replace."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


DEFAULT_KEY = "default"


def merged_policy(*scopes: dict[str, Any]) -> ModelAutoscaling:
    """The policy of the built-in defaults with each scope merged on top, field by field.

    `pulumi config set --path 'autoscaling.default.behavior.scaleDown.stabilizationWindowSeconds'
    900` writes one leaf; merging it onto the defaults (not onto an empty `scaleDown`) keeps the
    default `policies` and `selectPolicy`, so a one-key retune deploys. Lists replace whole."""
    merged: dict[str, Any] = ModelAutoscaling().model_dump(by_alias=True, mode="json")
    for scope in scopes:
        merged = deep_merge(merged, scope)
    return ModelAutoscaling.model_validate(merged)
