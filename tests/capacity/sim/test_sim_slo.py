"""The service level as the simulator judges it: each request's TTFT and TPOT (vLLM's per-request
`mean_time_per_output_token`, `vllm/v1/metrics/stats.py` IterationStats.update_from_finished_request:
decode time / (generated tokens - 1)), attainment over the feasible requests, and which requests
no fleet can serve within the SLO. A toy profile keeps the arithmetic visible."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from capacity.planning.run import feasible_requests, summarize
from capacity.planning.stack import load_stack_model
from capacity.sim.cluster.startup import Pool, Startup
from capacity.sim.simulator import FAILED, OK, SimConfig, simulate
from capacity.sim.slo import SloTargets, attainment, feasible, idle_latencies, met
from capacity.workload.traces import Trace
from tests.capacity.sim.toy import TOY

ROOT = Path(__file__).resolve().parents[3]
# A decode step of one sequence: 0.02 + 0.002 + 1e-4 = 0.0221 s; prefill of p tokens in one chunk
# (<= 2048): 0.022 + p x 1e-4 s.
DECODE_STEP_S = 0.0221
SLO = SloTargets(ttft_s=0.3, tpot_s=0.03, objective=0.95)


def trace(*shapes: tuple[float, int, int]) -> Trace:
    """Requests as (arrival, prompt tokens, output tokens)."""
    arrivals, prompts, outputs = zip(*shapes)
    return Trace("t", np.array(arrivals, float), np.array(prompts), np.array(outputs))


def replay(t: Trace, replicas: int = 1):
    config = SimConfig(
        profile=TOY,
        pools=(Pool("p", "on-demand", 1, 8, 1.0),),
        startup=Startup((0, 0), (0, 0), 0.0, (0, 0)),
        initial_replicas=replicas,
    )
    return simulate(config, t, None)


def test_tpot_is_the_decode_time_over_the_tokens_after_the_first():
    result = replay(trace((0.0, 256, 11)))
    assert result.tpot[0] == pytest.approx((result.e2e[0] - result.ttft[0]) / 10)
    assert result.tpot[0] == pytest.approx(DECODE_STEP_S)


def test_a_single_token_output_has_no_tpot():
    assert np.isnan(replay(trace((0.0, 256, 1))).tpot[0])


def test_a_single_token_output_is_judged_on_its_ttft_alone():
    assert met(np.array([OK]), np.array([0.1]), np.array([np.nan]), SLO).tolist() == [True]


def test_a_request_meets_the_slo_only_when_both_ttft_and_tpot_do():
    outcome = np.array([OK, OK, OK])
    ttft, tpot = np.array([0.1, 0.5, 0.1]), np.array([0.02, 0.02, 0.05])
    assert met(outcome, ttft, tpot, SLO).tolist() == [True, False, False]


def test_a_failed_request_misses_the_slo():
    assert met(np.array([FAILED]), np.array([np.nan]), np.array([np.nan]), SLO).tolist() == [False]


def test_attainment_is_the_share_of_feasible_requests_that_meet_the_slo():
    meets = np.array([True, False, True, False])
    servable = np.array([True, True, True, False])
    assert attainment(meets, servable) == pytest.approx(2 / 3)


def test_idle_latencies_are_those_of_the_request_alone_on_a_replica():
    t = trace((0.0, 256, 11), (0.0, 3000, 5))
    ttft, tpot = idle_latencies(t, TOY)
    for i in range(len(t)):
        alone = replay(trace((0.0, int(t.prompt_tokens[i]), int(t.output_tokens[i]))))
        assert (ttft[i], tpot[i]) == pytest.approx((alone.ttft[0], alone.tpot[0]))


def test_a_prompt_no_idle_replica_prefills_within_the_ttft_target_is_infeasible():
    # 3,000 tokens: chunks of 2,048 and 952, 0.227 + 0.117 s = 0.34 s > 0.3 s on an idle replica.
    assert feasible(trace((0.0, 256, 11), (0.0, 3000, 11)), TOY, SLO).tolist() == [True, False]


def test_a_request_longer_than_the_context_is_infeasible():
    assert feasible(trace((0.0, 4000, 200)), TOY, SLO).tolist() == [False]


def test_when_an_idle_replica_decodes_slower_than_the_tpot_target_only_single_tokens_are_feasible():
    tight = replace(SLO, tpot_s=0.02)  # below the 0.0221 s decode step
    assert feasible(trace((0.0, 256, 11), (0.0, 256, 1)), TOY, tight).tolist() == [False, True]


def test_the_summary_leaves_infeasible_requests_out_of_attainment_and_counts_them():
    sm = replace(load_stack_model("dev", root=ROOT), profile=TOY)
    t = trace((0.0, 256, 11), (1.0, 256, 11), (2.0, 4000, 200))  # the last is longer than the context
    summary = summarize(replay(t), sm, feasible_requests(sm, t))
    assert summary.slo_attainment == 1.0
    assert summary.infeasible_requests == 1 and summary.rejected_requests == 1


def test_the_summary_states_the_slo_it_judged_against():
    sm = replace(load_stack_model("dev", root=ROOT), profile=TOY)
    t = trace((0.0, 256, 11))
    slo = summarize(replay(t), sm, feasible_requests(sm, t)).as_dict()["slo"]
    assert slo == {"ttft_p95_s": 1.0, "tpot_p95_s": 0.1, "e2e_p99_s": None, "objective": 0.95}
