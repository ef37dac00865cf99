"""A throwaway sixth scaling trigger, declared the way `contract/triggers.py` and its settings
field would declare it. Tests of every consumer (the ScaledObject and dashboards, the collector
and report, the simulator and tuner) pass `triggers=SIX` to prove a new trigger needs no edit
there."""

from __future__ import annotations

from pydantic import Field

from contract.settings.autoscaling import ModelAutoscaling, Triggers, TriggerSection
from contract.signals import Query, Vllm
from contract.triggers import TRIGGERS, Trigger


class WaitingNowTrigger(TriggerSection):
    enabled: bool = True
    target_per_replica: float = Field(default=2.0, gt=0)
    window_seconds: int = Field(default=30, gt=0)


class SixTriggers(Triggers):
    waiting_now: WaitingNowTrigger = Field(default_factory=WaitingNowTrigger)


class SixTriggerAutoscaling(ModelAutoscaling):
    triggers: SixTriggers = Field(default_factory=SixTriggers)


WAITING_NOW = Trigger(
    key="waitingNow",
    keda_name="waiting-now",
    metric_type="AverageValue",
    why="waiting requests add up across replicas",
    target_key="targetPerReplica",
    query=lambda t: Query(Vllm.REQUESTS_WAITING, "sum_avg_over_time", t.window_seconds),
    label="Waiting now",
    unit="short",
    search=lambda policy: (1, 2, 4),
)
SIX = (*TRIGGERS, WAITING_NOW)
