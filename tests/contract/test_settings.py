"""Stack config is validated as a whole: every bad value is named by its key path."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from contract.settings import SettingsError, parse
from contract.settings.errors import key_path
from contract.settings.stack_file import load_stack
from tests.harness import ROOT

NS = "inference-platform:"


def stack_raw(stack: str) -> dict[str, Any]:
    config = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {k.removeprefix(NS): v for k, v in config.items() if k.startswith(NS)}


def default_scope_raw(stack: str) -> dict[str, Any]:
    """`stack_raw` with `autoscaling` reduced to its `default` scope. The per-model blocks hold the
    planner's values and override the default field by field, so a test of a rule on the default
    scope, or of how it merges, starts from here."""
    raw = stack_raw(stack)
    raw["autoscaling"] = {"default": raw.get("autoscaling", {}).get("default", {})}
    return raw


def with_value(raw: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    """A deep copy of `raw` with `path` set to `value` (missing mappings are created)."""
    result = copy.deepcopy(raw)
    node = result
    for part in path[:-1]:
        node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
    node[path[-1]] = value
    return result


def rejection(raw: dict[str, Any]) -> str:
    with pytest.raises(SettingsError) as caught:
        parse(raw)
    return str(caught.value)


REJECTED = [
    # (stack, key path, bad value, the key path the message must name, a phrase of the rule)
    ("dev", ["network", "cidr"], "10.20.0.0/33", "network.cidr", "CIDR"),
    ("dev", ["network", "cidr"], "10.20.0.1/16", "network.cidr", "CIDR"),
    ("dev", ["network", "cidr"], "10.20.0.0/24", "network.cidr", "between /16 and /20"),
    ("dev", ["network", "cidr"], "8.8.0.0/16", "network.cidr", "private"),
    ("dev", ["network", "availabilityZones"], ["us-west-2a"], "network.availabilityZones", "at least 2"),
    ("dev", ["network", "availabilityZones"], ["us-west-2a", "us-east-1b"], "network.availabilityZones", "one region"),
    ("dev", ["network", "availabilityZones"], ["us-west-2a", "us-west-2a"], "network.availabilityZones", "repeat"),
    (
        "dev",
        ["network", "availabilityZones"],
        [f"us-west-2{z}" for z in "abcdefgh"],
        "network.availabilityZones",
        "at most 7",
    ),
    ("prod", ["network", "availabilityZones"], ["us-west-2a", "us-west-2b"], "network.availabilityZones", "at least 3"),
    ("dev", ["network", "natGateways"], "three", "network.natGateways", "single"),
    ("dev", ["network", "natGatway"], "single", "network.natGatway", "not a known setting"),
    ("dev", ["cluster", "kubernetesVersion"], "1.34.2", "cluster.kubernetesVersion", "minor version"),
    ("dev", ["cluster", "kubernetesVersion"], "1.27", "cluster.kubernetesVersion", "1.30 or newer"),
    ("dev", ["cluster", "publicAccessCidrs"], ["0.0.0.0/0"], "cluster.publicAccessCidrs", "whole internet"),
    ("dev", ["cluster", "adminPrincipalArns"], ["admin"], "cluster.adminPrincipalArns", "ARN"),
    ("dev", ["cluster", "controlPlaneLogs"], ["api"], "cluster.controlPlaneLogs", "must include"),
    ("dev", ["gpuCapacity", "provisioner"], "cluster-autoscaler", "gpuCapacity.provisioner", "auto-mode"),
    ("dev", ["gpuCapacity", "provisioner"], "karpenter", "gpuCapacity.provisioner", "cluster.autoMode"),
    ("dev", ["gpuCapacity", "pools", 1, "weight"], 100, "gpuCapacity.pools", "distinct"),
    ("dev", ["gpuCapacity", "pools", 0, "gpuLimit"], 0, "gpuCapacity.pools[0].gpuLimit", "greater than 0"),
    (
        "dev",
        ["gpuCapacity", "pools", 0, "instanceFamilies"],
        [],
        "gpuCapacity.pools[0].instanceFamilies",
        "at least one",
    ),
    (
        "dev",
        ["gpuCapacity", "pools", 0, "instanceFamilies"],
        ["m5"],
        "gpuCapacity.pools[0].instanceFamilies",
        "non-GPU",
    ),
    ("dev", ["gpuCapacity", "pools", 0, "capacityType"], "reserved", "gpuCapacity.pools[0].capacityType", "spot"),
    (
        "dev",
        ["gpuCapacity", "pools", 0, "consolidateAfter"],
        "ten minutes",
        "gpuCapacity.pools[0].consolidateAfter",
        "duration",
    ),
    ("dev", ["gpuCapacity", "nodeClass", "amiAlias"], "al2023@latest", "gpuCapacity.nodeClass.amiAlias", "pinned"),
    (
        "dev",
        ["gpuCapacity", "generalPurpose", "cpuLimit"],
        4,
        "gpuCapacity.generalPurpose.cpuLimit",
        "greater than or equal to 8",
    ),
    (
        "dev",
        ["gpuCapacity", "generalPurpose", "consolidateAfter"],
        "soon",
        "gpuCapacity.generalPurpose.consolidateAfter",
        "duration",
    ),
    ("dev", ["models", 0, "gpusPerReplica"], 2, "gpuCapacity.pools[1].gpuLimit", "gpusPerReplica"),
    ("dev", ["models", 0, "huggingFaceId"], "qwen-1.5b", "models[0].huggingFaceId", "Hugging Face model id"),
    ("dev", ["models", 0, "revision"], "main", "models[0].revision", "40-hex"),
    ("dev", ["models", 0, "revision"], "989AA7980E4CF806F80C7FEF2B1ADB7BC71AA306", "models[0].revision", "40-hex"),
    ("dev", ["models", 0, "name"], "Qwen_1.5B", "models[0].name", "DNS label"),
    ("dev", ["models", 0, "image"], "vllm/vllm-openai:latest", "models[0].image", "pinned"),
    ("dev", ["models", 0, "image"], "vllm/vllm-openai", "models[0].image", "pinned"),
    ("dev", ["models", 0, "pools"], ["gpu-reserved"], "models[0].pools", "not a GPU NodePool"),
    (
        "dev",
        ["models", 0, "engine"],
        {"maxNumSeqs": 256, "maxNumBatchedTokens": 128},
        "models[0].engine.maxNumBatchedTokens",
        "maxNumSeqs",
    ),
    ("dev", ["models", 0, "engine", "extraArgs"], ["--port=9000"], "models[0].engine.extraArgs", "must not set"),
    ("dev", ["models", 0, "sizeGiB"], -1, "models[0].sizeGiB", "greater than 0"),
    (
        "dev",
        ["models", 0, "resources", "requests", "memory"],
        "12 GB",
        "models[0].resources.requests.memory",
        "quantity",
    ),
    ("dev", ["models", 0, "workload"], "realtime", "models[0].workload", "interactive"),
    (
        "dev",
        ["autoscaling", "default", "maxReplicas"],
        0,
        "autoscaling.default.maxReplicas",
        "greater than or equal to 1",
    ),
    ("dev", ["autoscaling", "default", "minReplicas"], 5, "autoscaling.default.maxReplicas", ">= minReplicas"),
    ("dev", ["autoscaling", "default", "minReplicas"], 0, "autoscaling.default.minReplicas", "batch"),
    ("dev", ["autoscaling", "default", "maxReplica"], 3, "autoscaling.default.maxReplica", "not a known setting"),
    ("dev", ["autoscaling", "qwen-typo"], {"maxReplicas": 2}, "autoscaling.qwen-typo", "names no model"),
    (
        "dev",
        ["autoscaling", "default", "slo"],
        {"ttftP95Seconds": 1.0, "tpotP95Seconds": 0.1, "e2eP99Seconds": 40},
        "autoscaling.default.triggers.e2eLatency.thresholdSeconds",
        "above slo.e2eP99Seconds",
    ),
    (
        "dev",
        ["autoscaling", "default", "slo", "tpotP95Seconds"],
        0,
        "autoscaling.default.slo.tpotP95Seconds",
        "greater than 0",
    ),
    (
        "dev",
        ["autoscaling", "default", "triggers", "kvCache", "targetPerReplica"],
        1.5,
        "autoscaling.default.triggers.kvCache.targetPerReplica",
        "less than or equal to 1",
    ),
    (
        "dev",
        ["autoscaling", "default", "behavior", "scaleDown", "stabilizationWindowSeconds"],
        -1,
        "autoscaling.default.behavior.scaleDown.stabilizationWindowSeconds",
        "greater than or equal to 0",
    ),
    (
        "dev",
        ["autoscaling", "default", "behavior"],
        {
            "scaleUp": {
                "stabilizationWindowSeconds": 300,
                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
            },
            "scaleDown": {
                "stabilizationWindowSeconds": 60,
                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
            },
        },
        "autoscaling.default.behavior.scaleDown.stabilizationWindowSeconds",
        "scale down slower",
    ),
    ("dev", ["autoscaling", "default", "maxReplicas"], 4, "autoscaling", "gpuLimit"),
    ("dev", ["environment"], "staging", "environment", "dev"),
    ("dev", ["netwrok"], {}, "netwrok", "not a known setting"),
    (
        "dev",
        ["autoscaling", "default", "triggers", "queueDepth", "windowSeconds"],
        20,
        "autoscaling.default.triggers.queueDepth.windowSeconds",
        ">= 2 x observability.scrapeIntervalSeconds",
    ),
    ("dev", ["observability", "latencyWindowSeconds"], 20, "observability.latencyWindowSeconds", ">= 2 x"),
    (
        "dev",
        ["observability", "scrapeIntervalSeconds"],
        60,
        "observability.scrapeIntervalSeconds",
        "less than or equal to 30",
    ),
    (
        "dev",
        ["observability", "prometheus", "retention"],
        "two weeks",
        "observability.prometheus.retention",
        "duration",
    ),
    (
        "dev",
        ["observability", "alerts", "kvCacheNearFullFraction"],
        0,
        "observability.alerts.kvCacheNearFullFraction",
        "greater than 0",
    ),
    (
        "dev",
        ["autoscaling", "default", "fallbackBehavior"],
        "dynamic",
        "autoscaling.default.fallbackBehavior",
        "static",
    ),
    # Serving and gateway (issue 3).
    (
        "dev",
        ["serving", "terminationGracePeriodSeconds"],
        200,
        "serving.terminationGracePeriodSeconds",
        ">= gateway.timeouts.requestSeconds",
    ),
    ("dev", ["gateway", "timeouts", "requestSeconds"], 600, "serving.terminationGracePeriodSeconds", "cuts requests"),
    (
        "dev",
        ["gateway", "timeouts", "streamIdleSeconds"],
        301,
        "gateway.timeouts.streamIdleSeconds",
        "<= requestSeconds",
    ),
    ("dev", ["serving", "drainSeconds"], 121, "serving.drainSeconds", "less than or equal to 120"),
    ("dev", ["serving", "kserveNamespace"], "KServe", "serving.kserveNamespace", "namespace name"),
    ("dev", ["gateway", "clients"], [], "gateway.clients", "at least 1"),
    (
        "dev",
        ["gateway", "clients"],
        [{"name": "a", "requests": {"limit": 5, "unit": "Minute"}}],
        "gateway.clients[0].tokens",
        "is required",
    ),
    (
        "dev",
        ["gateway", "clients"],
        [{"name": "a", "tokens": {"limit": 5, "unit": "Hour"}}],
        "gateway.clients[0].requests",
        "is required",
    ),
    (
        "dev",
        ["gateway", "clients"],
        [{"name": "a", "requests": {"limit": 5, "unit": "Minute"}, "tokens": {"limit": 5, "unit": "Hour"}}] * 2,
        "gateway.clients",
        "repeats client names",
    ),
    ("dev", ["gateway", "clients", 0, "name"], "Team_A", "gateway.clients[0].name", "DNS label"),
    ("dev", ["gateway", "clients", 0, "requests", "unit"], "Fortnight", "gateway.clients[0].requests.unit", "Minute"),
    ("dev", ["gateway", "clients", 0, "tokens", "limit"], 0, "gateway.clients[0].tokens.limit", "greater than 0"),
    ("dev", ["gateway", "scheme"], "internet-facing", "gateway.tlsCertificateArn", "internet-facing"),
    ("dev", ["gateway", "scheme"], "public", "gateway.scheme", "internal"),
    ("dev", ["gateway", "tlsCertificateArn"], "arn:aws:acm:bad", "gateway.tlsCertificateArn", "ACM certificate ARN"),
    ("dev", ["gateway", "sourceRanges"], ["10.0.0.1/8"], "gateway.sourceRanges", "CIDR"),
    ("dev", ["gateway", "bufferLimit"], "8MB", "gateway.bufferLimit", "size like"),
    ("dev", ["gateway", "rateLimit", "redisImage"], "redis:latest", "gateway.rateLimit.redisImage", "pinned"),
    ("dev", ["gateway", "replica"], 2, "gateway.replica", "not a known setting"),
    ("prod", ["gateway", "replicas"], 1, "gateway.replicas", ">= 2 in a prod stack"),
    ("prod", ["gateway", "rateLimit", "serviceReplicas"], 1, "gateway.rateLimit.serviceReplicas", ">= 2"),
    ("prod", ["gateway", "rateLimit", "failClosed"], True, "gateway.rateLimit.failClosed", "single point of failure"),
    ("dev", ["gateway", "namespace"], "inference", "gateway.namespace", "serving.namespace"),
    ("dev", ["gateway", "namespace"], "envoy-gateway-system", "gateway.namespace", "Envoy Gateway"),
]


@pytest.mark.parametrize(
    ("stack", "path", "value", "named_key", "rule"),
    REJECTED,
    ids=[f"{case[3]}={case[2]!r}"[:60] for case in REJECTED],
)
def test_invalid_value_is_rejected_naming_its_key(
    stack: str, path: list[Any], value: Any, named_key: str, rule: str
) -> None:
    message = rejection(with_value(default_scope_raw(stack), path, value))
    assert f"{NS}{named_key}" in message
    assert rule in message


def test_missing_models_section_is_rejected_as_required() -> None:
    raw = stack_raw("dev")
    del raw["models"]
    assert f"{NS}models is required" in rejection(raw)


def test_all_problems_are_reported_at_once() -> None:
    raw = with_value(with_value(stack_raw("dev"), ["network", "cidr"], "bad"), ["models", 0, "revision"], "main")
    message = rejection(raw)
    assert f"{NS}network.cidr" in message and f"{NS}models[0].revision" in message


def test_message_shows_the_offending_value() -> None:
    message = rejection(with_value(default_scope_raw("dev"), ["autoscaling", "default", "minReplicas"], 5))
    assert "autoscaling.default.maxReplicas (3) must be >= minReplicas (5)" in message


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_files_are_valid(stack: str) -> None:
    settings = load_stack(stack, ROOT)
    assert settings.environment == stack


def test_the_slo_needs_no_end_to_end_target() -> None:
    slo = load_stack("prod", ROOT).autoscaling_for("qwen25-14b-awq").slo
    assert (slo.ttft_p95_seconds, slo.tpot_p95_seconds, slo.e2e_p99_seconds) == (2.5, 0.1, None)


def test_an_slo_written_before_tpot_existed_still_validates_with_the_default_tpot() -> None:
    raw = with_value(
        default_scope_raw("dev"), ["autoscaling", "default", "slo"], {"ttftP95Seconds": 2.0, "e2eP99Seconds": 20.0}
    )
    slo = parse(raw).autoscaling_for("qwen25-1p5b").slo
    assert (slo.ttft_p95_seconds, slo.tpot_p95_seconds, slo.e2e_p99_seconds) == (2.0, 0.1, 20.0)


def test_without_an_end_to_end_slo_the_latency_guardrail_has_no_floor() -> None:
    raw = with_value(
        default_scope_raw("dev"), ["autoscaling", "default", "triggers", "e2eLatency", "thresholdSeconds"], 5
    )
    assert parse(raw).autoscaling_for("qwen25-1p5b").triggers.e2e_latency.threshold_seconds == 5


def test_model_override_is_merged_over_default_field_by_field() -> None:
    raw = with_value(
        default_scope_raw("prod"),
        ["autoscaling", "default"],
        {
            "minReplicas": 2,
            "maxReplicas": 6,
            "triggers": {"queueDepth": {"targetPerReplica": 4, "windowSeconds": 60}},
        },
    )
    raw = with_value(
        raw, ["autoscaling", "qwen25-14b-awq"], {"maxReplicas": 12, "triggers": {"queueDepth": {"targetPerReplica": 3}}}
    )
    policy = parse(raw).autoscaling_for("qwen25-14b-awq")
    assert policy.max_replicas == 12
    assert policy.triggers.queue_depth.target_per_replica == 3
    assert policy.triggers.queue_depth.window_seconds == 60  # from default
    assert policy.min_replicas == 2  # from default


def test_gpu_budget_counts_every_model_confined_to_the_same_pools() -> None:
    raw = default_scope_raw("prod")
    gpus = sum(pool["gpuLimit"] for pool in raw["gpuCapacity"]["pools"])
    # Each model alone fits the pools they share; both at their maximum do not.
    for name in ("qwen25-14b-awq", "qwen25-7b-awq"):
        raw = with_value(raw, ["autoscaling", name], {"maxReplicas": gpus // 2 + 1})
    assert "must fit the gpuLimit" in rejection(raw)


def test_batch_model_may_scale_to_zero_with_a_cron_window_to_wake_it() -> None:
    raw = with_value(default_scope_raw("dev"), ["models", 0, "workload"], "batch")
    raw = with_value(raw, ["autoscaling", "default", "minReplicas"], 0)
    raw = with_value(raw, ["autoscaling", "default", "triggers", "cron", "enabled"], True)
    assert parse(raw).autoscaling_for("qwen25-1p5b").min_replicas == 0


def test_scale_to_zero_without_a_cron_window_is_rejected() -> None:
    raw = with_value(default_scope_raw("dev"), ["models", 0, "workload"], "batch")
    raw = with_value(raw, ["autoscaling", "default", "minReplicas"], 0)
    with pytest.raises(SettingsError, match=r"autoscaling\.default\.minReplicas \(0\) needs triggers\.cron\.enabled"):
        parse(raw)


def test_a_replacement_autoscaling_section_is_validated_like_the_stack_file() -> None:
    settings = load_stack("dev", ROOT)
    with pytest.raises(SettingsError, match=r"autoscaling.default.maxReplicas"):
        settings.with_autoscaling({"default": {"minReplicas": 2, "maxReplicas": 1}})


def test_key_path_uses_pulumi_path_syntax() -> None:
    assert key_path(("models", 0, "engine", "maxNumSeqs")) == "models[0].engine.maxNumSeqs"


def test_a_fallback_works_without_the_queue_depth_trigger() -> None:
    # KEDA 2.20.2 doFallback serves AverageValue and Value triggers alike (pkg/fallback/fallback.go)
    raw = with_value(default_scope_raw("dev"), ["autoscaling", "default", "triggers", "queueDepth", "enabled"], False)
    assert parse(raw).autoscaling_for("qwen25-1p5b").fallback_replicas == 1


def test_a_fractional_queue_target_with_a_fallback_is_accepted() -> None:
    # since 2.18 doFallback no longer truncates the target to an integer
    raw = with_value(
        default_scope_raw("dev"), ["autoscaling", "default", "triggers", "queueDepth", "targetPerReplica"], 2.5
    )
    assert parse(raw).autoscaling_for("qwen25-1p5b").triggers.queue_depth.target_per_replica == 2.5


def test_a_fallback_above_max_replicas_is_rejected() -> None:
    raw = with_value(default_scope_raw("dev"), ["autoscaling", "default", "fallbackReplicas"], 99)
    with pytest.raises(SettingsError, match=r"autoscaling\.default\.fallbackReplicas \(99\) must be <= maxReplicas"):
        parse(raw)


def test_without_a_fallback_the_queue_depth_trigger_may_be_disabled() -> None:
    raw = with_value(default_scope_raw("dev"), ["autoscaling", "default", "triggers", "queueDepth", "enabled"], False)
    raw = with_value(raw, ["autoscaling", "default", "fallbackReplicas"], None)
    policy = parse(raw).autoscaling_for("qwen25-1p5b")
    assert policy.fallback_replicas is None and not policy.triggers.queue_depth.enabled
