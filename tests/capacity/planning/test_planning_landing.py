"""The planner prices the instance size a replica lands on (issue 22, item 5): the smallest size
of the family whose allocatable holds the predictor's requests and the GPU node's DaemonSets
(contract/instances.py), at that size's cited price (data/aws_gpu_prices.yaml)."""

from __future__ import annotations

import pytest
import yaml

from capacity.planning import plan
from capacity.planning.evaluator import Candidate
from capacity.planning.space import committed_point, distributions
from capacity.planning.stack import apply_config_set, landing, load_stack_model
from contract.gpu import GPU_OF_FAMILY
from contract.instances import instance_sizes
from tests.harness import ROOT

LISTED = yaml.safe_load(plan.PRICES.read_text())["on_demand_usd_per_instance_hour"]
NOT_IN_KARPENTERS_PRICE_TABLE = {"p5e"}


def prod_14b():
    return load_stack_model("prod", "qwen25-14b-awq", root=ROOT)


def test_a_14gi_replica_is_priced_as_the_2xlarge_it_lands_on():
    types = {t.gpu: t for t in plan.gpu_types(prod_14b())}
    assert types["l4"].instance_size == "g6.2xlarge" and types["a10g"].instance_size == "g5.2xlarge"
    assert types["a10g"].on_demand_usd == LISTED["g5.2xlarge"] == 1.212


G6_PRICE = "capacityPlanning.gpuHourlyPriceUsd.families.g6"


def with_g6_priced(sm, spot: float = 0.41, on_demand: float = 0.93):
    """`sm` with the stack pricing g6 itself (`gpuHourlyPriceUsd.families.g6`)."""
    return apply_config_set(sm, [(f"{G6_PRICE}.spot", spot), (f"{G6_PRICE}.onDemand", on_demand)])


def seven_on_g6():
    """Prod's 7B pinned to g6 on the L4 profile, with the stack pricing g6 at its cited size's price."""
    scope = "models[1]"
    edits = [(f"{scope}.instanceFamilies", ["g6"]), (f"{scope}.capacityProfile", "l4-qwen2.5-7b-awq")]
    seven = load_stack_model("prod", "qwen25-7b-awq", root=ROOT)
    return with_g6_priced(apply_config_set(seven, edits), 0.4373, LISTED["g6.2xlarge"])


def test_the_current_gpu_keeps_the_stacks_own_price():
    sm = prod_14b()
    (on_demand,) = {p.price_per_gpu_hour for p in sm.pools if p.capacity_type == "on-demand"}
    types = {t.gpu: t for t in plan.gpu_types(sm)}
    assert types[plan.current_gpu(sm)].on_demand_usd == on_demand == sm.gpu_prices.on_demand


def test_other_gpus_get_spot_at_the_stacks_spot_to_on_demand_ratio():
    sm = prod_14b()
    prices = {p.capacity_type: p.price_per_gpu_hour for p in sm.pools}
    l4 = next(t for t in plan.gpu_types(sm) if t.gpu == "l4")
    assert l4.on_demand_usd == LISTED["g6.2xlarge"]
    assert l4.spot_usd == pytest.approx(LISTED["g6.2xlarge"] * prices["spot"] / prices["on-demand"])


def test_a_family_the_stack_prices_gets_the_stacks_spot_and_on_demand_price():
    l4 = next(t for t in plan.gpu_types(with_g6_priced(prod_14b())) if t.gpu == "l4")
    assert (l4.on_demand_usd, l4.spot_usd) == (0.93, 0.41)


def test_a_model_pinned_to_a_family_the_stack_prices_runs_its_pools_at_that_price():
    seven, fourteen = seven_on_g6(), with_g6_priced(prod_14b())
    assert {p.capacity_type: p.price_per_gpu_hour for p in seven.pools} == {"spot": 0.4373, "on-demand": 0.9776}
    # the 14B, pinned to g5, keeps the stack-wide price
    assert {p.price_per_gpu_hour for p in fourteen.pools} == {fourteen.gpu_prices.spot, fourteen.gpu_prices.on_demand}


def test_a_smaller_request_lands_on_the_xlarge_and_is_priced_as_one():
    sm = apply_config_set(prod_14b(), [("models[0].resources.requests.memory", "12Gi")])
    l4 = next(t for t in plan.gpu_types(sm) if t.gpu == "l4")
    assert (l4.instance_size, l4.on_demand_usd) == ("g6.xlarge", LISTED["g6.xlarge"])


def test_a_price_flag_overrides_the_list_per_gpu_hour():
    a10g = next(t for t in plan.gpu_types(prod_14b(), {"g5": 2.0}) if t.gpu == "a10g")
    assert a10g.on_demand_usd == 2.0 and a10g.instance_size == "g5.2xlarge"


def test_a_multi_gpu_replica_pays_its_instance_over_its_gpus():
    scope = "autoscaling.qwen25-14b-awq"
    edits = [("models[0].gpusPerReplica", 4), (f"{scope}.minReplicas", 2), (f"{scope}.maxReplicas", 4)]
    # A physics profile: it is derived for any number of GPUs (a measured one ran on one).
    edits += [(f"{scope}.fallbackReplicas", 2), ("models[0].capacityProfile", "a10g-qwen2.5-14b-awq")]
    sm = apply_config_set(prod_14b(), edits)
    l4 = next(t for t in plan.gpu_types(sm) if t.gpu == "l4")
    assert l4.instance_size == "g6.12xlarge"
    assert l4.on_demand_usd * 4 == pytest.approx(LISTED["g6.12xlarge"])


def test_a_size_without_a_price_is_refused_naming_it_and_the_flag():
    sm = apply_config_set(prod_14b(), [("gpuCapacity.pools[0].instanceFamilies[2]", "p5e")])
    with pytest.raises(ValueError, match=r"no price for instance size p5e\.48xlarge .* pass --price p5e="):
        plan.gpu_types(sm)


def test_the_plan_notes_say_which_size_each_replica_lands_on_and_why():
    sm = prod_14b()
    note = plan.landing_note(sm, "g6")
    assert note.startswith("each replica of qwen25-14b-awq lands on g6.2xlarge")
    assert "together 3130m / 14712Mi; the smaller g6.xlarge allocates 3920m / 14162Mi" in note
    assert landing(sm, "g6").size is not None


def test_every_size_the_planner_may_pick_has_a_price():
    priced = sorted(set(GPU_OF_FAMILY) - NOT_IN_KARPENTERS_PRICE_TABLE)
    missing = [s.name for f in priced for s in instance_sizes(f) if s.name not in LISTED]
    assert not missing


def test_the_smallest_size_that_fits_is_the_cheapest_that_fits():
    # Sizes are tried smallest first; a larger size never costs less, so the first fit is
    # the one Karpenter's cheapest-first launch would pick too.
    for family in sorted(set(GPU_OF_FAMILY) - NOT_IN_KARPENTERS_PRICE_TABLE):
        prices = [LISTED[s.name] for s in instance_sizes(family)]
        assert prices == sorted(prices), family


def test_the_price_list_names_only_sizes_of_the_table():
    known = {s.name for f in GPU_OF_FAMILY for s in instance_sizes(f)}
    assert set(LISTED) <= known


def test_a_stack_price_of_another_size_is_named_in_the_notes():
    sm = apply_config_set(prod_14b(), [("capacityPlanning.gpuHourlyPriceUsd.onDemand", 0.8048)])
    note = plan.stack_price_note(sm)
    assert note is not None and note.startswith("capacityPlanning.gpuHourlyPriceUsd.onDemand (0.8048)")
    assert f"${LISTED['g5.2xlarge']:.4f} per GPU-hour of g5.2xlarge" in note


def test_a_family_price_of_another_size_is_named_by_its_family_key():
    note = plan.stack_price_note(apply_config_set(seven_on_g6(), [(f"{G6_PRICE}.onDemand", 0.8048)]))
    assert note is not None and note.startswith("capacityPlanning.gpuHourlyPriceUsd.families.g6.onDemand (0.8048)")


@pytest.mark.parametrize("model", ["qwen25-14b-awq", "qwen25-7b-awq"])
def test_the_committed_prod_prices_are_the_landed_sizes(model):
    assert plan.stack_price_note(load_stack_model("prod", model, root=ROOT)) is None


def test_a_family_price_at_its_cited_size_raises_no_note():
    assert plan.stack_price_note(seven_on_g6()) is None


def _dev_with_lmcache(size: str):
    dev = load_stack_model("dev", root=ROOT)
    index = plan.model_index(dev)
    edits = [(f"models[{index}].image", "example.com/vllm-lmcache:v0.25.1"), (f"models[{index}].engine.lmcache", size)]
    return dev, apply_config_set(dev, edits)


def test_a_candidates_lmcache_tier_is_priced_as_the_bigger_size_its_host_memory_lands_on():
    dev, cached = _dev_with_lmcache("16Gi")
    kind = next(t for t in plan.gpu_types(dev) if t.gpu == plan.current_gpu(dev))
    landed = plan.priced_where_it_lands(kind, cached)
    bigger = landing(cached, kind.family).size
    assert bigger is not None and bigger.name != kind.instance_size == landing(dev, kind.family).size.name
    assert landed.instance_size == bigger.name
    assert landed.on_demand_usd == pytest.approx(kind.on_demand_usd * LISTED[bigger.name] / LISTED[kind.instance_size])
    assert landed.spot_usd / landed.on_demand_usd == pytest.approx(kind.spot_usd / kind.on_demand_usd)


def test_a_candidate_landing_where_the_stack_does_keeps_its_gpu_types_price():
    dev = load_stack_model("dev", root=ROOT)
    kind = next(t for t in plan.gpu_types(dev) if t.gpu == plan.current_gpu(dev))
    assert plan.priced_where_it_lands(kind, dev) is kind


def test_the_winners_notes_name_the_size_its_own_lmcache_tier_lands_on():
    dev = load_stack_model("dev", root=ROOT)
    built = apply_config_set(dev, [(f"models[{plan.model_index(dev)}].image", "example.com/vllm-lmcache:v0.25.1")])
    point = committed_point(built, distributions(built.pool_replicas, False, (600,), lmcache=True), 0.55, 34.5)
    params = {**point, "gpu": plan.current_gpu(built), "maxReplicas": built.policy.max_replicas}
    params.update(consolidateAfter=None, kvEnabled=True, kvTarget=0.75, e2eEnabled=True, e2eThreshold=30.0)
    family = plan.family_of(built, plan.current_gpu(built))
    sizes = {
        lm: landing(apply_config_set(built, plan.edits_of(built, {**params, "lmcache": lm})), family).size.name
        for lm in ("none", "16Gi")
    }
    assert sizes["none"] != sizes["16Gi"]
    for lm, size in sizes.items():
        notes = plan.deployment_notes(built, {**params, "lmcache": lm})
        assert any(n.startswith(f"each replica of {built.model.name} lands on {size} ") for n in notes), lm


def test_a_deployed_lmcache_candidate_bills_its_pools_at_the_bigger_size():
    dev, cached = _dev_with_lmcache("16Gi")
    types = {t.gpu: t for t in plan.gpu_types(dev)}
    kind = types[plan.current_gpu(dev)]
    index = plan.model_index(dev)
    edits = (
        (f"models[{index}].image", "example.com/vllm-lmcache:v0.25.1"),
        (f"models[{index}].engine.lmcache", "16Gi"),
    )
    deployed = plan.deploy(dev, Candidate(edits, {"gpu": kind.gpu}), types)
    landed = plan.priced_where_it_lands(kind, cached)
    assert {p.price_per_gpu_hour for p in deployed.pools} == {landed.on_demand_usd, landed.spot_usd}
    assert landed.on_demand_usd > kind.on_demand_usd
