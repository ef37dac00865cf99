"""Warm headroom in the simulator: placeholder pods of the lowest priority hold GPU nodes of the
pools with the image pulled (the Kubernetes overprovisioning pattern,
kubernetes/website content/en/docs/tasks/administer-cluster/node-overprovisioning.md: "the control
plane will pick one these placeholder pods as the first candidate to preempt"); a new replica
preempts one and pays only weight load and engine start, the placeholder goes Pending and
Karpenter launches a node for it, and the nodes are billed like any GPU node of their pool."""

import hashlib

import numpy as np
import pytest

from capacity.planning.stack import scaled_object
from capacity.sim.cluster.startup import Pool, Startup
from capacity.sim.events import EventQueue
from capacity.sim.fleet import Fleet, Phase
from capacity.sim.simulator import SimConfig, simulate
from capacity.workload.traces import load
from tests.capacity.sim.toy import POLICY, STEP, TOY

SPOT = Pool("gpu-spot", "spot", 100, 4, 0.5, 600.0)
ON_DEMAND = Pool("gpu-on-demand", "on-demand", 10, 2, 1.0, 600.0)
# node 60 s + image 60 s (warm after 120 s), weights 10 s, engine 20 s: 150 s cold, 30 s on a warm node
STARTUP = Startup((60, 60), (60, 60), 10.0, (20, 20))


def fleet(headroom: int, pools: tuple[Pool, ...] = (SPOT, ON_DEMAND), replicas: int = 1) -> Fleet:
    """A fleet as the simulation starts it: `replicas` serving and the headroom warm at t = 0."""
    f = Fleet(TOY, pools, STARTUP, 1, 0.0, np.random.default_rng(0), EventQueue(), replicas, headroom)
    for _ in range(replicas):
        f.create_pod(0.0, warm=True)
    f.start_headroom(0.0)
    return f


def newest(f: Fleet):
    return f.pods[-1]


def held(f: Fleet):
    return [n for n in f.nodes if n.holds_placeholder]


def test_a_replica_on_a_warm_node_is_ready_after_weight_load_and_engine_init():
    f = fleet(headroom=1)
    f.set_replicas(2, 100.0)
    assert newest(f).ready_at == 100.0 + 10.0 + 20.0


def test_without_headroom_a_replica_pays_node_launch_and_image_pull_too():
    f = fleet(headroom=0)
    f.set_replicas(2, 100.0)
    assert newest(f).ready_at == 100.0 + 150.0


def test_the_preempted_placeholder_gets_a_node_that_is_warm_after_launch_and_pull():
    f = fleet(headroom=1)
    f.set_replicas(2, 100.0)
    (refill,) = held(f)
    assert refill.created == 100.0
    assert refill.warm_at == 100.0 + 60.0 + 60.0


def test_a_replica_on_a_placeholder_node_still_warming_waits_for_what_is_left_of_it():
    f = fleet(headroom=1)
    f.set_replicas(2, 100.0)  # the placeholder's new node is warm at 220 s
    f.set_replicas(3, 150.0)
    assert newest(f).ready_at == 220.0 + 10.0 + 20.0


def test_an_empty_node_is_used_before_a_placeholder_is_preempted():
    f = fleet(headroom=1)
    f.set_replicas(2, 100.0)
    f.set_replicas(1, 200.0)  # the starting replica is deleted: its node stays empty
    f.set_replicas(2, 300.0)
    assert len(held(f)) == 1
    assert newest(f).ready_at == 300.0 + 30.0


def test_placeholders_hold_nodes_within_the_pools_gpu_limits_in_weight_order():
    f = fleet(headroom=6)  # 1 replica + 6 placeholders on 4 spot + 2 on-demand GPUs
    assert [n.pool.name for n in held(f)] == ["gpu-spot"] * 3 + ["gpu-on-demand"] * 2
    assert f.unplaced == 1


def test_a_node_freed_while_a_placeholder_has_no_room_takes_the_placeholder_at_once():
    f = fleet(headroom=1, pools=(Pool("only", "on-demand", 1, 2, 1.0, 600.0),))
    f.set_replicas(2, 100.0)  # preempts the placeholder; no room left to launch one
    assert f.unplaced == 1
    f.set_replicas(1, 200.0)  # the new replica, still starting, is deleted
    (node,) = held(f)
    assert (node.held_since, node.warm_at, f.unplaced) == (200.0, 200.0, 0)


def test_a_reclaimed_placeholder_node_is_replaced_by_a_new_launch():
    f = fleet(headroom=1, pools=(SPOT,))
    (node,) = held(f)
    f.on_reclaim(node, 500.0)
    (replacement,) = held(f)
    assert replacement is not node and replacement.warm_at == 500.0 + 120.0


def test_a_replica_that_preempted_a_placeholder_serves_from_the_placeholders_node():
    f = fleet(headroom=1)
    (warm,) = held(f)
    f.set_replicas(2, 100.0)
    assert newest(f).node is warm and newest(f).phase == Phase.STARTING


def config(**overrides) -> SimConfig:
    base = dict(profile=TOY, pools=(SPOT, ON_DEMAND), startup=STARTUP, initial_replicas=1)
    return SimConfig(**{**base, **overrides})


def test_warm_nodes_are_billed_like_gpu_nodes_of_their_pool():
    trace = load(STEP)
    static = simulate(config(initial_replicas=2, headroom=2), trace, None)
    bare = simulate(config(initial_replicas=2), trace, None)
    held_s = 2 * static.end_time  # two spot nodes held from t = 0 to the end
    assert static.headroom_gpu_seconds == pytest.approx(held_s)
    assert static.gpu_seconds["spot"] - bare.gpu_seconds["spot"] == pytest.approx(held_s)
    assert static.cost_usd - bare.cost_usd == pytest.approx(static.headroom_cost_usd)
    assert static.headroom_cost_usd == pytest.approx(held_s / 3600 * SPOT.price_per_gpu_hour)


def test_headroom_brings_the_first_scale_out_up_faster():
    trace = load(STEP)
    cold = simulate(config(), trace, scaled_object(POLICY))
    warm = simulate(config(headroom=2), trace, scaled_object(POLICY))

    def first_scale_out_ready(result):
        tl = result.timeline
        return next(t for t, r in zip(tl.t, tl.ready) if r > 1)

    assert first_scale_out_ready(warm) < first_scale_out_ready(cold) - 100


def test_without_headroom_the_simulator_replays_exactly_as_before_headroom_existed():
    # Seeded runs with spot reclaims and consolidation; the digest was computed with the simulator
    # of 32a2ee5, the commit before warm headroom (the same script on both checkouts).
    digest = hashlib.sha256()
    for seed in (0, 1, 2):
        pools = (Pool("gpu-spot", "spot", 100, 4, 0.5, 120.0), Pool("gpu-on-demand", "on-demand", 10, 2, 1.0, 60.0))
        run = SimConfig(
            profile=TOY,
            pools=pools,
            startup=Startup((60, 120), (60, 180), 10.0, (20, 60)),
            initial_replicas=1,
            seed=seed,
            spot_interruptions_per_hour=3.0,
        )
        r = simulate(run, load(STEP), scaled_object(POLICY))
        for values in (r.e2e, r.ttft, r.outcome):
            digest.update(np.ascontiguousarray(values).tobytes())
        digest.update(repr(r.nodes).encode())
        digest.update(repr(r.scale_times).encode())
        digest.update(repr(r.timeline.ready).encode())
        assert r.headroom == ()
    assert digest.hexdigest() == "81f30b3aec71c75c96529b9fdf187857bf55250c34db49e769466075f7df7f4d"
