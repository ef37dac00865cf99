"""The endpoint picker's default scheduling profile (capacity/sim/cluster/endpoint_picker.py), as
kubernetes-sigs/gateway-api-inference-extension v1.0.2 scores and picks: queue-scorer,
kv-cache-utilization-scorer, prefix-cache-scorer (weight 1 each), max-score-picker."""

from types import SimpleNamespace

import pytest

from capacity.engine import Request
from capacity.engine.prefix_cache import unit_keys
from capacity.sim.cluster.endpoint_picker import EndpointPicker, PrefixIndex, prompt_blocks
from capacity.sim.cluster.router import make_router


def pod(pod_id, waiting=0, kv_usage=0.0):
    return SimpleNamespace(id=pod_id, waiting=waiting, kv_usage=kv_usage)


def request(rid, ids=(), prompt=2048):
    return Request(rid, 0.0, prompt, 8, unit_keys(ids))


def pick(picker, ready, req):
    return picker.pick(ready, picker.candidates(len(ready)), req)


def test_the_prefix_scorer_sends_a_repeated_conversation_to_the_replica_that_holds_it():
    picker = EndpointPicker(seed=0)
    ready = [pod(0), pod(1), pod(2)]
    first = pick(picker, ready, request(0, ids=[7, 8, 9, 10]))
    # the next turn repeats the conversation and adds to it: every later turn lands where it is held
    turns = [pick(picker, ready, request(n, ids=[7, 8, 9, 10, 10 + n], prompt=2048 + 512 * n)) for n in range(1, 6)]
    assert turns == [first] * 5


def test_the_prefix_score_is_the_share_of_the_request_s_blocks_a_pod_is_indexed_for():
    index = PrefixIndex()
    held = prompt_blocks(request(0, ids=[1, 2]))
    index.add(held[:40], pod=3)
    assert index.longest_prefix(prompt_blocks(request(1, ids=[1, 2]))) == {3: 40}


def test_a_prompt_is_hashed_in_64_byte_blocks_of_at_most_256():
    assert len(prompt_blocks(request(0, ids=range(20), prompt=10_000))) == 256
    assert len(prompt_blocks(request(0, ids=[1], prompt=100))) == 100 * 4 // 64


def test_without_a_shared_prefix_the_shorter_waiting_queue_wins():
    ready = [pod(0, waiting=4), pod(1, waiting=1), pod(2, waiting=3)]
    assert pick(EndpointPicker(), ready, request(0)) == 1


def test_with_equal_queues_the_emptier_kv_cache_wins():
    ready = [pod(0, kv_usage=0.7), pod(1, kv_usage=0.2), pod(2, kv_usage=0.5)]
    assert pick(EndpointPicker(), ready, request(0)) == 1


def test_the_three_scores_add_with_equal_weights():
    picker = EndpointPicker()
    picker.index.add(prompt_blocks(request(0, ids=[1, 2, 3, 4])), pod=0)
    again = request(1, ids=[1, 2, 3, 4])
    # pod 0: queue 0 + kv 1 + prefix 1 = 2 against pod 1's 1 + 0.9 + 0
    assert pick(picker, [pod(0, waiting=1), pod(1, kv_usage=0.1)], again) == 0
    # pod 0: 0 + 0.5 + 1 against pod 1's 1 + 0.9 + 0
    assert pick(picker, [pod(0, waiting=1, kv_usage=0.5), pod(1, kv_usage=0.1)], again) == 1


def test_ties_are_broken_at_random():
    picker = EndpointPicker(seed=1)
    ready = [pod(0), pod(1), pod(2)]
    assert {pick(picker, ready, request(n)) for n in range(60)} == {0, 1, 2}


def test_the_index_forgets_a_pod_s_oldest_blocks_past_its_capacity():
    index = PrefixIndex(capacity=4)
    index.add([1, 2, 3, 4], pod=0)
    index.add([5, 6], pod=0)
    assert index.longest_prefix([1, 2, 3]) == {}
    assert index.longest_prefix([3, 4, 5]) == {0: 3}


@pytest.mark.parametrize("name", ["endpoint-picker"])
def test_the_endpoint_picker_is_a_router_choice(name):
    assert isinstance(make_router(name), EndpointPicker)
