"""Autoscaling rules: what buys the next GPU replica, how fast, and how far down."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import PolicyConfigSchema

from contract.scale_down import MIN_SCALE_DOWN_WINDOW_S, scale_down_problems
from contract.warm_replicas import DEFAULT_MIN_WARM_REPLICAS, warm_replica_problem
from contract.warm_replicas import POLICY as WARM_REPLICA_POLICY

from . import k8s, promql
from .base import Subject, of_kind, resource_policy, stack_policy, subject_of
from .platform import (
    MODEL_LABEL,
    PREDICTOR_SUFFIX,
    VLLM_IMAGE_TAG,
    WORKLOAD_LABEL,
    gpus_of,
    known_vllm_metrics,
    removed_vllm_metrics,
    workload_class,
)

SCALED_OBJECT = ("keda.sh", "ScaledObject")
SCALED_JOB = ("keda.sh", "ScaledJob")
HPA = ("autoscaling", "HorizontalPodAutoscaler")
# KServe creates its own HPA (CPU by default) unless told another autoscaler owns the predictor.
KSERVE_AUTOSCALER_CLASS = "serving.kserve.io/autoscalerClass"
KSERVE_NON_HPA_CLASSES = {"none", "external", "keda"}
KEDA_DEFAULT_MAX_REPLICAS = 100
KEDA_DEFAULT_MIN_REPLICAS = 0
RESOURCE_SIGNALS = {"cpu", "memory"}


def triggers(subject: Subject) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for index, trigger in enumerate(k8s.items(subject.props, "spec", "triggers")):
        if k8s.is_map(trigger):
            yield str(k8s.get(trigger, "name", default=f"#{index}")), trigger


def _isvc_uses_gpus(props: Mapping[str, Any]) -> bool:
    return any(
        any(v for v in gpus_of(container))
        for _, spec in k8s.pod_specs(k8s.INFERENCE_SERVICE, props)
        for _, container in k8s.containers(spec)
    )


def _scales_a_predictor(subject: Subject) -> bool:
    """ScaledObjects and HPAs in this platform exist to scale GPU predictors; the predictor
    naming contract (or the model label) tells them apart from anything else."""
    target = k8s.get(subject.props, "spec", "scaleTargetRef", "name")
    return (isinstance(target, str) and target.endswith(PREDICTOR_SUFFIX)) or MODEL_LABEL in k8s.labels_of(
        subject.props
    )


# --- no CPU/memory scaling -------------------------------------------------------------


def _check_no_resource_scaling(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if subject.gk in (SCALED_OBJECT, SCALED_JOB) and _scales_a_predictor(subject):
        for name, trigger in triggers(subject):
            kind = k8s.get(trigger, "type")
            if kind in RESOURCE_SIGNALS:
                yield f"{subject.label}: trigger {name} scales a GPU predictor on {kind}"
    elif subject.gk == HPA and _scales_a_predictor(subject):
        if k8s.get(subject.props, "spec", "targetCPUUtilizationPercentage") is not None:
            yield f"{subject.label}: autoscaling/v1 targetCPUUtilizationPercentage scales a GPU predictor on cpu"
        for metric in k8s.items(subject.props, "spec", "metrics"):
            kind = k8s.get(metric, "type")
            if kind in ("Resource", "ContainerResource"):
                resource = k8s.get(metric, "resource", "name") or k8s.get(metric, "containerResource", "name")
                yield f"{subject.label}: metric type {kind} ({resource}) scales a GPU predictor on a resource signal"
    elif subject.gk == k8s.INFERENCE_SERVICE and _isvc_uses_gpus(subject.props):
        predictor = k8s.get(subject.props, "spec", "predictor", default={})
        metric = k8s.get(predictor, "scaleMetric")
        if metric in RESOURCE_SIGNALS:
            yield f"{subject.label}: spec.predictor.scaleMetric is {metric}"
        for metric in k8s.items(predictor, "autoScaling", "metrics"):
            if k8s.get(metric, "type") == "Resource":
                yield f"{subject.label}: spec.predictor.autoScaling scales on resource {k8s.get(metric, 'resource', 'name')}"
        autoscaler = k8s.get(subject.props, "metadata", "annotations", KSERVE_AUTOSCALER_CLASS)
        if autoscaler not in KSERVE_NON_HPA_CLASSES:
            yield (
                f"{subject.label}: annotation {KSERVE_AUTOSCALER_CLASS} is {autoscaler!r}, so KServe creates its own "
                "CPU HorizontalPodAutoscaler for the predictor (and fights the KEDA ScaledObject); "
                f"set it to one of {sorted(KSERVE_NON_HPA_CLASSES)}"
            )


no_resource_scaling = resource_policy(
    name="no-cpu-memory-scaling-for-gpu-inference",
    description="GPU predictors scale on inference signals (queue depth, KV cache, latency), never on CPU or memory.",
    remediation=(
        "Remove `cpu`/`memory` KEDA triggers and `Resource` HPA metrics from autoscalers of predictors; build the "
        "triggers from contract/triggers.py (queue depth, KV-cache usage, latency). On InferenceServices set the "
        f"annotation {KSERVE_AUTOSCALER_CLASS}: external (the platform's ScaledObject scales the predictor)."
    ),
    check=_check_no_resource_scaling,
)


# --- KEDA Prometheus queries -------------------------------------------------------------


def _prometheus_triggers(subject: Subject) -> Iterator[tuple[str, Mapping[str, Any], str]]:
    if subject.gk not in (SCALED_OBJECT, SCALED_JOB):
        return
    for name, trigger in triggers(subject):
        if k8s.get(trigger, "type") == "prometheus":
            query = k8s.get(trigger, "metadata", "query")
            yield name, trigger, query if isinstance(query, str) else ""


def _check_prometheus_queries(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    known, removed = known_vllm_metrics(), removed_vllm_metrics()
    for name, _trigger, query in _prometheus_triggers(subject):
        if not query.strip():
            yield f"{subject.label}: prometheus trigger {name} has no metadata.query"
            continue
        if not promql.returns_single_series(query):
            yield (
                f"{subject.label}: prometheus trigger {name} query may return more than one series "
                f"(KEDA fails the trigger); aggregate it with sum(...) or max(...): {query}"
            )
        for metric in sorted(promql.vllm_metric_names(query)):
            if metric in removed:
                yield (
                    f"{subject.label}: prometheus trigger {name} reads {metric}, which vLLM {VLLM_IMAGE_TAG} "
                    "no longer exposes (renamed); the query would silently return nothing"
                )
            elif metric not in known:
                yield (
                    f"{subject.label}: prometheus trigger {name} reads {metric}, which is not a metric of "
                    f"vLLM {VLLM_IMAGE_TAG} listed in contract/signals.py"
                )


prometheus_queries = resource_policy(
    name="keda-prometheus-queries-single-series-known-metrics",
    description=(
        "KEDA Prometheus queries aggregate to exactly one series and read only metric names the pinned vLLM "
        "version exposes."
    ),
    remediation=(
        "Build trigger queries with the builders in contract/signals.py: they wrap per-pod series in sum(...) "
        "and use the metric names of the pinned image (vllm:kv_cache_usage_perc, "
        "vllm:inter_token_latency_seconds, not the removed gpu_cache_usage_perc/time_per_output_token_seconds)."
    ),
    check=_check_prometheus_queries,
)


# --- quantiles use Value -----------------------------------------------------------------


def _check_quantile_metric_type(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    for name, trigger, query in _prometheus_triggers(subject):
        metric_type = k8s.get(trigger, "metricType", default="AverageValue")
        if promql.uses_quantile(query) and metric_type != "Value":
            yield (
                f"{subject.label}: prometheus trigger {name} reads a latency quantile with metricType {metric_type}; "
                "the HPA would divide the quantile by the replica count"
            )


quantile_metric_type = resource_policy(
    name="latency-triggers-use-value-metric-type",
    description="Quantile and latency triggers use KEDA metricType Value (a quantile is not additive across replicas).",
    remediation="Set `metricType: Value` on every trigger whose query is a histogram_quantile/quantile.",
    check=_check_quantile_metric_type,
)


# --- scale down slower than up -----------------------------------------------------------


def _behavior(subject: Subject) -> tuple[Mapping[str, Any] | None, int] | None:
    """(HPA behavior or None, maxReplicas) of an autoscaler; None for anything else."""
    if subject.gk == SCALED_OBJECT:
        behavior = k8s.get(subject.props, "spec", "advanced", "horizontalPodAutoscalerConfig", "behavior")
        maximum = k8s.get(subject.props, "spec", "maxReplicaCount", default=KEDA_DEFAULT_MAX_REPLICAS)
    elif subject.gk == HPA:
        behavior = k8s.get(subject.props, "spec", "behavior")
        maximum = k8s.get(subject.props, "spec", "maxReplicas", default=1)
    elif subject.gk == k8s.INFERENCE_SERVICE and k8s.get(subject.props, "spec", "predictor", "autoScaling") is not None:
        behavior = k8s.get(subject.props, "spec", "predictor", "autoScaling", "behavior")
        maximum = k8s.get(subject.props, "spec", "predictor", "maxReplicas", default=1)
    else:
        return None
    return (behavior if k8s.is_map(behavior) else None), int(maximum or 1)


def _check_scale_down_slower(subject: Subject, config: Mapping[str, Any]) -> Iterator[str]:
    found = _behavior(subject)
    if found is None:
        return
    behavior, max_replicas = found
    minimum = float(config.get("minScaleDownStabilizationSeconds", MIN_SCALE_DOWN_WINDOW_S))
    for problem in scale_down_problems(behavior, max_replicas, minimum):
        yield f"{subject.label}: {problem}"


scale_down_slower = resource_policy(
    name="scale-down-slower-than-scale-up",
    description=(
        "Autoscalers scale up fast and down slowly: a longer scale-down stabilization window and a slower "
        "scale-down rate than scale-up."
    ),
    remediation=(
        "Set spec.advanced.horizontalPodAutoscalerConfig.behavior on the ScaledObject, e.g. scaleUp "
        "{stabilizationWindowSeconds: 0, policies: [{type: Pods, value: 2, periodSeconds: 60}]} and scaleDown "
        "{stabilizationWindowSeconds: 600, policies: [{type: Pods, value: 1, periodSeconds: 300}]} "
        "(autoscaling.default.behavior in the stack config)."
    ),
    check=_check_scale_down_slower,
    config=PolicyConfigSchema(
        properties={
            "minScaleDownStabilizationSeconds": {
                "type": "integer",
                "minimum": 0,
                "default": MIN_SCALE_DOWN_WINDOW_S,
                "description": "Shortest scale-down stabilization window allowed (seconds).",
            }
        }
    ),
)


# --- warm replica for interactive models -------------------------------------------------


def _check_warm_replica(subject: Subject, config: Mapping[str, Any]) -> Iterator[str]:
    if workload_class(subject.props) == "batch":
        return
    floor = int(config.get("minReplicas", DEFAULT_MIN_WARM_REPLICAS))
    if subject.gk == SCALED_OBJECT and _scales_a_predictor(subject):
        minimum = k8s.get(subject.props, "spec", "minReplicaCount")
        if minimum is None:
            yield f"{subject.label}: minReplicaCount is not set (KEDA defaults to {KEDA_DEFAULT_MIN_REPLICAS}) for an interactive model"
        elif problem := warm_replica_problem("minReplicaCount", int(minimum), floor):
            yield f"{subject.label}: {problem}"
        idle = k8s.get(subject.props, "spec", "idleReplicaCount")
        if idle is not None and int(idle) < 1:
            yield f"{subject.label}: idleReplicaCount {int(idle)} scales an interactive model to zero when idle"
    elif subject.gk == HPA and _scales_a_predictor(subject):
        minimum = k8s.get(subject.props, "spec", "minReplicas")
        if minimum is not None and (problem := warm_replica_problem("minReplicas", int(minimum), floor)):
            yield f"{subject.label}: {problem}"
    elif subject.gk == k8s.INFERENCE_SERVICE and _isvc_uses_gpus(subject.props):
        minimum = k8s.get(subject.props, "spec", "predictor", "minReplicas")
        if minimum is not None and (problem := warm_replica_problem("spec.predictor.minReplicas", int(minimum), floor)):
            yield f"{subject.label}: {problem}"


warm_replica = resource_policy(
    name=WARM_REPLICA_POLICY,
    description=(
        "Interactive models keep at least minReplicas warm replicas (default 1: minReplicaCount >= 1, no idle "
        f"scale-to-zero); only objects labelled {WORKLOAD_LABEL}=batch may scale to zero."
    ),
    remediation=(
        "Set autoscaling.<model>.minReplicas to at least the minimum and drop idleReplicaCount for interactive "
        "models; a cold start costs minutes (node launch, image pull, weight load), and a lone replica on spot "
        f"capacity is one interruption from an outage. Label genuinely batch workloads {WORKLOAD_LABEL}=batch."
    ),
    check=_check_warm_replica,
    config=PolicyConfigSchema(
        properties={
            "minReplicas": {
                "type": "integer",
                "minimum": 1,
                "default": DEFAULT_MIN_WARM_REPLICAS,
                "description": "Fewest warm replicas an interactive model keeps.",
            }
        }
    ),
)


# --- a model scaled to zero must have a way back ---------------------------------------------


def _can_wake_a_model_at_zero(trigger: Mapping[str, Any]) -> bool:
    """A trigger that does not read the model's own vLLM metrics, which vanish with its last
    replica (a cron window, a queue outside the model server, a query on other series)."""
    kind = k8s.get(trigger, "type")
    if kind in RESOURCE_SIGNALS:
        return False
    if kind == "prometheus":
        return not promql.vllm_metric_names(str(k8s.get(trigger, "metadata", "query", default="")))
    return True


def _check_wake_up(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if subject.gk != SCALED_OBJECT or not _scales_a_predictor(subject):
        return
    minimum = k8s.get(subject.props, "spec", "minReplicaCount", default=KEDA_DEFAULT_MIN_REPLICAS)
    idle = k8s.get(subject.props, "spec", "idleReplicaCount")
    reaches_zero = int(minimum) < 1 or (idle is not None and int(idle) < 1)
    if reaches_zero and not any(_can_wake_a_model_at_zero(t) for _, t in triggers(subject)):
        yield (
            f"{subject.label}: scales to zero but every trigger reads the model's own vLLM metrics, "
            "which vanish with its last replica: nothing can wake it"
        )


wake_up = resource_policy(
    name="scale-to-zero-has-a-wake-up",
    description=(
        "A predictor ScaledObject that can reach zero replicas has a trigger that does not depend on the "
        "model's own metrics (a cron window, or a signal from outside the model server)."
    ),
    remediation=("Enable autoscaling.<model>.triggers.cron for the model's batch window, or keep minReplicas >= 1."),
    check=_check_wake_up,
)

# --- what a trigger reads back, Prometheus still holds ---------------------------------------

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
# kube-prometheus-stack-88.5.3 values.yaml: `prometheus.prometheusSpec.retention: 10d`.
CHART_DEFAULT_RETENTION = "10d"


def _retention(resources: list[Any]) -> tuple[str, float] | None:
    """The stack's Prometheus retention (as written, seconds), from its kube-prometheus-stack
    release; None when the stack installs none (or it is not known at preview)."""
    for release in (subject_of(r) for r in resources if r.resource_type == HELM_RELEASE):
        chart = str(k8s.get(release.props, "chart", default="", unknown="")).rsplit("/", 1)[-1]
        if chart != "kube-prometheus-stack":
            continue
        written = k8s.get(
            release.props,
            "values",
            "prometheus",
            "prometheusSpec",
            "retention",
            default=CHART_DEFAULT_RETENTION,
            unknown=None,
        )
        if not isinstance(written, str):
            return None
        try:
            return written, promql.duration_seconds(written)
        except ValueError:
            return None
    return None


def _check_look_back(resources: list[Any], _config: Mapping[str, Any]) -> Iterator[tuple[str, str | None]]:
    retention = _retention(resources)
    if retention is None:
        return
    written, seconds = retention
    for subject in of_kind(resources, *SCALED_OBJECT):
        for name, _trigger, query in _prometheus_triggers(subject):
            try:
                reach = promql.look_back_seconds(query)
            except ValueError:
                continue  # not PromQL this rule reads: prometheus_queries names it
            if reach > seconds:
                yield (
                    f"{subject.label}: prometheus trigger {name} reads {reach / 3600:g} h back, beyond the stack's "
                    f"Prometheus retention ({written}); the query would find nothing once the data ages out",
                    subject.urn,
                )


look_back_within_retention = stack_policy(
    name="trigger-look-back-within-prometheus-retention",
    description=(
        "A KEDA trigger's query reads no further back (range + offset + subquery range) than the stack's "
        "Prometheus keeps (prometheus.prometheusSpec.retention of kube-prometheus-stack)."
    ),
    remediation=(
        "Shorten the forecast's look-back (autoscaling.*.triggers.seasonal.periodSeconds, trend.rangeSeconds) or "
        "raise observability.prometheus.retention above it."
    ),
    check=_check_look_back,
)

POLICIES = [
    no_resource_scaling,
    prometheus_queries,
    quantile_metric_type,
    scale_down_slower,
    warm_replica,
    wake_up,
    look_back_within_retention,
]
