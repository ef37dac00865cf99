"""Routing across ready replicas, and where/when new replicas start."""

from types import SimpleNamespace

import numpy as np

from capacity.sim.cluster.router import LeastOutstanding, LeastRequest, RoundRobin, make_router
from capacity.sim.cluster.startup import Pool, Startup, place, replica_capacity

SPOT = Pool("gpu-spot", "spot", 100, 2, 0.45)
ON_DEMAND = Pool("gpu-on-demand", "on-demand", 10, 1, 1.0)


def route(router, ready):
    return router.pick(ready, router.candidates(len(ready)))


def test_round_robin_cycles_through_replicas():
    router, ready = RoundRobin(), [SimpleNamespace(outstanding=0)] * 3
    assert [route(router, ready) for _ in range(4)] == [0, 1, 2, 0]


def test_least_outstanding_picks_the_least_loaded_and_the_first_on_ties():
    ready = [SimpleNamespace(outstanding=n) for n in (3, 1, 1)]
    assert route(LeastOutstanding(), ready) == 1


def test_least_request_compares_two_distinct_random_replicas():
    router = LeastRequest(seed=3)
    pairs = [tuple(router.candidates(5)) for _ in range(200)]
    assert all(a != b for a, b in pairs)
    assert {i for pair in pairs for i in pair} == set(range(5))


def test_least_request_sends_to_the_less_loaded_of_its_two_choices():
    ready = [SimpleNamespace(outstanding=n) for n in (5, 0, 9)]
    assert LeastRequest().pick(ready, (0, 2)) == 0
    assert LeastRequest().pick(ready, (2, 1)) == 1


def test_unknown_router_lists_the_known_ones():
    import pytest

    with pytest.raises(ValueError, match="least-request, least-outstanding, round-robin"):
        make_router("random")


def test_placement_prefers_the_highest_weight_pool():
    assert place([ON_DEMAND, SPOT], {}, 1) is SPOT


def test_placement_falls_back_when_the_gpu_limit_is_reached():
    assert place([ON_DEMAND, SPOT], {"gpu-spot": 2}, 1) is ON_DEMAND


def test_placement_fails_when_every_pool_is_full():
    assert place([ON_DEMAND, SPOT], {"gpu-spot": 2, "gpu-on-demand": 1}, 1) is None


def test_startup_is_the_sum_of_its_phases_within_their_ranges():
    startup = Startup((60, 120), (60, 180), 20.0, (20, 60))
    draws = [startup.sample(np.random.default_rng(s)) for s in range(50)]
    assert min(draws) >= 160 and max(draws) <= 380
    assert startup.mean_s == 90 + 120 + 20 + 40


def test_the_pools_hold_as_many_replicas_as_the_simulator_places():
    # 2 GPUs per replica, two pools of 3 GPUs: one replica per pool, not 6 // 2 = 3.
    pools = (Pool("a", "spot", 100, 3, 1.0), Pool("b", "on-demand", 10, 3, 2.0))
    used: dict[str, int] = {}
    placed = 0
    while (pool := place(pools, used, 2)) is not None:
        used[pool.name] = used.get(pool.name, 0) + 2
        placed += 1
    assert replica_capacity(pools, 2) == placed == 2
