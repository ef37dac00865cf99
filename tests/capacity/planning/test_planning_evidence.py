"""Evidence comments: the block directly above a key, first line `Evidence`, applies to every
value under that key; a lookup finds the nearest enclosing block."""

from pathlib import Path

import pytest

from capacity.planning.evidence import evidence, for_key

STACK = """\
config:
  aws:region: us-west-2
  inference-platform:models:
    - name: big
      # Evidence: engine flags planned 2026-12-02 on engine profile a10g-qwen2.5-7b-awq.
      #   python -m capacity plan --stack prod --model big --trace ../shared/traces/t.csv --rate-scale 0.25
      engine:
        maxNumSeqs: 40
  inference-platform:autoscaling:
    default:
      # Why the SLO is what it is (not evidence).
      slo: {ttftP95Seconds: 2.5}
      # Evidence: planned 2026-12-01
      #   python -m capacity plan --stack prod --trace "../shared/traces/with space.csv"

      minReplicas: 2
    big:
      # The planner's winner, kept for a year.
      # Evidence: planned 2026-12-01 on engine profile a10g-r1-14b-awq
      #   python -m capacity plan --stack prod --model big --trace=../shared/traces/t.csv --trials 300 --seed 0
      #   validation (last 30% of the trace): attainment 99.4%, 5.21 GPU-h, 1.21x oracle, $2.10
      triggers:
        queueDepth: {targetPerReplica: 3}
      notes: |
        # Evidence: inside a block scalar, text
      maxReplicas: 12
"""


def blocks(tmp_path: Path) -> dict:
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(STACK)
    return evidence(path)


def test_a_block_is_keyed_by_the_config_path_of_the_key_below_it(tmp_path):
    assert set(blocks(tmp_path)) == {"models[0].engine", "autoscaling.big.triggers"}


def test_the_block_reads_its_command_date_and_profile(tmp_path):
    found = blocks(tmp_path)["autoscaling.big.triggers"]
    assert (
        found.command
        == "python -m capacity plan --stack prod --model big --trace=../shared/traces/t.csv --trials 300 --seed 0"
    )
    assert (found.date, found.profile) == ("2026-12-01", "a10g-r1-14b-awq")
    assert (
        found.text.splitlines()[-1]
        == "  validation (last 30% of the trace): attainment 99.4%, 5.21 GPU-h, 1.21x oracle, $2.10"
    )


def test_a_profile_name_with_dots_ends_before_the_sentence_does(tmp_path):
    assert blocks(tmp_path)["models[0].engine"].profile == "a10g-qwen2.5-7b-awq"


def test_comment_lines_above_the_evidence_line_are_not_part_of_it(tmp_path):
    assert blocks(tmp_path)["autoscaling.big.triggers"].text.startswith("Evidence: planned 2026-12-01")


def test_an_option_of_the_command_reads_both_spellings(tmp_path):
    found = blocks(tmp_path)
    assert found["autoscaling.big.triggers"].option("--trace") == "../shared/traces/t.csv"
    assert found["models[0].engine"].option("--rate-scale") == "0.25"
    assert found["models[0].engine"].option("--seed") is None


def test_the_nearest_enclosing_block_applies_to_a_nested_value(tmp_path):
    found = blocks(tmp_path)
    assert for_key(found, "autoscaling.big.triggers.queueDepth.targetPerReplica") is found["autoscaling.big.triggers"]
    assert for_key(found, "models[0].engine.maxNumSeqs") is found["models[0].engine"]


def test_a_value_outside_every_block_has_no_evidence(tmp_path):
    assert for_key(blocks(tmp_path), "models[0].name") is None


def test_a_comment_that_does_not_start_with_evidence_is_no_block(tmp_path):
    assert for_key(blocks(tmp_path), "autoscaling.default.slo.ttftP95Seconds") is None


def test_a_blank_line_ends_a_block(tmp_path):
    assert for_key(blocks(tmp_path), "autoscaling.default.minReplicas") is None


def test_evidence_text_inside_a_block_scalar_is_not_a_comment(tmp_path):
    assert for_key(blocks(tmp_path), "autoscaling.big.maxReplicas") is None


def test_a_block_above_a_list_item_applies_to_the_item(tmp_path):
    path = tmp_path / "Pulumi.item.yaml"
    path.write_text(
        "config:\n  inference-platform:models:\n    # Evidence: 2026-12-03\n    - name: a\n      sizeGiB: 1\n"
    )
    assert for_key(evidence(path), "models[0].sizeGiB").date == "2026-12-03"


def test_the_block_reads_its_held_out_attainment_and_gpu_hours(tmp_path):
    recorded = blocks(tmp_path)["autoscaling.big.triggers"].held_out()
    assert recorded.attainment == pytest.approx(0.994)
    assert (recorded.gpu_hours, recorded.digits) == (5.21, 2)


def test_held_out_numbers_wrapped_over_two_lines_are_read(tmp_path):
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(
        STACK.replace(
            "attainment 99.4%, 5.21 GPU-h",
            "attainment 99.4%,\n      #   5.21 GPU-h",
        )
    )
    assert evidence(path)["autoscaling.big.triggers"].held_out().gpu_hours == 5.21


def test_a_block_without_held_out_numbers_records_none(tmp_path):
    assert blocks(tmp_path)["models[0].engine"].held_out() is None


WRAPPED = """\
config:
  inference-platform:autoscaling:
    # Evidence: planned 2026-12-06 on engine profile a10g-r1-14b-awq
    #   python -m capacity plan --stack prod --model big --trace days.csv --validate-trace hour.csv
    #   validation (days day 5 of 5, hour, never searched): attainment 99.06%, 558.61 GPU-h, $304.11; per
    #   day: azure2024-conv-5days-rates day 5 of 5 99.06% $160.29; conv-day-4-10x last 30% 99.25% $24.50; conv-
    #   day-5-10x 99.33% $100.88; worst day azure2024-conv-5days-rates day 5 of 5 99.06% $160.29
    big:
      minReplicas: 3
"""


def test_each_held_out_parts_cost_is_read_across_wrapped_lines(tmp_path):
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(WRAPPED)
    assert for_key(evidence(path), "autoscaling.big").held_out_days() == {
        "azure2024-conv-5days-rates day 5 of 5": 160.29,
        "conv-day-4-10x last 30%": 24.5,
        "conv-day-5-10x": 100.88,
    }
