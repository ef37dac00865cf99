"""The served models as Observability and Autoscaling see them: each with its merged
autoscaling policy and the selectors of its series and objects (built once by Platform and
passed to both, so neither needs the whole stack's settings)."""

from __future__ import annotations

from dataclasses import dataclass

from contract import names, signals
from contract.settings import ModelAutoscaling, ModelSettings, StackSettings


@dataclass(frozen=True)
class ScaledTarget:
    """What a ScaledObject needs of one model: its merged policy, the scope of its series, and
    the workload it scales (a bare policy can be given one to replay it, `capacity.planning`)."""

    policy: ModelAutoscaling
    scope: signals.Scope
    workload: signals.Workload


@dataclass(frozen=True)
class MonitoredModel(ScaledTarget):
    """Everything rules, dashboards and ScaledObjects need to find one model's series."""

    model: ModelSettings

    @property
    def name(self) -> str:
        return self.model.name


def monitored_models(settings: StackSettings) -> list[MonitoredModel]:
    namespace = settings.serving.namespace
    return [
        MonitoredModel(
            model=model,
            policy=settings.autoscaling_for(model.name),
            scope=signals.Scope(model.name, namespace),
            workload=signals.Workload(
                namespace=namespace,
                deployment=names.deployment_name(model),
                hpa=names.hpa_name(model),
            ),
        )
        for model in settings.models
    ]
