"""The oracle lower bound and its replica search (short traces)."""

import numpy as np
import pytest

from capacity.engine import get_profile
from capacity.sim.cluster.startup import Pool
from capacity.sim.oracle import INSTANT, fewest_replicas, meets_slo, misses_allowed, oracle
from capacity.sim.simulator import SimConfig, simulate
from capacity.sim.slo import SloTargets, attainment, met
from capacity.workload.traces import Trace, load

PROFILE = "8gb-qwen2.5-1.5b"
SLO = SloTargets(ttft_s=1.0, tpot_s=0.1, objective=0.95)
SHORT = "synthetic:step:base=2,peak=30,at=120,length=300,duration=600,prompt=512,output=128"


def test_oracle_needs_more_replicas_for_more_load():
    trace = load(SHORT)
    result = oracle(trace, get_profile(PROFILE), SLO, interval_s=120)
    assert result.replicas[0] < result.peak_replicas
    assert result.gpu_hours == pytest.approx(sum(result.replicas * 120) / 3600, rel=0.01)


def test_requests_no_fleet_serves_in_time_are_counted_apart_not_sized_for():
    # One request a second; every tenth prompt is 14,000 tokens, whose prefill alone takes
    # longer than the 1 s TTFT target on an idle replica: no replica count helps them.
    n = 300
    prompts = np.where(np.arange(n) % 10 == 0, 14_000, 512)
    trace = Trace("mixed", np.arange(n, dtype=float), prompts, np.full(n, 128))
    result = oracle(trace, get_profile(PROFILE), SLO, interval_s=150)
    assert result.infeasible_requests == n // 10
    assert result.infeasible_intervals == 0
    assert result.peak_replicas <= 2


def test_fewest_replicas_searches_down_from_a_passing_guess():
    assert fewest_replicas(lambda n: n >= 3, start=7) == (3, True)


def test_fewest_replicas_searches_up_from_a_failing_guess():
    assert fewest_replicas(lambda n: n >= 11, start=2) == (11, True)


def test_fewest_replicas_reports_an_unreachable_slo_at_the_cap():
    assert fewest_replicas(lambda n: False, start=2, cap=16) == (16, False)


@pytest.mark.parametrize("n", [1, 7, 20, 100, 843, 10_000])
@pytest.mark.parametrize("objective", [0.5, 0.9, 0.95, 0.99, 0.999, 1.0])
def test_misses_allowed_is_the_most_misses_whose_attainment_still_reaches_the_objective(n, objective):
    m = misses_allowed(n, objective)
    assert (n - m) / n >= objective
    assert m == n or (n - m - 1) / n < objective


@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 6])
def test_a_replay_stopped_once_its_answer_is_settled_gives_the_whole_replays_answer(replicas):
    trace = load(SHORT).window(100.0, 400.0)  # the step up to 30 req/s: some counts pass, some fail
    profile = get_profile(PROFILE)
    whole = simulate(
        SimConfig(profile, (Pool("p", "on-demand", 1, 64, 0.0),), INSTANT, initial_replicas=replicas), trace, None
    )
    everyone = np.ones(len(trace), dtype=bool)
    expected = attainment(met(whole.outcome, whole.ttft, whole.tpot, SLO), everyone) >= SLO.objective
    assert meets_slo(trace, profile, replicas, SLO, seed=0) == expected
