"""Reading Kubernetes objects as CrossGuard hands them over.

`args.props` are read-only proxies (`collections.abc.Mapping` / `Sequence`, not dict/list)
that raise `UnknownValueError` on values not known during preview, so every helper here
walks them through the abstract types and never copies them wholesale.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy.proxy import UnknownValueError

# `apiVersion` group (without version) and kind, e.g. ("keda.sh", "ScaledObject").
GroupKind = tuple[str, str]

# Where the pod template of each workload kind lives.
_POD_SPEC_PATHS: dict[GroupKind, tuple[str, ...]] = {
    ("", "Pod"): ("spec",),
    ("apps", "Deployment"): ("spec", "template", "spec"),
    ("apps", "StatefulSet"): ("spec", "template", "spec"),
    ("apps", "DaemonSet"): ("spec", "template", "spec"),
    ("apps", "ReplicaSet"): ("spec", "template", "spec"),
    ("batch", "Job"): ("spec", "template", "spec"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template", "spec"),
}
INFERENCE_SERVICE: GroupKind = ("serving.kserve.io", "InferenceService")
SERVING_RUNTIMES = {("serving.kserve.io", "ServingRuntime"), ("serving.kserve.io", "ClusterServingRuntime")}
# KServe components that each run their own pods (a PodSpec plus KServe fields).
ISVC_COMPONENTS = ("predictor", "transformer", "explainer")


def is_map(value: Any) -> bool:
    return isinstance(value, Mapping)


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


_RAISE = object()


def get(obj: Any, *path: str | int, default: Any = None, unknown: Any = _RAISE) -> Any:
    """`obj[path[0]][path[1]]...`, or `default` when any step is missing.

    A value the engine cannot know during preview raises `UnknownValueError` (CrossGuard then
    reports that the policy could not run, instead of passing or failing on a guess), unless
    the caller says what an unknown value means with `unknown=`."""
    try:
        for key in path:
            if isinstance(key, int):
                if not is_list(obj) or not -len(obj) <= key < len(obj):
                    return default
                obj = obj[key]
            else:
                if not is_map(obj) or key not in _keys(obj):
                    return default
                obj = obj[key]
        return obj
    except UnknownValueError:
        if unknown is _RAISE:
            raise
        return unknown


def _keys(obj: Mapping[str, Any]) -> set[Any]:
    # Iterating a props proxy reads keys only; `key in proxy` would read (and check) the value.
    return set(iter(obj))


def is_set(obj: Any, *path: str) -> bool:
    """Whether the last key of `path` is present with a non-empty value, counting a value that is
    unknown during preview (an ARN of a resource created in the same update) as set."""
    value = get(obj, *path, unknown=True)
    return bool(value)


def items(obj: Any, *path: str) -> list[Any]:
    value = get(obj, *path)
    return list(value) if is_list(value) else []


def known_items(obj: Any, *path: str) -> list[Any]:
    """The elements of a list that are known during preview (e.g. a container's args, one of
    which is a bucket name the engine does not know yet)."""
    value = get(obj, *path, unknown=[])
    if not is_list(value):
        return []
    found = []
    for index in range(len(value)):
        try:
            found.append(value[index])
        except UnknownValueError:
            continue
    return found


def group_kind(resource_type: str, props: Mapping[str, Any]) -> GroupKind | None:
    """The object's API group and kind, or None for anything that is not a Kubernetes object."""
    if not resource_type.startswith("kubernetes:"):
        return None
    api_version, kind = get(props, "apiVersion"), get(props, "kind")
    if not (isinstance(api_version, str) and isinstance(kind, str)):
        # Typed resources always carry both; fall back to the type token `kubernetes:<group>/<v>:<Kind>`.
        parts = resource_type.split(":")
        if len(parts) != 3 or "/" not in parts[1]:
            return None
        group, kind = parts[1].split("/")[0], parts[2]
        return ("" if group == "core" else group), kind
    return (api_version.rsplit("/", 1)[0] if "/" in api_version else ""), kind


def describe(resource_type: str, props: Mapping[str, Any], name: str) -> str:
    """How a message names a resource: `Kind namespace/name` for Kubernetes objects,
    the type and Pulumi name for everything else."""
    gk = group_kind(resource_type, props)
    if gk is None:
        return f"{resource_type.split(':')[-1]} '{name}'"
    meta_name = get(props, "metadata", "name", default=name, unknown=name)
    namespace = get(props, "metadata", "namespace", unknown="(unknown)")
    return f"{gk[1]} {namespace}/{meta_name}" if namespace else f"{gk[1]} {meta_name}"


def metadata_name(props: Mapping[str, Any], fallback: str) -> str:
    value = get(props, "metadata", "name", unknown=None)
    return value if isinstance(value, str) else fallback


def namespace_of(props: Mapping[str, Any]) -> str | None:
    value = get(props, "metadata", "namespace", unknown=None)
    return value if isinstance(value, str) else None


def labels_of(props: Mapping[str, Any]) -> Mapping[str, Any]:
    value = get(props, "metadata", "labels")
    return value if is_map(value) else {}


def pod_specs(gk: GroupKind, props: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every pod spec an object will run, with a label saying where it sits."""
    if gk in _POD_SPEC_PATHS:
        spec = get(props, *_POD_SPEC_PATHS[gk])
        if is_map(spec):
            yield ".".join(_POD_SPEC_PATHS[gk]), spec
    elif gk == INFERENCE_SERVICE:
        for component in ISVC_COMPONENTS:
            spec = get(props, "spec", component)
            if is_map(spec):
                yield f"spec.{component}", spec
    elif gk in SERVING_RUNTIMES:
        spec = get(props, "spec")
        if is_map(spec):
            yield "spec", spec


def containers(pod_spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Containers, init containers and (in a KServe component) the `model` container."""
    for field in ("initContainers", "containers"):
        for index, container in enumerate(items(pod_spec, field)):
            if is_map(container):
                yield f"{field}[{get(container, 'name', default=index)}]", container
    model = get(pod_spec, "model")
    if is_map(model):
        yield "model", model


def quantity(value: Any) -> float | None:
    """A count-like Kubernetes quantity ("1", 2, "500m") as a number; None if unparseable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        if text.endswith("m"):
            return float(text[:-1]) / 1000
        return float(text)
    except ValueError:
        return None


def selector_matches(selector: Any, labels: Mapping[str, Any]) -> bool:
    """Whether a Kubernetes label selector selects an object with `labels`: every matchLabels pair
    and every matchExpressions requirement holds; an empty selector selects everything (Kubernetes
    docs, "Labels and Selectors"). A selector this helper cannot read selects nothing."""
    if not is_map(selector):
        return False
    match_labels = get(selector, "matchLabels", unknown=None) or {}
    if not is_map(match_labels) or any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    for expression in known_items(selector, "matchExpressions"):
        key, operator = get(expression, "key", unknown=None), get(expression, "operator", unknown=None)
        values = list(known_items(expression, "values"))
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def selector_is_empty(selector: Any) -> bool:
    """`{}` (or only empty fields): selects every pod, or every namespace."""
    return (
        is_map(selector)
        and not (get(selector, "matchLabels", unknown={"?": "?"}) or {})
        and not known_items(selector, "matchExpressions")
    )
