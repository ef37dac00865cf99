"""Knee, planning capacity and threshold commands from an envelope."""

import copy

import pytest

from capacity.measure.envelope import COLUMNS, EnvelopeRow, find_knee, read_envelope, write_envelope
from capacity.measure.recommend import _guardrail, commands, current_values, recommend
from contract.settings.stack_file import load_stack
from tests.capacity.conftest import CALIBRATION_CSV, REPO
from tests.capacity.conftest import CONFIG_SET_LINE as LINE


def _rows(*points):  # (concurrency, rps, p99, waiting, kv)
    return [EnvelopeRow(c, rps, rps * 1000, p99 * 0.9, p99, w, w, None, kv) for c, rps, p99, w, kv in points]


def test_calibration_reading_is_about_1_5_rps_per_replica_saturating_at_20():
    rec = recommend(read_envelope(CALIBRATION_CSV), slo_p99=30)
    assert rec.knee.concurrency == 20 and rec.knee.saturated
    assert rec.planning.concurrency == 20
    assert rec.planning_rps == pytest.approx(1.5, abs=0.1)


def test_every_command_uses_the_exact_config_key_paths():
    rec = recommend(read_envelope(CALIBRATION_CSV), slo_p99=30, slo_ttft_p95=2, peak_rps=6)
    lines = commands(rec, "dev", None)
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    paths = {m["path"]: m["value"] for m in parsed}
    assert {m["key"] for m in parsed} == {"default"} and {m["stack"] for m in parsed} == {"dev"}
    assert set(paths) == {
        "triggers.queueDepth.targetPerReplica",
        "slo.e2eP99Seconds",
        "triggers.e2eLatency.thresholdSeconds",
        "slo.ttftP95Seconds",
        "triggers.ttft.enabled",
        "triggers.ttft.thresholdSeconds",
        "maxReplicas",
    }
    assert paths["maxReplicas"] == "4"  # ceil(6 / 1.54)
    assert paths["triggers.ttft.enabled"] == "true"


def test_model_name_selects_the_per_model_block():
    rec = recommend(read_envelope(CALIBRATION_CSV), slo_p99=30)
    assert all("'autoscaling.qwen25-7b-awq." in line for line in commands(rec, "prod", "qwen25-7b-awq"))


def test_a_model_name_with_dots_is_quoted_in_the_path():
    rec = recommend(read_envelope(CALIBRATION_CSV), slo_p99=30)
    assert all(
        '\'autoscaling["qwen2.5-7b"].triggers.' in line or '\'autoscaling["qwen2.5-7b"].slo.' in line
        for line in commands(rec, "prod", "qwen2.5-7b")
    )


@pytest.mark.parametrize("slo", [0.3, 1.0, 2.5, 30.0, 120.0])
def test_a_guardrail_is_always_strictly_above_its_slo(slo):
    assert slo < _guardrail(slo, None) <= slo * 1.5
    assert slo < _guardrail(slo, slo * 1.01) <= slo * 1.5  # an overload barely past the SLO


def test_latency_guardrail_sits_above_the_slo_and_below_the_overloaded_p99():
    rec = recommend(read_envelope(CALIBRATION_CSV), slo_p99=30)
    threshold = next(s.value for s in rec.settings if s.path == "triggers.e2eLatency.thresholdSeconds")
    assert 30 < threshold < 35.5


def test_queue_and_kv_targets_fall_between_the_planning_point_and_the_overloaded_point():
    rows = _rows((1, 0.3, 3, 0.0, 0.02), (10, 1.3, 8, 0.5, 0.2), (20, 1.5, 15, 1.0, 0.4), (40, 1.55, 35, 3.0, 0.8))
    rec = recommend(rows, slo_p99=30)
    values = {s.path: s.value for s in rec.settings}
    assert rec.planning.concurrency == 20
    assert 1.0 < values["triggers.queueDepth.targetPerReplica"] < 3.0
    assert 0.4 < values["triggers.kvCache.targetPerReplica"] < 0.8


def test_slo_tighter_than_the_knee_picks_the_best_point_that_meets_it():
    rec = recommend(read_envelope(CALIBRATION_CSV), slo_p99=9)
    assert rec.planning.concurrency == 10 and rec.planning_rps == pytest.approx(1.32)


def test_no_point_within_the_slo_is_an_error_saying_so():
    with pytest.raises(ValueError, match="cannot serve this request shape within the SLO"):
        recommend(read_envelope(CALIBRATION_CSV), slo_p99=1)


def test_an_envelope_still_growing_is_not_called_saturated():
    rows = _rows((1, 0.3, 3, 0, 0), (2, 0.6, 3.1, 0, 0), (4, 1.2, 3.3, 0, 0))
    knee = find_knee(rows)
    assert not knee.saturated and knee.concurrency == 4


def test_a_level_that_dips_does_not_make_the_last_one_look_like_growth():
    """A lab sweep on a busy machine (issue 37's walk): 1.44 req/s at 20, 1.33 at 40, 1.61 at 80 is
    a plateau (5.7% per doubling over the best level before it), not growth from the dip."""
    rows = _rows((10, 1.28, 10.2, 0, 0), (20, 1.44, 21.8, 0, 0), (40, 1.33, 35.2, 0, 0), (80, 1.61, 68.7, 0, 0))
    assert find_knee(rows).saturated


def test_no_thresholds_are_recommended_from_an_envelope_without_a_plateau():
    rows = _rows((1, 0.3, 3, 0, 0), (2, 0.6, 3.1, 0, 0), (4, 1.2, 3.3, 0, 0))
    with pytest.raises(ValueError, match="extend the sweep to find the knee; no thresholds recommended"):
        recommend(rows, slo_p99=30)


def test_envelope_csv_round_trips_with_calibration_columns_first(tmp_path):
    rows = read_envelope(CALIBRATION_CSV)
    write_envelope(tmp_path / "e.csv", rows)
    header = (tmp_path / "e.csv").read_text().splitlines()[0].split(",")
    assert header == list(COLUMNS)
    assert header[:7] == CALIBRATION_CSV.read_text().splitlines()[0].split(",")
    assert [r.successful_rps for r in read_envelope(tmp_path / "e.csv")] == [r.successful_rps for r in rows]


def test_envelope_missing_a_column_names_it(tmp_path):
    (tmp_path / "e.csv").write_text("concurrency,successful_rps\n1,0.3\n2,0.5\n")
    with pytest.raises(ValueError, match="p99_latency_s"):
        read_envelope(tmp_path / "e.csv")


def test_recommended_values_pass_the_stacks_own_validation():
    settings = load_stack("dev", REPO)
    rec = recommend(read_envelope(CALIBRATION_CSV), slo_p99=30, slo_ttft_p95=2, peak_rps=3)
    model = settings.models[0].name
    section = copy.deepcopy(dict(settings.autoscaling))
    block = section.setdefault(model, {})  # the model's own block, over the default's
    for s in rec.settings:
        node = block
        *parents, leaf = s.path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = s.value
    applied = settings.with_autoscaling(section).autoscaling_for(model)
    assert applied.triggers.queue_depth.target_per_replica == 1.7  # waiting per replica, to a tenth


def test_current_values_are_optional_and_never_fail(tmp_path):
    current, why = current_values("no-such-stack", "default", tmp_path)
    assert current is None and "Pulumi.no-such-stack.yaml" in why


def test_a_default_command_names_the_models_whose_own_block_sets_that_key():
    rec = recommend(read_envelope(CALIBRATION_CSV), slo_p99=30)
    queue = next(line for line in commands(rec, "prod", None) if ".triggers.queueDepth.targetPerReplica'" in line)
    assert (
        "autoscaling.{qwen25-14b-awq,qwen25-7b-awq} set it themselves: pass --model" in queue
    )  # both planned blocks do


def test_a_guardrail_kept_above_a_barely_overloaded_reading_does_not_claim_to_be_below_it():
    """Issue 37: it printed 'ttft.thresholdSeconds 2.6 ... below the 2.53s TTFT p95'."""
    from capacity.measure.recommend import _guardrail_reason

    assert _guardrail(2.5, 2.53) == 2.6  # 5% over the SLO, above the overload
    said = _guardrail_reason("TTFT SLO", "TTFT p95", 2.5, 2.6, 2.53, "concurrency 40")
    assert (
        said
        == "guardrail above the 2.5s TTFT SLO, at or above the 2.53s TTFT p95 of the overloaded concurrency 40 (kept 5% over the SLO)"
    )
    below = _guardrail_reason("TTFT SLO", "TTFT p95", 2.5, 3.0, 4.0, "concurrency 40")
    assert below.endswith(", below the 4s TTFT p95 of the overloaded concurrency 40")


def test_a_value_the_stack_does_not_set_shows_as_not_set_never_none():
    """Issue 37: `(plan: None)`. Dev sets no end-to-end SLO."""
    dev = load_stack("dev", REPO)
    model = dev.models[0].name
    rec = recommend(read_envelope(CALIBRATION_CSV), slo_p99=30)
    lines = commands(rec, "dev", model, dev.autoscaling_for(model))
    assert not [line for line in lines if "None)" in line]
    assert any(".slo.e2eP99Seconds' 30 -s dev" in line and line.endswith("(current: not set)") for line in lines)


def test_without_an_slo_in_reach_the_planning_line_has_no_empty_parentheses():
    from capacity.measure.recommend import report_lines

    rec = recommend(read_envelope(CALIBRATION_CSV), slo_p99=None, slo_ttft_p95=1.0)
    assert not any(line.endswith("()") for line in report_lines(rec, None, None))
