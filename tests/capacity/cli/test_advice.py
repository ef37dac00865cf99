"""What `lab`, `sweep` and `recommend` print after an envelope (capacity/cli/advice.py): the stack
model they retune, lines the stack accepts and the planner's rules keep, and where they part from
the committed plan or the pinned GPU."""

import dataclasses
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from capacity.cli.advice import advice, choose_target, model_served_with
from capacity.measure.envelope import read_envelope
from capacity.measure.recommend import recommend
from contract.settings.config_path import edited_config
from contract.settings.stack_file import load_stack, read_stack
from tests.capacity.conftest import CALIBRATION_CSV, CONFIG_SET_LINE, REPO
from tests.docs.pages import capacity_command

LAB_PAGE = "getting-started/lab.md"  # where the lab and its recommend step are documented
LAB_ENVELOPE = Path(__file__).parent / "data" / "lab-a10g-envelope.csv"  # `make lab`'s, A10G mock at 20x


def printed(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("pulumi config set")]


def apply_to_copy(lines: list[str], stack: str, tmp_path: Path) -> None:
    """Each printed line as `pulumi config set --path` would apply it, to a copy of the stack
    file, then the copy through the settings loader (raises what a deploy would refuse)."""
    source = read_stack(stack, REPO)
    edits = []
    for line in printed(lines):
        match = CONFIG_SET_LINE.match(line)
        assert match and match["stack"] == stack, line
        words = shlex.split(line.split("   # ")[0])
        assert words[:4] == ["pulumi", "config", "set", "--path"], line
        edits.append((words[4], words[5]))
    config = edited_config(source.config, edits)
    copy = tmp_path / source.path.name
    copy.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    load_stack(copy)


def advise(envelope: Path, stack: str, model: str | None, measured: str | None = None, **flags) -> list[str]:
    target = choose_target(REPO / f"Pulumi.{stack}.yaml", model, measured)
    slo = target.sm.policy.slo
    p99 = flags.pop("slo_p99", slo.e2e_p99_seconds)
    ttft = flags.pop("slo_ttft_p95", slo.ttft_p95_seconds)
    return advice(recommend(read_envelope(envelope), p99, ttft, **flags), target, measured, p99, ttft)


@pytest.mark.parametrize(
    "envelope, stack, model, peak",
    [
        (LAB_ENVELOPE, "prod", "qwen25-14b-awq", 12),
        (LAB_ENVELOPE, "prod", "qwen25-7b-awq", 3),
        (LAB_ENVELOPE, "dev", None, 2),
        (CALIBRATION_CSV, "prod", "qwen25-14b-awq", 45),
        (CALIBRATION_CSV, "dev", None, None),
    ],
)
def test_every_printed_line_applied_to_a_copy_of_the_stack_file_loads(envelope, stack, model, peak, tmp_path):
    lines = advise(envelope, stack, model, "a10g-r1-14b-awq", peak_rps=peak)
    assert printed(lines)
    apply_to_copy(lines, stack, tmp_path)


def test_a_guardrail_at_its_slo_is_not_printed_and_the_rule_is_named(tmp_path):
    target = choose_target(REPO / "Pulumi.prod.yaml", "qwen25-14b-awq")
    rec = recommend(read_envelope(LAB_ENVELOPE), None, 2.5)
    at_slo = [
        dataclasses.replace(s, value=2.5) if s.path == "triggers.ttft.thresholdSeconds" else s for s in rec.settings
    ]
    lines = advice(dataclasses.replace(rec, settings=at_slo), target, None, None, 2.5)
    assert not [line for line in printed(lines) if "ttft.thresholdSeconds" in line]
    assert any(
        line.startswith(
            "# not printed: autoscaling.qwen25-14b-awq.triggers.ttft.thresholdSeconds 2.5: would not deploy"
        )
        and "must be above slo.ttftP95Seconds (2.5)" in line
        for line in lines
    )
    apply_to_copy(lines, "prod", tmp_path)


def test_a_value_below_the_planners_kv_floor_is_withheld_naming_the_evidence_test():
    lines = advise(LAB_ENVELOPE, "prod", "qwen25-14b-awq")
    assert not [line for line in printed(lines) if "kvCache.targetPerReplica" in line]
    withheld = next(line for line in lines if "# not printed: autoscaling.qwen25-14b-awq.triggers.kvCache" in line)
    assert re.search(r"is below 0\.\d+, what a full replica holds", withheld)
    assert "tests/test_evidence.py would fail" in withheld


def planned(model: str):
    """The committed autoscaling policy of a prod model."""
    return load_stack("prod", REPO).autoscaling_for(model)


def test_a_max_replicas_the_pools_cannot_hold_says_what_they_serve():
    lines = advise(LAB_ENVELOPE, "prod", "qwen25-14b-awq", peak_rps=12)
    assert not [line for line in printed(lines) if ".maxReplicas'" in line]
    budget = planned("qwen25-14b-awq").max_replicas  # the planner sets it to the pools' budget
    assert f"#   the pools hold {budget} replicas of qwen25-14b-awq" in "\n".join(lines)
    assert f"at 0.32 req/s each they serve {budget * 0.3165:.1f} req/s" in "\n".join(lines)


def test_a_line_that_moves_a_planned_value_shows_the_plan_value():
    lines = advise(LAB_ENVELOPE, "prod", "qwen25-14b-awq")
    queue = next(line for line in printed(lines) if "queueDepth.targetPerReplica" in line)
    assert queue.endswith(f"(plan: {float(planned('qwen25-14b-awq').triggers.queue_depth.target_per_replica)})")
    assert any(line.startswith("# autoscaling.qwen25-14b-awq is planned (Evidence: planned") for line in lines)
    assert any("line(s) below move a planned value (triggers.queueDepth.targetPerReplica" in line for line in lines)


def test_an_envelope_of_another_gpu_than_the_pinned_one_says_so():
    lines = advise(LAB_ENVELOPE, "prod", "qwen25-14b-awq", "l4-qwen2.5-14b-awq")
    line = next(line for line in lines if line.startswith("# the envelope is of l4-qwen2.5-14b-awq"))
    assert "another GPU (l4 vs a10g)" in line and "prod pins qwen25-14b-awq to a10g-r1-14b-awq-measured" in line


def test_an_envelope_of_the_same_checkpoint_under_another_profile_names_no_other_checkpoint():
    # a10g-r1-14b-awq and the pinned a10g-r1-14b-awq-measured serve the same checkpoint under two names
    lines = advise(LAB_ENVELOPE, "prod", "qwen25-14b-awq", "a10g-r1-14b-awq")
    line = next(line for line in lines if line.startswith("# the envelope is of a10g-r1-14b-awq"))
    assert "another profile:" in line and "checkpoint" not in line


def test_an_envelope_swept_with_other_engine_flags_than_the_stacks_says_which():
    seven = load_stack("prod", REPO).model("qwen25-7b-awq").engine
    lines = advise(LAB_ENVELOPE, "prod", "qwen25-7b-awq", "a10g-r1-14b-awq")  # swept at maxNumSeqs 40
    assert seven.max_num_seqs != 40
    assert any(f"the stack sets maxNumSeqs {seven.max_num_seqs}" in line for line in lines)


def test_the_pinned_profile_raises_no_gpu_note():
    lines = advise(LAB_ENVELOPE, "prod", "qwen25-14b-awq", "a10g-r1-14b-awq-measured")
    assert not [line for line in lines if line.startswith("# the envelope is of")]


def test_the_target_is_the_model_served_with_the_swept_profile_else_the_stacks_first():
    models = load_stack("prod", REPO).models
    assert [model_served_with(REPO / "Pulumi.prod.yaml", m.capacity_profile) for m in models] == [
        m.name for m in models
    ]
    assert choose_target(REPO / "Pulumi.prod.yaml", None, "a10g-qwen2.5-7b-awq").sm.model.name == "qwen25-7b-awq"
    default = choose_target(REPO / "Pulumi.prod.yaml", None, "a10g-r1-14b-awq")
    assert default.sm.model.name == models[0].name and "first model" in default.chosen_by


def test_the_lab_pages_recommend_step_on_the_labs_envelope_prints_lines_that_deploy(tmp_path):
    """docs/getting-started/lab.md's `recommend` command, run as the page shows it."""
    argv = capacity_command(LAB_PAGE, "recommend")
    envelope = Path(argv[argv.index("--envelope") + 1])
    (tmp_path / envelope).parent.mkdir(parents=True)
    (tmp_path / envelope).write_bytes(LAB_ENVELOPE.read_bytes())
    run = subprocess.run(
        [sys.executable, *argv[1:]],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert printed(lines) and "Traceback" not in run.stderr
    apply_to_copy(lines, argv[argv.index("--stack") + 1], tmp_path)
    # what the page says of this run (its comments unfolded: the run folds them at 110 columns)
    unfolded = re.sub(r"\n#   +", " ", run.stdout)
    assert "at 0.32 req/s each they serve 10.8 req/s" in unfolded and "TTFT p95 0.632s <= SLO 2.5s" in unfolded
    assert "# not printed: autoscaling.qwen25-14b-awq.maxReplicas 38:" in run.stdout
    assert "# not printed: autoscaling.qwen25-14b-awq.triggers.kvCache.targetPerReplica 0.05:" in run.stdout
    assert [line.split("(plan: ")[-1] for line in printed(lines) if "queueDepth" in line or "ttft.enabled" in line] == [
        "5.0)",  # the committed 14B's queue target (Pulumi.prod.yaml, planned 2026-12-06)
        "true)",
    ]


def test_the_printed_comments_are_folded_to_a_review_width_and_the_commands_kept_whole():
    """Issue 37: seven comment lines of up to ~400 characters preceded the commands."""
    from capacity.cli.advice import COMMENT_WIDTH, folded

    lines = advise(LAB_ENVELOPE, "prod", "qwen25-14b-awq", "l4-qwen2.5-14b-awq", peak_rps=12)
    shown = folded(lines)
    assert all(len(line) <= COMMENT_WIDTH for line in shown if line.startswith("#"))
    assert printed(shown) == printed(lines)
    assert " ".join(" ".join(shown).split()).replace("#   ", "").count("another GPU (l4 vs a10g)") == 1
