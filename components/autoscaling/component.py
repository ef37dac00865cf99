"""Autoscaling component: installs KEDA from its chart, then applies the ScaledObjects of
`contract.manifests.scaled_object` (one per model)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from contract.manifests.monitored import MonitoredModel
from contract.manifests.scaled_object import KEDA_VERSION, scaled_object

from ..helm import helm_release
from ..naming import type_token

KEDA_CHART = "keda"
KEDA_REPOSITORY = "https://kedacore.github.io/charts"
KEDA_NAMESPACE = "keda"


def keda_values() -> dict[str, Any]:
    """The operator and metrics server read Secrets of KEDA's namespace only, not the cluster's
    (keda-2.20.2 values.yaml permissions.*.restrict.secret): the platform's triggers query the
    in-cluster Prometheus without authentication, so no TriggerAuthentication reads a Secret."""
    restricted = {"restrict": {"secret": True}}
    return {"permissions": {"operator": restricted, "metricServer": restricted}}


@dataclass(frozen=True)
class AutoscalingArgs:
    # The served models with their merged autoscaling policies.
    models: Sequence[MonitoredModel]
    # In-cluster Prometheus (Observability): scaling decisions never wait on a remote store.
    prometheus_url: str
    provider: k8s.Provider
    # What must exist before a ScaledObject can target it (Serving, or the serving namespace).
    depends_on: Sequence[pulumi.Resource] = ()


class Autoscaling(pulumi.ComponentResource):
    scaled_objects: dict[str, k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: AutoscalingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("autoscaling", "Autoscaling"), name, None, opts)
        release = helm_release(
            f"{name}-keda",
            KEDA_CHART,
            KEDA_VERSION,
            KEDA_NAMESPACE,
            pulumi.ResourceOptions(parent=self, provider=args.provider),
            repository=KEDA_REPOSITORY,
            create_namespace=True,
            values=keda_values(),
        )
        object_opts = pulumi.ResourceOptions(
            parent=self, provider=args.provider, depends_on=[release, *args.depends_on]
        )
        self.scaled_objects = {}
        for m in args.models:
            obj = scaled_object(m, args.prometheus_url)
            self.scaled_objects[m.name] = k8s.apiextensions.CustomResource(
                f"{name}-{m.name}",
                api_version=obj["apiVersion"],
                kind=obj["kind"],
                metadata=obj["metadata"],
                spec=obj["spec"],
                opts=object_opts,
            )
        self.register_outputs({"scaledObjects": list(self.scaled_objects)})
