"""Headroom: warm GPU capacity as placeholder pods of the lowest priority (the Kubernetes node
overprovisioning pattern), so a new replica skips node launch and image pull.

Each placeholder is shaped like one replica of `gpuCapacity.headroom.model`: the serving image
(running `sleep`, so the image is on the node), its GPUs, CPU and memory requests (Karpenter launches
the instance size the replica lands on) and its pool and instance-family affinity and GPU toleration.
Karpenter launches nodes for Pending placeholders like for any pending pod, within the pools' GPU
limits. A predictor that finds no room preempts one: the scheduler evicts the lowest priority first
(kubernetes/website content/en/docs/tasks/administer-cluster/node-overprovisioning.md: "the control
plane will pick one these placeholder pods as the first candidate to preempt"), the placeholder goes
Pending and a new node is launched for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from contract import names
from contract.gpu import GPU_RESOURCE, GPU_TAINT
from contract.pod_security import container_security_context, pod_security_context
from contract.settings.gpu_capacity import HeadroomSettings
from contract.settings.models import ModelSettings

from .naming import type_token
from .serving.objects import node_requirements

PRIORITY_CLASS = names.HEADROOM_PRIORITY_CLASS
# Below every predictor (they run at the default priority 0) and at the Cluster Autoscaler FAQ's
# overprovisioning value: CA ignores pods below its expendable cutoff (default -10), so -10 is the
# lowest priority any node autoscaler still launches nodes for (kubernetes/autoscaler
# cluster-autoscaler/FAQ.md, "How can I configure overprovisioning with Cluster Autoscaler?").
PRIORITY = -10
PLACEHOLDER = "gpu-headroom"
LABELS = {"app.kubernetes.io/name": PLACEHOLDER, **names.PART_OF}


def priority_class() -> dict[str, Any]:
    """Placeholders preempt nothing (`preemptionPolicy: Never`); everything else preempts them."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": PRIORITY_CLASS, "labels": names.PART_OF},
        "value": PRIORITY,
        "globalDefault": False,
        "preemptionPolicy": "Never",
        "description": "Warm GPU headroom placeholders: preempted by any predictor.",
    }


def placeholder_container(model: ModelSettings) -> dict[str, Any]:
    """The serving image doing nothing, with one replica's GPUs, CPU and memory."""
    gpus = str(model.gpus_per_replica)
    res = model.container_resources()
    return {
        "name": PLACEHOLDER,
        "image": model.image,
        "command": ["sleep", "infinity"],
        "resources": {
            "requests": {**res["requests"], GPU_RESOURCE: gpus},
            "limits": {**res["limits"], GPU_RESOURCE: gpus},
        },
        "securityContext": container_security_context(runAsNonRoot=True),
    }


def placeholder_deployment(
    headroom: HeadroomSettings, model: ModelSettings, namespace: str, instance_family_label: str
) -> dict[str, Any]:
    """The `apps/v1` Deployment of `headroom.placeholders` placeholders shaped like `model`'s replica."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": PLACEHOLDER, "namespace": namespace, "labels": LABELS},
        "spec": {
            "replicas": headroom.placeholders,
            "selector": {"matchLabels": {"app.kubernetes.io/name": PLACEHOLDER}},
            "template": {
                "metadata": {"labels": LABELS},
                "spec": {
                    "priorityClassName": PRIORITY_CLASS,
                    # A preempted placeholder frees its GPU at once (sleep ignores SIGTERM as PID 1).
                    "terminationGracePeriodSeconds": 0,
                    "automountServiceAccountToken": False,
                    "securityContext": pod_security_context(),
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": node_requirements(model, instance_family_label)}
                                ]
                            }
                        }
                    },
                    "tolerations": [
                        {
                            "key": GPU_TAINT["key"],
                            "operator": "Equal",
                            "value": GPU_TAINT["value"],
                            "effect": GPU_TAINT["effect"],
                        }
                    ],
                    "containers": [placeholder_container(model)],
                },
            },
        },
    }


@dataclass(frozen=True)
class HeadroomArgs:
    settings: HeadroomSettings
    model: ModelSettings  # the replica the placeholders are shaped like
    namespace: str  # the serving namespace (its restricted Pod Security and default-deny apply)
    instance_family_label: str
    provider: k8s.Provider
    depends_on: list[pulumi.Resource] = field(default_factory=list)


class Headroom(pulumi.ComponentResource):
    def __init__(self, name: str, args: HeadroomArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("gpu", "Headroom"), name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on)
        pc = priority_class()
        priority = k8s.scheduling.v1.PriorityClass(
            f"{name}-priority",
            metadata=pc["metadata"],
            value=pc["value"],
            global_default=pc["globalDefault"],
            preemption_policy=pc["preemptionPolicy"],
            description=pc["description"],
            opts=k8s_opts,
        )
        deployment = placeholder_deployment(args.settings, args.model, args.namespace, args.instance_family_label)
        k8s.apps.v1.Deployment(
            f"{name}-placeholders",
            metadata=deployment["metadata"],
            spec=deployment["spec"],
            opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[priority])),
        )
        self.register_outputs({"placeholders": args.settings.placeholders})
