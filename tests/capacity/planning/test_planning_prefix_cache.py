"""The planner and the KV cache: routing searched when the traces know their prefixes, deployed as
`serving.routing`, and what the cache is worth at the target."""

from pathlib import Path

from capacity.planning import plan
from capacity.planning.days import Part
from capacity.planning.run import CombinedSummary, RunOptions
from capacity.planning.space import committed_point, distributions
from capacity.planning.stack import apply_config_set, load_stack_model
from capacity.workload.traces import load

ROOT = Path(__file__).resolve().parents[3]


def test_routing_is_searched_only_when_asked():
    assert "routing" not in distributions(3, False, (600,))
    assert distributions(3, False, (600,), routing=True)["routing"].choices == ("least-request", "endpoint-picker")


def test_the_committed_point_holds_the_stack_s_routing():
    dev = load_stack_model("dev", root=ROOT)
    point = committed_point(dev, distributions(dev.pool_replicas, False, (600,), routing=True), 0.55, 34.5)
    assert point["routing"] == dev.routing == "least-request"


def test_a_searched_routing_deploys_as_the_model_s_serving_routing():
    dev = load_stack_model("dev", root=ROOT)
    point = committed_point(dev, distributions(dev.pool_replicas, False, (600,), routing=True), 0.55, 34.5)
    params = {**point, "gpu": plan.current_gpu(dev), "maxReplicas": dev.policy.max_replicas, "consolidateAfter": None}
    params.update(kvEnabled=True, kvTarget=0.75, e2eEnabled=True, e2eThreshold=30.0, routing="endpoint-picker")
    edits = plan.edits_of(dev, params)
    assert (f"models[{plan.model_index(dev)}].serving.routing", "endpoint-picker") in edits
    assert apply_config_set(dev, edits).routing == "endpoint-picker"


def test_the_cache_is_worth_nothing_to_plan_on_traffic_without_block_ids():
    dev = load_stack_model("dev", root=ROOT)
    trace = load("synthetic:step:base=1,peak=1,duration=60,prompt=256,output=16")
    validation = CombinedSummary(0.99, 0.0, 0.0, 1.0, 1.0, 0, 1, None, 0.5, 2.0)
    assert plan.cache_value(dev, validation, [Part("t", trace, 0.7)], RunOptions()) is None


def test_lmcache_is_not_searched_for_a_model_on_the_stock_vllm_image():
    # settings refuse engine.lmcache on vllm/vllm-openai: it ships no LMCache
    assert not plan.lmcache_deploys(load_stack_model("prod", root=ROOT))


def test_a_searched_lmcache_tier_deploys_as_engine_lmcache():
    dev = load_stack_model("dev", root=ROOT)
    index = plan.model_index(dev)
    built = apply_config_set(dev, [(f"models[{index}].image", "example.com/vllm-lmcache:v0.25.1")])
    assert plan.lmcache_deploys(built)
    point = committed_point(built, distributions(built.pool_replicas, False, (600,), lmcache=True), 0.55, 34.5)
    assert point["lmcache"] == "none"
    params = {
        **point,
        "gpu": plan.current_gpu(built),
        "maxReplicas": built.policy.max_replicas,
        "consolidateAfter": None,
    }
    params.update(kvEnabled=True, kvTarget=0.75, e2eEnabled=True, e2eThreshold=30.0, lmcache="16Gi")
    deployed = apply_config_set(built, plan.edits_of(built, params))
    assert deployed.model.engine.lmcache == "16Gi" and deployed.profile.lmcache_tokens > 0
