"""The planner's rules: the guardrail triggers stay on above what healthy traffic reaches, and
maxReplicas is the pools' replica budget; a committed policy is told which rules it breaks."""

from dataclasses import replace
from pathlib import Path

import pytest

from capacity.planning import plan
from capacity.planning.days import Part
from capacity.planning.guardrails import KV_CEILING, guardrails
from capacity.planning.run import RunOptions
from capacity.planning.space import distributions
from capacity.planning.stack import apply_config_set, load_stack_model, replica_budget
from capacity.workload.traces import load

ROOT = Path(__file__).resolve().parents[3]
# 512-token prompts, 128-token answers: a sequence holds 512 + 64 tokens on average
STEP = "synthetic:step:base=2,peak=12,at=300,length=300,duration=900,prompt=512,output=128"


@pytest.fixture(scope="module")
def dev():
    return load_stack_model("dev", root=ROOT)  # TTFT 1 s, TPOT 0.1 s, no e2e target; the pools hold 3


@pytest.fixture(scope="module")
def rules(dev):
    return guardrails(dev, [load(STEP)])


def test_the_latency_bound_is_what_an_slo_meeting_request_at_the_guardrails_quantile_takes(dev, rules):
    longest = sorted(load(STEP).output_tokens)[int(0.99 * (len(load(STEP)) - 1))]
    assert rules.e2e_bound_s == pytest.approx(1.0 + 0.1 * (longest - 1), abs=0.2)


def test_an_e2e_target_raises_the_latency_bound_to_it(dev):
    strict = apply_config_set(
        dev,
        [
            ("autoscaling.qwen25-1p5b.slo.e2eP99Seconds", 300),
            ("autoscaling.qwen25-1p5b.triggers.e2eLatency.thresholdSeconds", 400),
        ],
    )
    assert guardrails(strict, [load(STEP)]).e2e_bound_s == 300


def test_the_kv_floor_is_a_full_replica_of_the_traffics_mean_sequences(dev, rules):
    trace = load(STEP)
    in_flight = trace.prompt_tokens.mean() + trace.output_tokens.mean() / 2
    assert rules.kv_floor(dev.profile) == pytest.approx(
        dev.profile.max_num_seqs * in_flight / dev.profile.kv_cache_tokens, abs=1e-3
    )


def test_a_cache_too_small_for_a_full_batch_puts_the_floor_at_the_ceiling(dev, rules):
    small = replace(dev.profile, kv_cache_tokens=1000)
    assert rules.kv_floor(small) == KV_CEILING and rules.kv_target(small, 0.7) == KV_CEILING


def test_headroom_places_the_kv_target_between_the_floor_and_the_ceiling(dev, rules):
    floor = rules.kv_floor(dev.profile)
    assert floor <= rules.kv_target(dev.profile, 0.0) < floor + 0.01  # rounded up: never below the floor
    assert rules.kv_target(dev.profile, 1.0) == KV_CEILING


def test_max_replicas_is_the_pools_budget(dev, rules):
    assert rules.max_replicas == dev.pool_replicas == 3


def test_a_model_sharing_pools_gets_what_the_other_models_ceilings_leave():
    prod = load_stack_model("prod", "qwen25-14b-awq", root=ROOT)  # its pools are shared with the 7B
    gpus = sum(pool.gpu_limit for pool in prod.pools)
    seven = load_stack_model("prod", "qwen25-7b-awq", root=ROOT).policy.max_replicas
    assert replica_budget(prod) == gpus - seven
    scope = "autoscaling.qwen25-7b-awq"
    roomier = apply_config_set(
        prod, [(f"{scope}.minReplicas", 1), (f"{scope}.fallbackReplicas", 1), (f"{scope}.maxReplicas", seven - 2)]
    )
    assert replica_budget(roomier) == gpus - seven + 2


def breaks(dev, rules, *edits):
    scope = "autoscaling.qwen25-1p5b"
    sm = apply_config_set(dev, [(f"{scope}.{key}", value) for key, value in edits])
    return rules.breaks(sm.policy, sm.profile)


def test_a_policy_at_the_budget_with_both_guardrails_above_healthy_traffic_breaks_nothing(dev, rules):
    assert breaks(dev, rules, ("maxReplicas", 3), ("triggers.e2eLatency.thresholdSeconds", 60)) == []


def test_each_rule_a_policy_breaks_is_one_line(dev, rules):
    assert breaks(
        dev, rules, ("maxReplicas", 2), ("triggers.kvCache.enabled", False), ("triggers.e2eLatency.enabled", False)
    ) == [
        "maxReplicas 2 is not the pools' replica budget for the model (3)",
        "the kvCache guardrail is off",
        "the e2eLatency guardrail is off",
    ]
    low = breaks(
        dev,
        rules,
        ("maxReplicas", 3),
        ("triggers.kvCache.targetPerReplica", 0.01),
        ("triggers.e2eLatency.thresholdSeconds", 5),
    )
    assert (
        low[0].startswith("triggers.kvCache.targetPerReplica 0.01 is below") and "what a full replica holds" in low[0]
    )
    assert low[1].startswith(f"triggers.e2eLatency.thresholdSeconds 5 is below {rules.e2e_bound_s:g} s")


def test_with_guardrails_droppable_only_the_ceiling_is_a_rule(dev, rules):
    droppable = replace(rules, kept=False)
    scope = "autoscaling.qwen25-1p5b"
    sm = apply_config_set(
        dev,
        [
            (f"{scope}.triggers.kvCache.enabled", False),
            (f"{scope}.minReplicas", 1),
            (f"{scope}.fallbackReplicas", 1),
            (f"{scope}.maxReplicas", 2),
        ],
    )
    assert droppable.breaks(sm.policy, sm.profile) == [
        "maxReplicas 2 is not the pools' replica budget for the model (3)"
    ]


def test_only_a_droppable_search_draws_the_guardrails_on_or_off():
    kept, droppable = distributions(3, False, (600,)), distributions(3, False, (600,), guardrails=False)
    assert {"kvEnabled", "e2eEnabled", "kvTarget"} & set(kept) == set() and "kvHeadroom" in kept
    assert {"kvEnabled", "e2eEnabled", "kvTarget"} <= set(droppable) and "maxReplicas" not in droppable


def test_every_drawn_candidate_keeps_the_rules(dev):
    trace = load(STEP)
    result = plan.search(
        dev, [Part("t", trace)], 0.9, trials=6, seed=1, workers=2, options=RunOptions(), only=("a10g",)
    )
    rules = result.rules
    for trial in result.trials:
        deployed = plan.deploy(dev, trial.candidate, result.types)
        assert rules.breaks(deployed.policy, deployed.profile) == [], trial.params
