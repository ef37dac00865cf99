"""Every profile says how far to trust it: measured, validated or extrapolated, with its error per regime."""

import dataclasses

import pytest

from capacity.engine import PROFILES, get_profile
from capacity.engine.trust import LEVELS, VALIDATED_BOUND, accuracy, trust_of

# A hand-made accuracy file (the shape benchmarks/engine_accuracy.py --write produces).
DATA = {
    "loso": {"median": 0.07, "light_median": 0.05, "saturated_median": 0.09, "worst": 0.30},
    "loso_a10g_sweep": {"median": 0.04, "saturated_median": 0.06, "worst": 0.12},
    "loso_per_gpu": {
        "a10g": {
            "points": 13,
            "sources": ["a10g-sweep", "llmcompressor"],
            "median": 0.05,
            "light_median": 0.04,
            "saturated_median": 0.08,
            "worst": 0.12,
        },
        "h100": {
            "points": 7,
            "sources": ["lambda", "yobitel"],
            "median": 0.10,
            "light_median": 0.03,
            "saturated_median": None,
            "worst": 0.2,
        },
        "a100-80gb": {
            "points": 4,
            "sources": ["lambda"],
            "median": 0.25,
            "light_median": None,
            "saturated_median": 0.25,
            "worst": 0.4,
        },
    },
}


def test_the_swept_replica_and_its_twins_are_measured():
    assert trust_of(get_profile("a10g-r1-14b-awq"), DATA).level == "measured"
    # the prod 14B on an A10G with the calibration's flags: same architecture, weights, GPU, flags
    assert trust_of(get_profile("a10g-qwen2.5-14b-awq"), DATA).level == "measured"


def test_a_measured_profile_with_other_flags_is_only_validated():
    other = dataclasses.replace(get_profile("a10g-qwen2.5-14b-awq"), max_num_seqs=64)
    assert trust_of(other, DATA).level == "validated"


def test_a_gpu_covered_within_the_bound_is_validated_with_its_own_errors():
    t = trust_of(get_profile("h100-qwen2.5-7b-awq"), DATA)
    assert t.level == "validated"
    assert t.error("light") == 0.03
    assert t.error("saturated") == 0.09  # no saturated point on the H100: the all-GPU held-out median


def test_a_gpu_the_model_misses_on_is_extrapolated():
    t = trust_of(get_profile("a100-80gb-qwen2.5-7b-awq"), DATA)
    assert DATA["loso_per_gpu"]["a100-80gb"]["median"] > VALIDATED_BOUND
    assert t.level == "extrapolated" and "exceeds" in t.basis


def test_a_gpu_nobody_measured_is_extrapolated_with_the_worst_held_out_error():
    t = trust_of(get_profile("l40s-qwen2.5-7b-awq"), DATA)
    assert t.level == "extrapolated"
    assert t.error("saturated") == 0.30 and t.pessimistic_factor("saturated") == pytest.approx(1.30)


def test_regime_names_are_checked():
    with pytest.raises(ValueError, match="regime"):
        trust_of(get_profile("a10g-r1-14b-awq"), DATA).error("busy")


def test_the_committed_accuracy_file_gives_every_profile_a_level():
    data = accuracy()
    levels = {name: trust_of(p, data).level for name, p in PROFILES.items()}
    assert set(levels.values()) <= set(LEVELS)
    assert levels["a10g-r1-14b-awq"] == "measured"
    assert levels["l40s-qwen2.5-14b-awq"] == "extrapolated"  # no published L40S measurement in the fit set
    for name, p in PROFILES.items():
        t = trust_of(p, data)
        assert 0 <= t.error("light") < 1 and 0 <= t.error("saturated") < 1, name
