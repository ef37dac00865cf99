"""`python -m capacity plan` end to end on short traces: the JSON output contract, a seed that
fixes the plan, commands the stack accepts, and the binding limit when nothing meets the target."""

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest

from capacity.__main__ import main
from capacity.cli.plan import (
    BAND_HEADERS,
    refused_candidates,
    refused_lines,
    shown_commands,
    withheld_warning,
)
from capacity.planning import journal
from capacity.planning.evaluator import Candidate, Evaluated
from capacity.planning.html_report import write_html
from capacity.planning.stack import apply_config_set, load_stack_model
from contract.settings.config_path import ConfigRemove
from tests.html_page import Report, embeds
from tests.stacks import edited
from tests.terminal import start_in_terminal

ROOT = Path(__file__).resolve().parents[3]
STEP = "synthetic:step:base=2,peak=12,at=300,length=300,duration=900,prompt=512,output=128"
FLOOD = "synthetic:step:base=200,peak=200,at=0,length=20,duration=20,prompt=512,output=256"  # no fleet serves it


def _typed(value: str):
    """A value as `pulumi config set --path` stores it: booleans and numbers typed, the rest strings."""
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def plan(capsys, tmp_path, *extra: str) -> dict:
    args = [
        "plan",
        "--stack",
        "dev",
        "--trials",
        "4",
        "--workers",
        "1",  # one worker: the search reproducible from its seed (several: the proposals' order is not)
        "--json",
        "--png",
        str(tmp_path / "f.png"),
        *extra,
    ]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_prints_the_output_contract_and_the_frontier_png(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", STEP)
    assert {"search", "validation", "frontier", "gpu_types", "config_set", "binding_limit"} <= set(out)
    assert set(out["validation"]) >= {"slo_attainment", "gpu_hours", "oracle_gpu_hours", "cost_usd", "scale_events"}
    assert [row["gpu"] for row in out["gpu_types"]] == ["a10g", "l4"]  # dev's pools allow g5 and g6
    # dev's 12Gi predictor fits a .xlarge's 14,162Mi with the GPU node's DaemonSets: priced as one.
    assert [row["instance_size"] for row in out["gpu_types"]] == ["g5.xlarge", "g6.xlarge"]
    assert (tmp_path / "f.png").stat().st_size > 10_000
    assert out["trials"] == 4
    fast, slow = out["band"]["edges"]  # the winner re-scored with its steps faster and slower by its error
    assert fast["step_time_scale"] == round(1 - out["band"]["error"], 4) < 1 < slow["step_time_scale"]
    assert fast["slo_attainment"] >= slow["slo_attainment"]


def test_plan_writes_one_html_report_with_the_frontier_table_and_png(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", STEP, "--html", str(tmp_path / "p.html"))
    report = Report(tmp_path / "p.html")
    assert out["html_report"] == str(tmp_path / "p.html")
    assert embeds(report, tmp_path / "f.png")
    assert [row["gpu"] for row in out["gpu_types"]] == [c for c in report.cells if c in ("a10g", "l4")][-2:]
    assert {"g5.xlarge", "g6.xlarge"} <= set(report.cells)  # the GPU table names the size each type is priced as
    # The winner within its profile's error band: one row per edge, at the JSON's step-time scales.
    assert set(BAND_HEADERS) <= set(report.headers) and {"fast", "slow"} <= set(report.cells)
    assert {f"{edge['step_time_scale']:g}" for edge in out["band"]["edges"]} <= set(report.cells)


def test_the_same_seed_gives_the_same_plan(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    first, second = (plan(capsys, tmp_path, "--trace", STEP, "--seed", "7") for _ in range(2))
    assert first["frontier"] == second["frontier"] and first["config_set"] == second["config_set"]


def at_one_replica(directory: Path) -> Path:
    """dev with its model's policy pinned at one replica: a committed policy below the pools'
    budget of 3, which breaks the planner's ceiling rule, so another candidate wins."""
    scope = "autoscaling.qwen25-1p5b"
    return edited(
        "dev", directory, [(f"{scope}.minReplicas", 1), (f"{scope}.maxReplicas", 1), (f"{scope}.fallbackReplicas", 1)]
    )


def test_every_printed_command_deploys_the_winner(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    stack = at_one_replica(tmp_path)
    out = plan(capsys, tmp_path, "--stack", str(stack), "--trace", STEP, "--slo-attainment", "0.9")
    assert out["config_set"] and out["binding_limit"] is None
    edits: list = []
    for line in out["config_set"]:
        assert line.endswith(" -s dev")
        if line.startswith("pulumi config rm --path '"):
            edits.append(ConfigRemove(line.removeprefix("pulumi config rm --path '").removesuffix("' -s dev")))
            continue
        assert line.startswith("pulumi config set --path '")
        path, value = line.removeprefix("pulumi config set --path '").removesuffix(" -s dev").split("' ")
        edits.append((path, _typed(value)))
    deployed = apply_config_set(load_stack_model(str(stack), root=ROOT), edits)
    assert deployed.policy.max_replicas == out["rules"]["max_replicas"] == 3  # the pools hold 3 GPUs


def test_the_committed_policy_is_reported_beside_the_winner_on_the_gpu_it_runs_on(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--stack", str(at_one_replica(tmp_path)), "--trace", STEP, "--slo-attainment", "0.9")
    committed = out["committed"]
    assert committed["gpu"] == "l4" and committed["refused"] is None  # dev pins g6 (L4)
    assert committed["search"] != out["search"] and committed["validation"]["oracle_gpu_hours"] is not None


def test_a_committed_policy_that_keeps_the_rules_and_wins_changes_nothing(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    scope = "autoscaling.qwen25-1p5b"  # one warm replica, the pools' budget of 3 above it: it serves STEP cheapest
    stack = edited(
        "dev", tmp_path, [(f"{scope}.minReplicas", 1), (f"{scope}.maxReplicas", 3), (f"{scope}.fallbackReplicas", 1)]
    )
    out = plan(capsys, tmp_path, "--stack", str(stack), "--trace", STEP, "--slo-attainment", "0.5")
    assert out["committed"]["rules_broken"] == []
    assert out["search"] == out["committed"]["search"] and out["config_set"] == []
    assert "the committed policy is the cheapest candidate meeting the target: nothing to change" in out["notes"]


def test_a_committed_policy_that_breaks_the_rules_cannot_win_and_says_which(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--stack", str(at_one_replica(tmp_path)), "--trace", STEP, "--slo-attainment", "0.5")
    assert out["committed"]["rules_broken"] == ["maxReplicas 1 is not the pools' replica budget for the model (3)"]
    assert out["committed"]["search"]["cost_usd"] < out["search"]["cost_usd"] and out["config_set"]


def test_the_plan_states_the_rules_its_winner_follows(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--stack", str(at_one_replica(tmp_path)), "--trace", STEP, "--slo-attainment", "0.9")
    assert out["rules"]["guardrails_kept"] and out["rules"]["max_replicas"] == 3
    rule = next(n for n in out["notes"] if n.startswith("maxReplicas 3: the pools' replica budget for the model"))
    assert "kvCache" in rule and "e2eLatency" in rule


def test_allow_dropping_guardrails_says_so(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(
        capsys,
        tmp_path,
        "--stack",
        str(at_one_replica(tmp_path)),
        "--trace",
        STEP,
        "--slo-attainment",
        "0.9",
        "--allow-dropping-guardrails",
    )
    assert out["rules"]["guardrails_kept"] is False
    assert any(n.endswith("guardrails may be off (--allow-dropping-guardrails)") for n in out["notes"])


def test_no_gpu_type_it_runs_on_searched_no_committed_policy(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert plan(capsys, tmp_path, "--trace", STEP, "--gpu", "a10g")["committed"] is None


def test_when_nothing_meets_the_target_the_binding_limit_is_named_with_numbers(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", FLOOD, "--slo-attainment", "0.99")
    assert out["config_set"] == []
    assert out["binding_limit"].startswith(("pool GPU limit", "SLO below the idle-replica latency"))
    assert "%" in out["binding_limit"]


def test_a_bad_price_flag_is_one_line(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--stack", "dev", "--trace", STEP, "--price", "g6=cheap"])
    assert "is not FAMILY=USD_PER_GPU_HOUR" in capsys.readouterr().err


def test_gpu_restricts_the_search_to_that_type(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", STEP, "--gpu", "l4")
    assert [row["gpu"] for row in out["gpu_types"]] == ["l4"]
    assert all(row["gpu"] == "l4" for row in out["frontier"])


def test_a_gpu_the_pools_do_not_allow_is_one_line(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["plan", "--stack", "dev", "--trace", STEP, "--gpu", "h100"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--gpu h100" in err and "a10g, l4" in err


def test_the_target_defaults_to_the_stacks_attainment_target(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", STEP)
    assert out["target"] == load_stack_model("dev", root=ROOT).attainment_target


# --- --journal: an interrupted plan resumes ---------------------------------------------------

SAME_PLAN = ("frontier", "gpu_types", "config_set", "search", "validation")


def test_a_journal_does_not_change_the_plan(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    without = plan(capsys, tmp_path, "--trace", STEP)
    kept = plan(capsys, tmp_path, "--trace", STEP, "--journal", str(tmp_path / "plan.journal"))
    assert {k: kept[k] for k in SAME_PLAN} == {k: without[k] for k in SAME_PLAN}


def test_a_rerun_with_its_journal_evaluates_nothing_again_and_gives_the_same_plan(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    first = plan(capsys, tmp_path, "--trace", STEP, "--journal", str(tmp_path / "plan.journal"))
    again = plan(capsys, tmp_path, "--trace", STEP, "--journal", str(tmp_path / "plan.journal"))
    assert (first["resumed_trials"], again["resumed_trials"]) == (0, 4)
    assert {k: again[k] for k in SAME_PLAN} == {k: first[k] for k in SAME_PLAN}
    assert any(note.startswith("resumed 4 of 4 candidates") for note in again["notes"])


def test_a_bigger_budget_keeps_the_evaluated_candidates_and_adds_the_rest(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    path = tmp_path / "plan.journal"
    plan(capsys, tmp_path, "--trace", STEP, "--journal", str(path))
    more = plan(capsys, tmp_path, "--trace", STEP, "--journal", str(path), "--trials", "6")
    assert (more["trials"], more["resumed_trials"]) == (6, 4)
    assert _journal_states(path).count(optuna.trial.TrialState.COMPLETE) == 6  # 4 kept + 2 new, none twice


def test_other_inputs_start_afresh_in_the_same_journal(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    plan(capsys, tmp_path, "--trace", STEP, "--journal", str(tmp_path / "plan.journal"))
    other_seed = plan(capsys, tmp_path, "--trace", STEP, "--journal", str(tmp_path / "plan.journal"), "--seed", "3")
    other_target = plan(
        capsys, tmp_path, "--trace", STEP, "--journal", str(tmp_path / "plan.journal"), "--slo-attainment", "0.5"
    )
    assert other_seed["resumed_trials"] == other_target["resumed_trials"] == 0


def _journal_states(path: Path) -> list:
    storage = journal.storage(path)
    return [
        t.state
        for s in optuna.get_all_study_summaries(storage)
        for t in optuna.load_study(study_name=s.study_name, storage=storage).trials
    ]


def test_a_candidate_cut_off_mid_evaluation_is_evaluated_again(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    path = tmp_path / "plan.journal"
    plan(capsys, tmp_path, "--trace", STEP, "--journal", str(path), "--trials", "2")
    storage = journal.storage(path)
    for summary in optuna.get_all_study_summaries(storage):  # a Ctrl-C between ask and tell
        optuna.load_study(study_name=summary.study_name, storage=storage).ask()
    resumed = plan(capsys, tmp_path, "--trace", STEP, "--journal", str(path))
    assert (resumed["trials"], resumed["resumed_trials"]) == (4, 2)
    states = _journal_states(path)
    assert states.count(optuna.trial.TrialState.FAIL) == 2 and states.count(optuna.trial.TrialState.COMPLETE) == 4


def test_a_journal_in_a_missing_folder_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert (
        main(["plan", "--stack", "dev", "--trace", STEP, "--journal", str(tmp_path / "nowhere" / "plan.journal")]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--journal" in err and "does not exist" in err


def test_a_file_that_is_not_a_journal_is_one_line_naming_the_line(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    path = tmp_path / "plan.journal"
    path.write_text('{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}\nnot json\n')
    assert main(["plan", "--stack", "dev", "--trace", STEP, "--journal", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"--journal {path}: line 2 is not an Optuna journal entry" in err


def test_ctrl_c_stops_the_plan_in_one_line_and_the_rerun_resumes_it(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    path = tmp_path / "plan.journal"
    command = [
        "plan",
        "--stack",
        "dev",
        "--trace",
        STEP,
        "--trials",
        "24",
        "--workers",
        "2",
        "--json",
        "--png",
        str(tmp_path / "f.png"),
        "--journal",
        str(path),
    ]
    first = start_in_terminal(
        [sys.executable, "-m", "capacity", *command],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60  # until one candidate is kept, then Ctrl-C as a terminal sends it
        while first.poll() is None and time.monotonic() < deadline and b'"candidate"' not in _bytes(path):
            time.sleep(0.05)
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGINT)
        _, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    assert (first.returncode, err.strip()) == (130, "python -m capacity plan: interrupted")
    assert main(command) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["trials"] == 24 and 1 <= resumed["resumed_trials"] < 24


def _bytes(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


# --- traffic no fleet serves within the SLO is said, not silently left out ---------------------

TOO_LONG = "synthetic:step:base=2,peak=2,at=0,length=60,duration=600,prompt=9000,output=64"  # dev: maxModelLen 8192


def test_traffic_beyond_the_context_length_is_a_warning_not_a_binding_limit(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", TOO_LONG)
    assert out["search"]["infeasible_share"] == out["search"]["rejected_share"] == 1.0
    assert any(
        note.startswith(
            "warning: 100.0% of the searched requests no GPU type searched serves within the SLO "
            "(longer than maxModelLen 8192"
        )
        for note in out["notes"]
    )


def test_a_servable_trace_has_no_such_note(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", STEP)
    assert out["search"]["infeasible_share"] == 0 and not any("no GPU type searched" in n for n in out["notes"])


def test_a_small_unservable_share_is_a_note_and_a_large_one_a_warning():
    from capacity.planning import plan as planner
    from capacity.planning.evaluator import Candidate
    from tests.summaries import searched

    dev = load_stack_model("dev", root=ROOT)
    trial = lambda share: planner.Trial(Candidate(()), searched(infeasible_share=share, rejected_share=0.0))  # noqa: E731
    assert planner.unservable_note(dev, trial(0.0), 0.95) is None
    assert planner.unservable_note(dev, trial(0.01), 0.95).startswith("1.0% of the searched requests")
    assert planner.unservable_note(dev, trial(0.08), 0.95).startswith("warning: 8.0% of the searched requests")
    assert planner.unservable_note(dev, trial(0.0001), 0.95).startswith("0.01% of the searched requests")


def test_the_json_and_the_html_record_the_command_traffic_seed_and_date(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    out = plan(capsys, tmp_path, "--trace", STEP, "--seed", "5", "--html", str(tmp_path / "p.html"))
    run = out["run"]
    assert run["command"].startswith("python -m capacity plan --stack dev --trials 4")
    assert f"--trace {STEP}" in run["command"] and run["traces"] == [STEP] and run["seed"] == 5
    assert datetime.fromisoformat(run["date"]).tzinfo is not None
    text = " ".join(Report(tmp_path / "p.html").text)
    assert f"made by: {run['command']} (seed 5, {run['date']})" in text


def _payload(validation: float, target: float = 0.99) -> dict:
    return {
        "config_set": ["pulumi config set --path 'autoscaling.m.minReplicas' 3 -s dev"],
        "validation": {"slo_attainment": validation},
        "validation_meets_target": validation >= target,
        "target": target,
    }


def test_commands_under_a_failed_validation_are_commented_out_under_a_red_warning(tmp_path):
    missed = _payload(0.97)
    warning = withheld_warning(missed)
    assert warning.startswith(
        "DO NOT APPLY: the winner attains 97.00% on the held-out traffic, below the target 99.00%"
    )
    assert shown_commands(missed) == ["# pulumi config set --path 'autoscaling.m.minReplicas' 3 -s dev"]
    page = write_html(tmp_path / "r.html", "plan", commands=shown_commands(missed), warning=warning).read_text()
    assert f'<p class="warning">{warning}</p>' in page and ".warning { color: #b00;" in page
    assert page.index('class="warning"') < page.index("<pre># pulumi config set")


def test_commands_under_a_validation_that_meets_the_target_are_ready_to_run():
    met = _payload(0.995)
    assert withheld_warning(met) is None and shown_commands(met) == met["config_set"]


def test_the_text_output_lists_refused_candidates_by_reason():
    trials = [
        Evaluated(Candidate(()), None, "maxReplicas (44 GPUs) must fit the gpuLimit of pools"),
        Evaluated(Candidate(()), None, "engine profile: weights do not fit"),
        Evaluated(Candidate(()), None, "maxReplicas (44 GPUs) must fit the gpuLimit of pools"),
        Evaluated(Candidate(()), object(), None),
    ]
    refused = refused_candidates(SimpleNamespace(trials=trials))
    assert refused == [
        {"reason": "maxReplicas (44 GPUs) must fit the gpuLimit of pools", "candidates": 2},
        {"reason": "engine profile: weights do not fit", "candidates": 1},
    ]
    lines = refused_lines({"refused": refused, "refused_trials": 3, "trials": 4})
    assert lines == [
        "refused: 3 of 4 candidates would not deploy or start:",
        "  2 x maxReplicas (44 GPUs) must fit the gpuLimit of pools",
        "  1 x engine profile: weights do not fit",
    ]
