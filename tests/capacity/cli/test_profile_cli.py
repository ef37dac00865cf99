"""`profile --from-sweep`: a real sweep becomes a measured profile that a stack, `model` and the
trust levels read; every bad input is one line naming what is wrong.

The sweep is the calibration run (../shared/calibration/: one A10G, the 14B AWQ, concurrency
1-40), written as `sweep` writes a sweep (`write_report`: envelope.csv + points.json, with the
run's request shape, window and the KV usage its README reports). One fit of it is shared by the
round-trip tests."""

import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from capacity.__main__ import build_parser, main
from capacity.cli.profile import setup_of
from capacity.engine import get_profile, measured
from capacity.engine.measured import EngineFlags
from capacity.engine.profiles import CALIBRATED
from capacity.engine.sweep_fit import FITTED
from capacity.engine.trust import accuracy, trust_of
from capacity.measure.envelope import read_envelope
from capacity.measure.report import write_report
from capacity.measure.sweep import PointResult
from capacity.planning import plan
from capacity.planning.days import Part
from capacity.planning.plan import gpu_edits
from capacity.planning.run import RunOptions
from capacity.planning.stack import load_stack_model
from capacity.workload.traces import load as load_trace
from tests.capacity.conftest import CALIBRATION_CSV, REPO
from tests.docs.pages import capacity_command, read

pytestmark = pytest.mark.xdist_group("profile-cli")  # its module fixtures are built once, by one worker

NAME = "a10g-r1-14b-awq-measured"
PAGE = "tasks/sweep-and-profile.md"  # where the profile command and its numbers are documented
SHAPE = {"prompt_tokens": 1024, "output_tokens": 128}  # the calibration README's
KV_USAGE = {1: 0.02, 40: 0.78}  # "average KV-cache usage 2% at concurrency 1 and 78% at concurrency 40"
CLAIM = ["--gpu", "a10g", "--model", "r1-14b-awq", "--no-progress"]
# 120 simulated seconds per level instead of the run's 480: the same steady state with a noisier
# p99, and a test of seconds instead of minutes (the README's command fits with the full window)
FAST = ["--duration", "120", "--iterations", "2"]


def _as_swept(out: Path, **summary_changes) -> Path:
    rows = [replace(r, avg_kv_usage=KV_USAGE.get(r.concurrency)) for r in read_envelope(CALIBRATION_CSV)]
    summaries = [
        {"concurrency": r.concurrency, "rate": None, **SHAPE, "window_s": [30.0, 510.0], **summary_changes}
        for r in rows
    ]
    write_report([PointResult(r, s) for r, s in zip(rows, summaries, strict=True)], out, "calibration sweep")
    return out


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    return _as_swept(tmp_path_factory.mktemp("sweep"))


@pytest.fixture(scope="module")
def fitted(swept, tmp_path_factory) -> Path:
    """The folder holding the profile fitted from `swept` (what data/measured/ is for a committed one)."""
    folder = tmp_path_factory.mktemp("measured")
    assert main(["profile", "--from-sweep", str(swept), *CLAIM, *FAST, "--out", str(folder)]) == 0
    return folder


@pytest.fixture
def found(fitted, monkeypatch) -> Path:
    """Profiles are looked up by name in the folder the command wrote to."""
    monkeypatch.setattr(measured, "MEASURED_DIR", fitted)
    return fitted


def _document(folder: Path) -> dict:
    return yaml.safe_load((folder / f"{NAME}.yaml").read_text())


def test_the_profile_file_records_the_sweep_the_fit_and_its_held_out_error_per_regime(fitted, swept):
    doc = _document(fitted)
    assert doc["trust"] == "measured" and doc["gpu"] == "a10g" and doc["model"] == "DeepSeek-R1-Distill-Qwen-14B-AWQ"
    assert doc["engine"]["max_num_seqs"] == 40 and doc["engine"]["max_model_len"] == 15_000  # the run's flags
    assert doc["sweep"]["levels"] == [1, 5, 10, 20, 40] and doc["sweep"]["source"] == str(swept / "envelope.csv")
    assert (doc["sweep"]["prompt_tokens"], doc["sweep"]["output_tokens"]) == (1024, 128)  # from points.json
    assert set(doc["fitted"]) == set(FITTED)
    by_regime = doc["error"]["held_out"]["by_regime"]
    assert by_regime["light"] > 0 and by_regime["saturated"] > 0  # 1, 5, 10 light; 20, 40 saturated
    assert doc["error"]["held_out"]["worst"] >= doc["error"]["held_out"]["median"] > 0
    assert doc["command"].startswith("python -m capacity profile --from-sweep")


def test_the_calibrated_replica_is_fitted_near_the_global_calibration_and_predicts_held_out_rows(fitted):
    doc = _document(fitted)
    # the global calibration was fitted on this sweep and the public measurements: fitting the sweep
    # alone moves its numbers a little, and each held-out level is predicted within 25%
    held_at = {"bandwidth": CALIBRATED.bandwidth["gddr"], "compute": CALIBRATED.compute}
    held_at["step_s"] = CALIBRATED.schedulers["v1"].step_s
    for key, value in doc["fitted"].items():
        assert 0.5 < value / held_at[key] < 2, (key, value)
    assert doc["error"]["held_out"]["worst"] < 0.25


def test_the_measured_profile_is_found_by_name_and_trusted_as_measured_with_its_own_error(found):
    profile = get_profile(NAME)
    trust = trust_of(profile)
    by_regime = _document(found)["error"]["held_out"]["by_regime"]
    assert (profile.gpu, profile.max_num_seqs, profile.max_num_batched_tokens) == ("a10g", 40, 2048)
    assert trust.level == "measured"
    assert (trust.light_error, trust.saturated_error) == (by_regime["light"], by_regime["saturated"])
    assert "held out" in trust.basis and "envelope.csv" in trust.basis


def test_model_predicts_with_the_measured_profile_and_says_it_is_measured(found, capsys):
    assert main(["model", "--profile", NAME, "--concurrency", "4", "--json"]) == 0
    (point,) = json.loads(capsys.readouterr().out)
    assert point["profile"] == NAME and point["trust"] == "measured"


def _prod_14b_on_the_measured_a10g(root: Path):
    """prod's 14B pinned to g5 with the measured profile (the 14B AWQ architecture swept on an A10G)."""
    stack = yaml.safe_load((REPO / "Pulumi.prod.yaml").read_text())
    model = next(m for m in stack["config"]["inference-platform:models"] if m["name"] == "qwen25-14b-awq")
    model["instanceFamilies"], model["capacityProfile"] = ["g5"], NAME
    (root / "Pulumi.prod.yaml").write_text(yaml.safe_dump(stack))
    return load_stack_model("prod", "qwen25-14b-awq", root=root)


def test_a_stack_that_names_the_measured_profile_plans_with_it(found, tmp_path):
    sm = _prod_14b_on_the_measured_a10g(tmp_path)
    assert sm.profile.name == NAME
    assert sm.profile.cost == get_profile(NAME).cost  # the fitted step costs, not re-derived physics
    assert trust_of(sm.profile).level == "measured"


def test_a_profile_re_derived_with_other_flags_is_not_trusted_as_measured(found):
    other = replace(get_profile(NAME), max_num_seqs=32)
    assert trust_of(other).level != "measured"


def test_the_planner_keeps_a_measured_profile_on_its_own_gpu_and_moves_off_it_by_physics(found, tmp_path):
    sm = _prod_14b_on_the_measured_a10g(tmp_path)
    assert gpu_edits(sm, "a10g") == []  # not replaced by the physics a10g-qwen2.5-14b-awq
    assert ("models[0].capacityProfile", "l4-qwen2.5-14b-awq") in gpu_edits(sm, "l4")


def test_the_planner_holds_a_measured_profiles_engine_flags_at_those_it_was_swept_with(found, tmp_path):
    """Other flags would deploy a replica the profile does not describe (the simulation runs the
    swept one whatever is drawn): every candidate on the measured GPU carries the swept flags."""
    sm = _prod_14b_on_the_measured_a10g(tmp_path)
    trace = load_trace("synthetic:step:base=1,peak=2,at=60,length=60,duration=180,prompt=512,output=64")
    result = plan.search(sm, [Part("t", trace)], 0.9, 3, 0, 1, RunOptions(), only=("a10g",))
    swept = measured.find(NAME).flags
    assert {
        (t.params["maxNumSeqs"], t.params["maxNumBatchedTokens"], t.params["gpuMemoryUtilization"])
        for t in result.trials
    } == {(swept.max_num_seqs, swept.max_num_batched_tokens, swept.gpu_memory_utilization)}


def test_stack_takes_the_flags_of_the_stack_model_that_serves_the_checkpoint(swept, tmp_path, monkeypatch):
    stack = yaml.safe_load((REPO / "Pulumi.prod.yaml").read_text())
    model = next(m for m in stack["config"]["inference-platform:models"] if m["name"] == "qwen25-14b-awq")
    # Flags that are neither the physics profiles' defaults (40 seqs, 2048) nor prod's own.
    model["engine"] |= {"maxNumSeqs": 24, "maxNumBatchedTokens": 768, "gpuMemoryUtilization": 0.8}
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump(stack))
    monkeypatch.chdir(tmp_path)
    args = build_parser("profile").parse_args(
        ["profile", "--from-sweep", str(swept), "--gpu", "l4", "--model", "qwen2.5-14b-awq", "--stack", "prod"]
    )
    _, setup, name = setup_of(args)
    assert setup.flags == EngineFlags(model["engine"]["maxModelLen"], 24, 768, 0.8, "0.25.1")
    assert name == "l4-qwen2.5-14b-awq-measured"


# --- the page's example: the committed profile is what its command wrote --------------------


def _committed() -> dict:
    return yaml.safe_load(measured.path_of(NAME, measured.MEASURED_DIR).read_text())


def test_the_committed_profile_is_what_the_pages_command_wrote_from_the_calibration_sweep():
    argv = capacity_command(PAGE, "profile")
    doc = _committed()
    assert doc["command"] == "python -m capacity " + " ".join(argv[3:])
    assert doc["sweep"]["sha256"] == hashlib.sha256(CALIBRATION_CSV.read_bytes()).hexdigest()


def test_the_pages_command_fits_the_replica_and_shape_the_round_trip_fits(swept, monkeypatch):
    parser = build_parser("profile")
    monkeypatch.chdir(REPO)  # the page runs from the clone: ../shared/calibration/...
    page = setup_of(parser.parse_args(capacity_command(PAGE, "profile")[3:]))
    folder = setup_of(parser.parse_args(["profile", "--from-sweep", str(swept), *CLAIM]))
    assert page[1:] == folder[1:]  # the CSV (shape given) and the folder (shape read): one setup, one name


def test_the_pages_numbers_are_the_committed_profiles(capsys):
    held = _committed()["error"]["held_out"]
    readme = read(PAGE)
    light, saturated = held["by_regime"]["light"], held["by_regime"]["saturated"]
    assert f"median light {light:.1%}, saturated {saturated:.1%}, worst {held['worst']:.1%}" in readme
    assert main(["model", "--profile", NAME, "--concurrency", "1"]) == 0
    said = f"trust: measured (error light {light:.0%}, saturated {saturated:.0%})"
    assert said in capsys.readouterr().out and said in readme


# --- bad input: one line each, every problem at once --------------------------------------


def _error(capsys, *argv: str) -> str:
    assert main(["profile", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_missing_sweep_an_unknown_gpu_and_model_are_one_line(capsys, tmp_path):
    err = _error(capsys, "--from-sweep", str(tmp_path / "nope"), "--gpu", "a99", "--model", "gpt-9")
    assert f"--from-sweep {tmp_path / 'nope'} does not exist" in err
    assert "--gpu: unknown GPU 'a99'" in err and "--model: unknown checkpoint 'gpt-9'" in err


def test_a_folder_without_an_envelope_says_what_it_needs(capsys, tmp_path):
    err = _error(capsys, "--from-sweep", str(tmp_path), *CLAIM)
    assert "no envelope.csv in it" in err


def test_a_csv_missing_a_column_names_it(capsys, tmp_path):
    csv = tmp_path / "sweep.csv"
    csv.write_text("concurrency,successful_rps\n1,0.3\n5,1.0\n10,1.3\n20,1.5\n")
    err = _error(capsys, "--from-sweep", str(csv), *CLAIM, "--prompt-tokens", "1024", "--output-tokens", "128")
    assert "missing column(s) p99_latency_s" in err


def test_a_bare_csv_needs_its_request_shape(capsys):
    err = _error(capsys, "--from-sweep", str(CALIBRATION_CSV), *CLAIM)
    assert "--prompt-tokens and --output-tokens required" in err and "no points.json" in err


def test_too_few_levels_to_fit_and_hold_one_out(capsys, tmp_path):
    csv = tmp_path / "sweep.csv"
    csv.write_text("".join(CALIBRATION_CSV.read_text().splitlines(keepends=True)[:4]))  # 3 levels
    err = _error(capsys, "--from-sweep", str(csv), *CLAIM, "--prompt-tokens", "1024")
    assert "3 concurrency levels; fitting 3 numbers and holding one level out needs at least 4" in err
    assert "--output-tokens required" in err  # reported with it, not after it is fixed


def test_a_request_shape_the_sweep_did_not_run_is_refused(capsys, swept):
    err = _error(capsys, "--from-sweep", str(swept), *CLAIM, "--prompt-tokens", "2048")
    assert "--prompt-tokens 2048 disagrees with the sweep's prompt_tokens 1024" in err


def test_requests_longer_than_the_flags_context_are_refused(capsys, swept):
    err = _error(capsys, "--from-sweep", str(swept), *CLAIM, "--max-model-len", "1024")
    assert "the sweep's requests (1152 tokens) exceed --max-model-len 1024" in err


def test_a_sweep_of_another_replica_is_told_by_its_kv_usage(capsys, swept):
    # the run filled 78% of an A10G's KV at 40 in flight; an L40S (48 GB) would hold far more
    claim = ["--gpu", "l40s", "--model", "r1-14b-awq", "--max-model-len", "15000", "--no-progress"]
    err = _error(capsys, "--from-sweep", str(swept), *claim, "--max-num-seqs", "40", "--max-num-batched-tokens", "2048")
    assert "mean KV usage at concurrency 40 is 78%" in err and "the swept replica ran other flags" in err


def test_a_stack_that_does_not_serve_the_checkpoint_is_refused(capsys, swept):
    err = _error(capsys, "--from-sweep", str(swept), *CLAIM, "--stack", "prod")
    assert "--stack prod serves no model with huggingFaceId DeepSeek-R1-Distill-Qwen-14B-AWQ" in err


def test_a_name_that_does_not_start_with_its_gpu_is_refused(capsys, swept):
    err = _error(capsys, "--from-sweep", str(swept), *CLAIM, "--name", "l4-mine")
    assert "--name 'l4-mine' must start with 'a10g-'" in err


def test_a_name_of_a_physics_profile_is_refused(capsys, swept):
    err = _error(capsys, "--from-sweep", str(swept), *CLAIM, "--name", "a10g-r1-14b-awq")
    assert "--name 'a10g-r1-14b-awq' is a physics profile's name" in err


def test_points_json_from_another_sweep_is_refused(capsys, swept, tmp_path):
    other = tmp_path / "sweep"
    shutil.copytree(swept, other)
    points = json.loads((other / "points.json").read_text())
    (other / "points.json").write_text(json.dumps(points[:-1]))
    err = _error(capsys, "--from-sweep", str(other), *CLAIM)
    assert "points.json has levels [1, 5, 10, 20]" in err and "not the same sweep" in err


def test_an_open_loop_level_is_refused(capsys, tmp_path):
    err = _error(capsys, "--from-sweep", str(_as_swept(tmp_path / "sweep", rate=2.0)), *CLAIM)
    assert "level concurrency 1 ran an open-loop rate; a profile fits closed loops" in err


def test_a_broken_measured_file_is_one_line_naming_it(tmp_path, monkeypatch):
    (tmp_path / "l4-broken.yaml").write_text("name: l4-broken\ngpu: l4\n")
    monkeypatch.setattr(measured, "MEASURED_DIR", tmp_path)
    with pytest.raises(ValueError, match=r"measured profile .*l4-broken.yaml: unreadable"):
        get_profile("l4-broken")


def test_a_regime_the_sweep_has_no_level_in_falls_back_to_the_gpus_held_out_error(tmp_path, monkeypatch):
    light_only = measured.document(
        name="a10g-light-only",
        gpu="a10g",
        checkpoint="DeepSeek-R1-Distill-Qwen-14B-AWQ",
        flags=EngineFlags(15_000, 40, 2048, 0.9, "0.25.1"),
        calibration=CALIBRATED,
        fitted={},
        sweep={"source": "sweep.csv", "levels": [1, 2, 4, 8]},
        in_sample={"median": 0.01},
        held_out={"median": 0.02, "worst": 0.05},
        held_out_by_regime={"light": 0.02, "saturated": None},
        command="",
        date="",
    )
    measured.write(tmp_path / "a10g-light-only.yaml", light_only, "test")
    monkeypatch.setattr(measured, "MEASURED_DIR", tmp_path)
    trust = trust_of(get_profile("a10g-light-only"))
    assert trust.level == "measured" and trust.light_error == 0.02
    assert trust.saturated_error == accuracy()["loso_per_gpu"]["a10g"]["saturated_median"]


def test_the_next_step_it_prints_is_a_plan_command_the_planner_accepts():
    """It once printed `plan --profile NAME`, a flag plan does not have."""
    from capacity.cli.profile import report_lines
    from capacity.engine.fit import Point
    from capacity.engine.sweep_fit import SweepFit

    point = Point("sweep", "c1", "a10g", "throughput", "light", 1.0, 1.0)
    fit = SweepFit(None, [point], [point])
    lines = report_lines(fit, {"light": 0.0}, {"step_s": 0.002}, {"step_s": 0.0015}, Path("p.yaml"), True, NAME)
    (command,) = [line.split() for line in lines if "python -m capacity plan" in line]
    argv = command[command.index("capacity") + 1 :]
    filled = [{"STACK": "prod", "MODEL": "qwen25-14b-awq", "TRACE": "t.csv"}.get(a, a) for a in argv]
    assert build_parser("plan").parse_args(filled).command == "plan"
    assert any(f"capacityProfile: {NAME}" in line for line in lines)
