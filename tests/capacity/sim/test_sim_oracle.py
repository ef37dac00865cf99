"""The oracle lower bound and its replica search (short traces)."""

import pytest

from capacity.engine import get_profile
from capacity.sim.oracle import fewest_replicas, oracle
from capacity.workload.traces import load

PROFILE = "8gb-qwen2.5-1.5b"
SHORT = "synthetic:step:base=2,peak=30,at=120,length=300,duration=600,prompt=512,output=128"


def test_oracle_needs_more_replicas_for_more_load():
    trace = load(SHORT)
    result = oracle(trace, get_profile(PROFILE), 1.0, 20.0, interval_s=120)
    assert result.replicas[0] < result.peak_replicas
    assert result.gpu_hours == pytest.approx(sum(result.replicas * 120) / 3600, rel=0.01)


def test_fewest_replicas_searches_down_from_a_passing_guess():
    assert fewest_replicas(lambda n: n >= 3, start=7) == (3, True)


def test_fewest_replicas_searches_up_from_a_failing_guess():
    assert fewest_replicas(lambda n: n >= 11, start=2) == (11, True)


def test_fewest_replicas_reports_an_unreachable_slo_at_the_cap():
    assert fewest_replicas(lambda n: False, start=2, cap=16) == (16, False)
