"""`plan --write` and `plan --emit scaledobject`: the winner written into a copy of the stack file as
`pulumi config set --path` would write it (comments, order and the other evidence kept, its own
`# Evidence` block replaced), and the winner's ScaledObject for people without Pulumi."""

import contextlib
import io
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from capacity.__main__ import main
from capacity.cli.plan import PLATFORM_PROMETHEUS, deploy_refusal
from capacity.cli.stack_edit import edited_text
from capacity.planning.evidence import evidence
from capacity.planning.stack import load_stack_model
from components.observability.objects import prometheus_url
from contract.manifests.scaled_object import scaled_object
from contract.settings.config_path import ConfigRemove, edited_config
from contract.settings.stack_file import load_stack
from tests.k8s_schemas import validate

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.xdist_group("plan-write")  # its module fixtures are built once, by one worker
STEP = "synthetic:step:base=2,peak=12,at=300,length=300,duration=900,prompt=512,output=128"
FLOOD = "synthetic:step:base=200,peak=200,at=0,length=8,duration=8,prompt=512,output=256"  # no fleet serves it
BLOCK = "    qwen25-1p5b:\n      minReplicas: 1\n      maxReplicas: 3\n"
MODEL_BLOCK = "autoscaling.qwen25-1p5b"


def one_replica_copy(directory: Path) -> Path:
    """The committed Pulumi.dev.yaml, comments and all, with its model pinned at one replica: a
    policy that breaks the planner's ceiling rule, so another candidate wins and is written."""
    text = (ROOT / "Pulumi.dev.yaml").read_text()
    assert BLOCK in text
    path = directory / "Pulumi.dev.yaml"
    path.write_text(text.replace(BLOCK, BLOCK.replace("maxReplicas: 3", "maxReplicas: 1")))
    return path


def plan(stack: Path, *extra: str, trace: str = STEP) -> tuple[int, str]:
    """`plan` on the dev copy (L4 only, so the stack's GPU price stays the one it plans with)."""
    argv = ["plan", "--stack", str(stack), "--trace", trace, "--slo-attainment", "0.9", "--gpu", "l4"]
    argv += ["--trials", "4", "--workers", "2", "--png", str(stack.parent / "f.png"), *extra]
    out, cwd = io.StringIO(), os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            code = main(argv)
    finally:
        os.chdir(cwd)
    return code, out.getvalue()


def edits_of(lines: list[str]) -> list:
    """The printed `pulumi config set/rm --path` lines as edits, values as the shell passes them."""
    edits: list = []
    for line in lines:
        body = line.removesuffix(" -s dev")
        if body.startswith("pulumi config rm --path '"):
            edits.append(ConfigRemove(body.removeprefix("pulumi config rm --path '").rstrip("'")))
        else:
            path, value = body.removeprefix("pulumi config set --path '").split("' ")
            edits.append((path, value.strip("'")))
    return edits


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A plan written into a copy: (the copy's text before, its path, the plan's JSON)."""
    path = one_replica_copy(tmp_path_factory.mktemp("write"))
    before = path.read_text()
    code, out = plan(path, "--json", "--write", "--force")  # 4 trials replace the copy's 40-trial evidence
    assert code == 0
    return before, path, json.loads(out)


def test_the_written_file_holds_exactly_what_the_printed_lines_set(written):
    before, path, out = written
    assert out["written"] == str(path) and out["config_set"]
    expected = edited_config(yaml.safe_load(before)["config"], edits_of(out["config_set"]))
    assert yaml.safe_load(path.read_text())["config"] == expected
    load_stack(path)  # and the settings load it


def test_the_written_file_keeps_every_comment_but_the_replaced_evidence(written):
    before, path, _ = written
    old, new = evidence_of(before, path.parent / "before.yaml"), evidence(path)
    assert {k: v for k, v in old.items() if k != MODEL_BLOCK} == {k: v for k, v in new.items() if k != MODEL_BLOCK}
    replaced = {line.strip() for line in old[MODEL_BLOCK].text.splitlines()}
    kept = [line.strip() for line in before.splitlines() if line.strip().startswith("#")]
    after = {line.strip() for line in path.read_text().splitlines()}
    assert [line for line in kept if line.lstrip("# ").strip() not in replaced and line not in after] == []


def evidence_of(text: str, path: Path):
    path.write_text(text)
    return evidence(path)


def test_the_written_evidence_names_the_date_profile_command_and_validation(written):
    _, path, out = written
    block = evidence(path)[MODEL_BLOCK]
    today = datetime.now(UTC).date().isoformat()
    assert block.text.startswith(f"Evidence: planned {today} on engine profile l4-qwen2.5-1.5b")
    assert block.command.startswith(f"python -m capacity plan --stack {path} --trace {STEP}")
    assert "--write" not in block.command and "--json" not in block.command and "--png" not in block.command
    assert f"attainment {out['validation']['slo_attainment']:.2%}" in " ".join(block.text.split())


def test_the_written_file_re_plans_to_the_same_values(written):
    _, path, out = written
    code, again = plan(path, "--json")
    replanned = json.loads(again)
    assert code == 0 and replanned["config_set"] == []
    assert replanned["committed"]["search"] == out["search"] and replanned["validation"] == out["validation"]


def test_nothing_is_written_when_no_candidate_meets_the_target(tmp_path):
    path = one_replica_copy(tmp_path)
    before = path.read_text()
    code, _ = plan(path, "--write", "--force", trace=FLOOD)
    assert code == 1 and path.read_text() == before


def test_a_new_key_goes_into_its_block_before_the_next_blocks_evidence(tmp_path):
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text((ROOT / "Pulumi.prod.yaml").read_text())
    edits = [("autoscaling.qwen25-14b-awq.cooldownPeriodSeconds", 600)]
    (tmp_path / "out.yaml").write_text(edited_text(path, edits, "autoscaling.qwen25-14b-awq", ["Evidence: x"]))
    after = evidence(tmp_path / "out.yaml")
    assert after["autoscaling.qwen25-7b-awq"] == evidence(path)["autoscaling.qwen25-7b-awq"]
    assert load_stack(tmp_path / "out.yaml").autoscaling_for("qwen25-14b-awq").cooldown_period_seconds == 600


def test_emit_scaledobject_prints_the_winners_keda_object_as_the_platform_renders_it(written):
    _, path, _ = written  # written: the winner is now the stack's policy, and wins again
    code, text = plan(path, "--emit", "scaledobject")
    emitted = yaml.safe_load(text)
    sm = load_stack_model(str(path), root=ROOT)
    assert code == 0 and emitted == scaled_object(sm.monitored, PLATFORM_PROMETHEUS.format(namespace="monitoring"))
    assert emitted["spec"]["maxReplicaCount"] == 3 and validate(emitted) == []


@pytest.mark.parametrize(
    "binding_limit, validation, reason",
    [
        ("the pools' GPU limit", None, "no candidate meets the target"),
        (None, 0.97, "the winner attains 97.00% on the held-out traffic, below the target 99.00%"),
        (None, 0.995, None),
    ],
)
def test_a_winner_is_written_or_emitted_only_when_it_meets_the_target_searched_and_held_out(
    binding_limit, validation, reason
):
    payload = {
        "binding_limit": binding_limit,
        "search": None if binding_limit else {"slo_attainment": 0.995},
        "validation": None if validation is None else {"slo_attainment": validation},
        "validation_meets_target": None if validation is None else validation >= 0.99,
        "target": 0.99,
    }
    assert deploy_refusal(payload) == reason


def test_the_emitted_objects_prometheus_is_the_one_the_platform_deploys():
    assert PLATFORM_PROMETHEUS.format(namespace="monitoring") == prometheus_url("monitoring")


def test_a_plan_of_fewer_trials_than_the_evidence_it_replaces_is_refused_before_it_runs(tmp_path, capsys):
    """Issue 37: an 8-trial `plan --write` silently replaced a 300-trial, rate-scale-0.5 evidence block."""
    path = one_replica_copy(tmp_path)
    before = path.read_text()
    code, out = plan(path, "--write")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and path.read_text() == before and out == ""
    assert err[-1].endswith(
        f"--write: this plan runs 4 trials, the evidence it would replace ran 40 ({MODEL_BLOCK} in {path}); "
        "pass --force to replace it"
    )


def test_each_difference_from_the_replaced_evidence_is_one_warning_line():
    from capacity.cli.stack_edit import evidence_check
    from capacity.planning.evidence import Evidence

    recorded = Evidence(
        "", "python -m capacity plan --stack dev --trace a.csv --rate-scale 0.5 --trials 300", None, None
    )
    new = {"--trace": ["b.csv"], "--validate-trace": [], "--rate-scale": ["1"], "--trials": ["8"]}
    lines, weaker = evidence_check(recorded, new, {"--rate-scale": "1", "--trials": "300"})
    assert lines == [
        "--trace differs from the evidence it replaces: a.csv there, b.csv here",
        "--rate-scale differs from the evidence it replaces: 0.5 there, 1 here",
        "--trials differs from the evidence it replaces: 300 there, 8 here",
    ]
    assert weaker == "this plan runs 8 trials, the evidence it would replace ran 300"


def test_the_same_traffic_and_more_trials_replace_the_evidence_without_a_word():
    from capacity.cli.stack_edit import evidence_check
    from capacity.planning.evidence import Evidence

    recorded = Evidence("", "python -m capacity plan --stack dev --trace a.csv --rate-scale=0.50", None, None)
    new = {"--trace": ["a.csv"], "--validate-trace": [], "--rate-scale": ["0.5"], "--trials": ["300"]}
    assert evidence_check(recorded, new, {"--rate-scale": "1", "--trials": "300"}) == ([], None)
