"""The fleet's prefix caches in the simulator: per replica, lost with it, reported per replica."""

import dataclasses

import numpy as np

from capacity.workload.traces import Trace, load
from tests.capacity.sim.test_sim_simulator import POLICY, run

PROMPT = 2048


def shared_prefix_trace(rate: float, duration: float, conversations: int) -> Trace:
    """Requests every 1/rate s, each the next turn of one of a few conversations (4 shared blocks)."""
    n = int(rate * duration)
    arrivals = np.arange(n) / rate
    ids = tuple((c, c + 1000, c + 2000, c + 3000) for c in (np.arange(n) % conversations).tolist())
    return Trace("shared", arrivals, np.full(n, PROMPT), np.full(n, 64), None, ids)


def test_a_replica_started_by_scale_out_begins_with_an_empty_prefix_cache():
    result = run(shared_prefix_trace(rate=8, duration=200, conversations=2), router="endpoint-picker")
    assert len(result.prefix_cache) > 1  # it scaled out
    assert sum(c.hits for c in result.prefix_cache) > 0
    for replica in result.prefix_cache:
        # the first request each replica admits finds nothing cached there
        assert replica.hits <= replica.queries - PROMPT


def test_the_endpoint_picker_keeps_more_of_the_fleet_s_prefix_cache_than_least_request():
    trace = shared_prefix_trace(rate=8, duration=200, conversations=12)
    picker = run(trace, router="endpoint-picker").prefix_cache_hit_rate
    least = run(trace, router="least-request").prefix_cache_hit_rate
    assert picker is not None and least is not None
    assert picker > least


def test_a_trace_without_block_ids_reports_no_prefix_cache():
    result = run(dataclasses.replace(shared_prefix_trace(rate=1, duration=60, conversations=2), block_ids=None))
    assert (result.prefix_cache, result.prefix_cache_hit_rate) == ((), None)


def test_a_trace_without_block_ids_runs_as_before_prefix_caching_was_modelled():
    # Pinned from the simulator before issue 26 (commit 31c73d1), on the same saturated toy fleet
    # (preemptions, scale-out): a trace without block ids must not move.
    result = run(trace=load("../shared/traces/azure-llm-2023-conv.csv").window(0, 300), policy=POLICY)
    assert float(np.nansum(result.ttft)) == 263700.4410849989
    assert float(np.nansum(result.e2e)) == 284157.9517849989
    assert result.gpu_seconds == {"spot": 3150.0, "on-demand": 1400.0}
