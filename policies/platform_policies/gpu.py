"""GPU placement and the GPU budget: who may land on GPU nodes, what a pool may buy,
and whether the autoscalers' maximum fits what the pools may launch."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import PolicyConfigSchema

from contract.settings.gpu_capacity import AUTO_MODE_MAX_NODE_LIFETIME_S, duration_seconds

from . import k8s
from .base import Subject, of_kind, resource_policy, stack_policy, subject_of
from .platform import GPU_RESOURCE, GPU_TAINT, POOL_LABEL, PREDICTOR_SUFFIX, gpus_of
from .scaling import HPA, KEDA_DEFAULT_MAX_REPLICAS, SCALED_OBJECT

NODE_POOL = ("karpenter.sh", "NodePool")
CAPACITY_TYPE = "karpenter.sh/capacity-type"
DEFAULT_ALLOWED_FAMILIES = ["g5", "g6", "g6e"]
DEFAULT_MAX_GPUS_PER_STACK = 64
# EC2 accelerated families with NVIDIA GPUs (g4dn, g5, g6, g6e, gr6, p4d, p5, ...) and their categories.
GPU_FAMILY = re.compile(r"^(g\d|gr\d|p\d)")
GPU_CATEGORIES = {"g", "p"}


# --- GPU pods ---------------------------------------------------------------------------


def _tolerates_gpu_taint(pod_spec: Mapping[str, Any]) -> bool:
    for toleration in k8s.items(pod_spec, "tolerations"):
        key, operator = k8s.get(toleration, "key"), k8s.get(toleration, "operator", default="Equal")
        effect = k8s.get(toleration, "effect")
        if effect not in (None, "", GPU_TAINT["effect"]):
            continue
        if operator == "Exists" and key in (None, "", GPU_TAINT["key"]):
            return True
        if operator == "Equal" and key == GPU_TAINT["key"] and k8s.get(toleration, "value") == GPU_TAINT["value"]:
            return True
    return False


def _check_gpu_pods(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    gk = subject.gk
    if gk is None:
        return
    for where, pod_spec in k8s.pod_specs(gk, subject.props):
        gpu_containers = [(n, c) for n, c in k8s.containers(pod_spec) if any(v is not None for v in gpus_of(c))]
        if not gpu_containers:
            continue
        if not _tolerates_gpu_taint(pod_spec):
            yield (
                f"{subject.label}: {where} requests {GPU_RESOURCE} but does not tolerate the GPU taint "
                f"{GPU_TAINT['key']}={GPU_TAINT['value']}:{GPU_TAINT['effect']} (it can never schedule on a GPU node)"
            )
        for name, container in gpu_containers:
            request, limit = gpus_of(container)
            if limit is None:
                yield f"{subject.label}: {where}.{name} requests {GPU_RESOURCE} without a limit"
                continue
            if request is not None and request != limit:
                yield f"{subject.label}: {where}.{name} requests {request:g} {GPU_RESOURCE} but limits {limit:g}"
            if limit < 1 or limit != int(limit):
                yield f"{subject.label}: {where}.{name} asks for {limit:g} {GPU_RESOURCE}; GPUs are whole devices"


gpu_pods = resource_policy(
    name="gpu-workloads-tolerate-taint-and-request-whole-gpus",
    description=(
        f"Pods that use {GPU_RESOURCE} tolerate the GPU taint and request whole GPUs with requests equal to limits."
    ),
    remediation=(
        f'Add the toleration {{key: {GPU_TAINT["key"]}, operator: Equal, value: "{GPU_TAINT["value"]}", '
        f"effect: {GPU_TAINT['effect']}}} (contract.gpu.GPU_TAINT) and set "
        f"resources.requests and resources.limits of {GPU_RESOURCE} to the same whole number (gpusPerReplica)."
    ),
    check=_check_gpu_pods,
)


# --- NodePools ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Pool:
    subject: Subject
    name: str
    weight: float
    capacity_types: frozenset[str]
    families: frozenset[str] | None  # None: not restricted to named families
    gpu_limit: float | None
    tainted: bool


def _requirements(props: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in k8s.items(props, "spec", "template", "spec", "requirements") if k8s.is_map(r)]


def _in_values(requirement: Mapping[str, Any]) -> list[str]:
    return [str(v) for v in k8s.items(requirement, "values")] if k8s.get(requirement, "operator") == "In" else []


def is_gpu_pool(subject: Subject) -> bool:
    """A NodePool offers GPUs when it says so by any of the markers GPU pools carry."""
    props = subject.props
    if not subject.is_kind(*NODE_POOL):
        return False
    if k8s.get(props, "spec", "limits", GPU_RESOURCE) is not None:
        return True
    if POOL_LABEL in (k8s.get(props, "spec", "template", "metadata", "labels") or {}):
        return True
    if any(k8s.get(t, "key") == GPU_TAINT["key"] for t in k8s.items(props, "spec", "template", "spec", "taints")):
        return True
    for requirement in _requirements(props):
        key = str(k8s.get(requirement, "key", default=""))
        values = _in_values(requirement)
        if "instance-gpu" in key:
            return True
        if key.endswith("/instance-family") and any(GPU_FAMILY.match(v) for v in values):
            return True
        if key.endswith("/instance-category") and set(values) & GPU_CATEGORIES:
            return True
        if key == "node.kubernetes.io/instance-type" and any(GPU_FAMILY.match(v) for v in values):
            return True
    return False


def pool_of(subject: Subject) -> Pool:
    props = subject.props
    capacity, families = frozenset({"on-demand"}), None
    for requirement in _requirements(props):
        key = str(k8s.get(requirement, "key", default=""))
        if key == CAPACITY_TYPE and _in_values(requirement):
            capacity = frozenset(_in_values(requirement))
        elif key.endswith("/instance-family") and _in_values(requirement):
            families = (
                frozenset(_in_values(requirement)) if families is None else families & set(_in_values(requirement))
            )
        elif key == "node.kubernetes.io/instance-type" and _in_values(requirement):
            by_type = frozenset(v.split(".")[0] for v in _in_values(requirement))
            families = by_type if families is None else families & by_type
    limit = k8s.get(props, "spec", "limits", GPU_RESOURCE)
    taints = k8s.items(props, "spec", "template", "spec", "taints")
    tainted = any(
        k8s.get(t, "key") == GPU_TAINT["key"]
        and k8s.get(t, "value") == GPU_TAINT["value"]
        and k8s.get(t, "effect") == GPU_TAINT["effect"]
        for t in taints
    )
    return Pool(
        subject=subject,
        name=subject.k8s_name,
        weight=float(k8s.get(props, "spec", "weight", default=0) or 0),
        capacity_types=capacity,
        families=families,
        gpu_limit=k8s.quantity(limit) if limit is not None else None,
        tainted=tainted,
    )


def gpu_pools(resources: list[Any]) -> list[Pool]:
    return [pool_of(s) for s in of_kind(resources, *NODE_POOL) if is_gpu_pool(s)]


def _check_node_pools(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    pools = gpu_pools(resources)
    for pool in pools:
        label = pool.subject.label
        if pool.gpu_limit is None or pool.gpu_limit <= 0:
            yield (
                f"{label}: GPU NodePool has no spec.limits[{GPU_RESOURCE}] (Karpenter may launch GPUs without bound)",
                pool.subject.urn,
            )
        if not pool.tainted:
            yield (
                f"{label}: GPU NodePool does not taint its nodes {GPU_TAINT['key']}={GPU_TAINT['value']}:"
                f"{GPU_TAINT['effect']} (any pod could land on a GPU node)",
                pool.subject.urn,
            )
        if "spot" in pool.capacity_types and "on-demand" not in pool.capacity_types:
            fallbacks = [
                p.name
                for p in pools
                if "on-demand" in p.capacity_types and p.weight < pool.weight and (p.gpu_limit or 0) > 0
            ]
            if not fallbacks:
                yield (
                    f"{label}: spot GPU NodePool has no on-demand fallback (an on-demand GPU NodePool with a GPU "
                    "limit and a lower weight); a spot shortage would stop scale-out",
                    pool.subject.urn,
                )


node_pools = stack_policy(
    name="gpu-node-pools-limited-tainted-with-fallback",
    description=(
        "Every GPU NodePool has a GPU limit and the GPU taint, and every spot GPU pool has an on-demand fallback pool."
    ),
    remediation=(
        "Declare GPU pools in gpuCapacity.pools: each gets gpuLimit (spec.limits) and the GPU taint from "
        "components/gpu_capacity.py; pair every spot pool with an on-demand pool of lower weight."
    ),
    check=_check_node_pools,
)


def _check_instance_families(subject: Subject, config: Mapping[str, Any]) -> Iterator[str]:
    if not is_gpu_pool(subject):
        return
    allowed = set(config.get("allowedInstanceFamilies") or DEFAULT_ALLOWED_FAMILIES)
    families = pool_of(subject).families
    if families is None:
        yield (
            f"{subject.label}: GPU NodePool does not restrict instance families (an In requirement on "
            f"*/instance-family); allowed: {sorted(allowed)}"
        )
    elif families - allowed:
        yield f"{subject.label}: instance families {sorted(families - allowed)} are not allowed; allowed: {sorted(allowed)}"


instance_families = resource_policy(
    name="gpu-node-pools-use-allowed-instance-families",
    description="GPU NodePools launch only the instance families the organisation allows (policy config).",
    remediation=(
        "Restrict gpuCapacity.pools[].instanceFamilies to the allowed families, or extend "
        "allowedInstanceFamilies in the policy config after a cost review."
    ),
    check=_check_instance_families,
    config=PolicyConfigSchema(
        properties={
            "allowedInstanceFamilies": {
                "type": "array",
                "items": {"type": "string"},
                "default": DEFAULT_ALLOWED_FAMILIES,
                "description": "EC2 instance families a GPU NodePool may launch.",
            }
        }
    ),
)


# --- GPU budget -------------------------------------------------------------------------


@dataclass(frozen=True)
class ScaledWorkload:
    autoscaler: Subject
    target: str
    max_replicas: int


def _scaled_workloads(resources: list[Any]) -> list[ScaledWorkload]:
    found = []
    for subject in (subject_of(r) for r in resources):
        if subject.gk == SCALED_OBJECT:
            maximum = k8s.get(subject.props, "spec", "maxReplicaCount", default=KEDA_DEFAULT_MAX_REPLICAS)
        elif subject.gk == HPA:
            maximum = k8s.get(subject.props, "spec", "maxReplicas", default=1)
        else:
            continue
        target = k8s.get(subject.props, "spec", "scaleTargetRef", "name")
        if isinstance(target, str):
            found.append(ScaledWorkload(subject, target, int(maximum)))
    return found


@dataclass(frozen=True)
class FixedGpuWorkload:
    """A Deployment or StatefulSet that holds GPUs at a fixed replica count (no autoscaler scales it),
    such as the warm-headroom placeholders: its GPUs are taken whatever the autoscalers do."""

    subject: Subject
    replicas: int
    pod_spec: Mapping[str, Any]


def _fixed_gpu_workloads(resources: list[Any], scaled: list[ScaledWorkload]) -> list[FixedGpuWorkload]:
    targets = {(w.autoscaler.namespace, w.target) for w in scaled}
    found = []
    for subject in (subject_of(r) for r in resources):
        if subject.gk not in (("apps", "Deployment"), ("apps", "StatefulSet")):
            continue
        if (subject.namespace, subject.k8s_name) in targets:
            continue
        pod_spec = k8s.get(subject.props, "spec", "template", "spec")
        replicas = k8s.get(subject.props, "spec", "replicas", default=1)
        if k8s.is_map(pod_spec) and isinstance(replicas, int) and gpus_per_replica(pod_spec) > 0:
            found.append(FixedGpuWorkload(subject, replicas, pod_spec))
    return found


def _pod_spec_of_target(resources: list[Any], workload: ScaledWorkload) -> Mapping[str, Any] | None:
    """The pod spec the autoscaler's target runs: the InferenceService behind `<isvc>-predictor`,
    or a Deployment/StatefulSet of that name in the stack."""
    namespace = workload.autoscaler.namespace
    for subject in (subject_of(r) for r in resources):
        if subject.namespace != namespace:
            continue
        if subject.gk == k8s.INFERENCE_SERVICE and f"{subject.k8s_name}{PREDICTOR_SUFFIX}" == workload.target:
            return k8s.get(subject.props, "spec", "predictor")
        if subject.gk in (("apps", "Deployment"), ("apps", "StatefulSet")) and subject.k8s_name == workload.target:
            return k8s.get(subject.props, "spec", "template", "spec")
    return None


def gpus_per_replica(pod_spec: Mapping[str, Any]) -> float:
    """GPUs one pod holds: its containers together, or its largest init container if that is more
    (init containers run one at a time, before the containers start)."""

    def gpus(container: Mapping[str, Any]) -> float:
        request, limit = gpus_of(container)
        return limit if limit is not None else request or 0.0

    main, init = [], []
    for name, container in k8s.containers(pod_spec):
        (init if name.startswith("initContainers") else main).append(gpus(container))
    return max(sum(main), max(init, default=0.0))


def _reachable_pools(pod_spec: Mapping[str, Any], pools: list[Pool]) -> list[Pool]:
    """The GPU pools a pod may land on: those its pool selector or required affinity names, else all."""
    selected = k8s.get(pod_spec, "nodeSelector", POOL_LABEL)
    if isinstance(selected, str):
        return [p for p in pools if p.name == selected]
    terms = k8s.items(
        pod_spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"
    )
    names: set[str] = set()
    for term in terms:
        for expression in k8s.items(term, "matchExpressions"):
            if k8s.get(expression, "key") == POOL_LABEL:
                names |= set(_in_values(expression))
    return [p for p in pools if p.name in names] if names else pools


def _check_gpu_budget(resources: list[Any], config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    pools = gpu_pools(resources)
    cap = float(config.get("maxGpusPerStack", DEFAULT_MAX_GPUS_PER_STACK))
    total_limit = sum(p.gpu_limit or 0 for p in pools)
    if total_limit > cap:
        yield (
            f"GPU NodePools {sorted(p.name for p in pools)} may launch {total_limit:g} GPUs in total, above "
            f"maxGpusPerStack {cap:g}",
            None,
        )
    demand = 0.0
    scaled = _scaled_workloads(resources)
    for workload in scaled:
        label = workload.autoscaler.label
        pod_spec = _pod_spec_of_target(resources, workload)
        if pod_spec is None:
            if workload.target.endswith(PREDICTOR_SUFFIX):
                yield (
                    f"{label}: scales {workload.target} but no InferenceService "
                    f"{workload.target[: -len(PREDICTOR_SUFFIX)]} (or Deployment {workload.target}) exists in "
                    f"namespace {workload.autoscaler.namespace}",
                    workload.autoscaler.urn,
                )
            continue
        per_replica = gpus_per_replica(pod_spec)
        if per_replica <= 0:
            continue
        needed = workload.max_replicas * per_replica
        demand += needed
        reachable = _reachable_pools(pod_spec, pools)
        available = sum(p.gpu_limit or 0 for p in reachable)
        if needed > available:
            yield (
                f"{label}: maxReplicas {workload.max_replicas} x {per_replica:g} GPU(s) = {needed:g} GPUs exceeds "
                f"the {available:g} GPUs its NodePools {sorted(p.name for p in reachable)} may launch",
                workload.autoscaler.urn,
            )
    fixed = 0.0
    for workload in _fixed_gpu_workloads(resources, scaled):
        held = workload.replicas * gpus_per_replica(workload.pod_spec)
        fixed += held
        reachable = _reachable_pools(workload.pod_spec, pools)
        available = sum(p.gpu_limit or 0 for p in reachable)
        if held > available:
            yield (
                f"{workload.subject.label}: replicas {workload.replicas} hold {held:g} GPUs, more than the "
                f"{available:g} GPUs its NodePools {sorted(p.name for p in reachable)} may launch",
                workload.subject.urn,
            )
    if demand + fixed > total_limit:
        held = f" with {fixed:g} GPUs held by fixed GPU Deployments (warm headroom)" if fixed else ""
        yield (
            f"all autoscalers together may ask for {demand:g} GPUs at maxReplicas{held}, more than the "
            f"{total_limit:g} GPUs the GPU NodePools may launch",
            None,
        )


gpu_budget = stack_policy(
    name="gpu-budget-fits-node-pools",
    description=(
        "maxReplicas x GPUs per replica of every autoscaled predictor, with the GPUs fixed Deployments hold "
        "(warm-headroom placeholders), fits the GPU limits of the NodePools they can use, and the pools' total "
        "stays within maxGpusPerStack."
    ),
    remediation=(
        "Lower autoscaling.<model>.maxReplicas or gpuCapacity.headroom.placeholders, or raise "
        "gpuCapacity.pools[].gpuLimit (within maxGpusPerStack); "
        "replicas beyond the pool limits stay Pending forever while the autoscaler believes it has capacity."
    ),
    check=_check_gpu_budget,
    config=PolicyConfigSchema(
        properties={
            "maxGpusPerStack": {
                "type": "integer",
                "minimum": 0,
                "default": DEFAULT_MAX_GPUS_PER_STACK,
                "description": "Upper bound on the sum of GPU limits over all GPU NodePools of a stack.",
            }
        }
    ),
)

# --- GPU containers run as non-root ----------------------------------------------------


def _effective(pod_spec: Mapping[str, Any], container: Mapping[str, Any], field: str) -> Any:
    """A security setting as the kubelet applies it: the container's, else the pod's."""
    value = k8s.get(container, "securityContext", field, unknown=None)
    return value if value is not None else k8s.get(pod_spec, "securityContext", field, unknown=None)


def _check_gpu_non_root(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    gk = subject.gk
    if gk is None:
        return
    for where, pod_spec in k8s.pod_specs(gk, subject.props):
        for name, container in k8s.containers(pod_spec):
            if not any(v is not None for v in gpus_of(container)):
                continue
            if (
                _effective(pod_spec, container, "runAsNonRoot") is not True
                or _effective(pod_spec, container, "runAsUser") == 0
            ):
                yield f"{subject.label}: {where}.{name} uses {GPU_RESOURCE} and may run as root (set runAsNonRoot)"
            if k8s.get(container, "securityContext", "allowPrivilegeEscalation", unknown=None) is not False:
                yield f"{subject.label}: {where}.{name} uses {GPU_RESOURCE} and allows privilege escalation"


gpu_non_root = resource_policy(
    name="gpu-containers-run-as-non-root",
    description=f"Containers that use {GPU_RESOURCE} run with runAsNonRoot and without privilege escalation.",
    remediation=(
        "Set runAsNonRoot: true with a non-zero runAsUser on the pod (components/serving/objects.py does) and "
        "allowPrivilegeEscalation: false on the container."
    ),
    check=_check_gpu_non_root,
)


# --- Node lifetime under EKS Auto Mode ---------------------------------------------------


def _check_expire_after(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if not subject.is_kind(*NODE_POOL):
        return
    template = k8s.get(subject.props, "spec", "template", "spec", unknown=None)
    if k8s.get(template, "nodeClassRef", "group", unknown=None) != "eks.amazonaws.com":
        return  # self-managed Karpenter has no maximum node lifetime
    expire = k8s.get(template, "expireAfter", unknown=None)
    if not isinstance(expire, str):
        return
    try:
        seconds = duration_seconds(expire)
    except ValueError:
        yield f"{subject.label}: expireAfter {expire!r} is not a Karpenter duration"
        return
    if seconds > AUTO_MODE_MAX_NODE_LIFETIME_S:
        yield (
            f"{subject.label}: expireAfter {expire} is beyond EKS Auto Mode's 21-day node lifetime (504h); "
            "Auto Mode replaces the node at 21 days anyway, evicting GPU pods despite do-not-disrupt"
        )


auto_mode_expire_after = resource_policy(
    name="node-pools-expire-within-auto-mode-lifetime",
    description="Auto Mode NodePools set expireAfter at most 504h: Auto Mode replaces every node after 21 days.",
    remediation="Set gpuCapacity.pools[*].expireAfter to at most 504h (the default is 336h).",
    check=_check_expire_after,
)

POLICIES = [gpu_pods, node_pools, instance_families, gpu_budget, gpu_non_root, auto_mode_expire_after]
