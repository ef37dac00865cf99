"""Trials on many workers: worker processes share one study through Optuna's storage (an RDB URL
or a journal file), one machine's workers never start more than the study's count between them,
and a worker joining from elsewhere runs trials only in the study its inputs name."""

from pathlib import Path

import optuna
import pytest

from capacity.__main__ import main
from capacity.planning import journal, plan
from capacity.planning.days import Part
from capacity.planning.journal import StorageSpec
from capacity.planning.run import RunOptions
from capacity.planning.stack import load_stack_model
from capacity.workload.traces import load

ROOT = Path(__file__).resolve().parents[3]
STEP = "synthetic:step:base=2,peak=12,at=300,length=300,duration=900,prompt=512,output=128"
TARGET = 0.9


@pytest.fixture(scope="module")
def dev():
    return load_stack_model("dev", root=ROOT)


def trials_in(spec: StorageSpec, result: plan.PlanResult) -> list[optuna.trial.FrozenTrial]:
    """The trials of the one study `result` searched (one GPU type)."""
    (name,) = result.studies
    return optuna.load_study(study_name=name, storage=spec.open()).trials


def search(dev, spec: StorageSpec, trials: int, workers: int, join: bool = False, seed: int = 0) -> plan.PlanResult:
    parts = [Part("step", load(STEP))]
    return plan.search(dev, parts, TARGET, trials, seed, workers, RunOptions(), storage=spec, only=("l4",), join=join)


def storage_at(where: str, tmp_path: Path, request: pytest.FixtureRequest) -> StorageSpec:
    if where == "postgresql":  # a real server (tests/postgres.py), one database for the session
        return StorageSpec(url=request.getfixturevalue("postgres_url"))
    return StorageSpec(url=f"sqlite:///{tmp_path / 'plan.db'}") if where == "sqlite" else StorageSpec(tmp_path / "j")


@pytest.mark.parametrize("where", ["sqlite", "journal", "postgresql"])
def test_two_worker_processes_share_one_study_and_start_no_more_than_its_count(dev, tmp_path, where, request):
    spec = storage_at(where, tmp_path, request)
    result = search(dev, spec, trials=6, workers=2, seed=35)  # a seed no other test of the database uses
    finished = [t for t in trials_in(spec, result) if t.state.is_finished()]
    assert len(finished) == len(result.trials) + result.pruned == 6
    assert len({t.user_attrs[journal.WORKER] for t in finished}) == 2  # both processes ran trials of it


def test_a_joining_worker_adds_trials_to_the_coordinators_study_and_a_rerun_resumes_them(dev, tmp_path):
    spec = StorageSpec(url=f"sqlite:///{tmp_path / 'plan.db'}")
    search(dev, spec, trials=2, workers=1)  # the coordinator: creates and seeds the study
    joined = search(dev, spec, trials=4, workers=1, join=True)
    assert joined.best is None and joined.resumed == 2  # trials only: no winner
    assert sum(t.state.is_finished() for t in trials_in(spec, joined)) == 4
    again = search(dev, spec, trials=4, workers=1)
    assert (again.resumed, len(again.trials)) == (4, 4)


def test_a_worker_with_other_inputs_never_joins_the_study(dev, tmp_path):
    spec = StorageSpec(url=f"sqlite:///{tmp_path / 'plan.db'}")
    search(dev, spec, trials=1, workers=1)
    with pytest.raises(ValueError, match=r"^--join: --storage sqlite:///\S+ holds no study for these inputs"):
        search(dev, spec, trials=2, workers=1, join=True, seed=1)


def test_join_without_a_study_is_one_line_and_exit_2(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    url = f"sqlite:///{tmp_path / 'plan.db'}"
    args = ["plan", "--stack", "dev", "--trace", STEP, "--gpu", "l4", "--trials", "2", "--storage", url, "--join"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--join" in err and "no study for these inputs" in err


def test_a_storage_url_that_cannot_be_opened_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    url = f"sqlite:///{tmp_path / 'nowhere' / 'plan.db'}"
    assert main(["plan", "--stack", "dev", "--trace", STEP, "--trials", "2", "--storage", url]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"--storage {url}: cannot open it" in err


def test_the_coordinator_says_once_its_studies_exist_so_workers_elsewhere_can_join(dev, tmp_path):
    spec = StorageSpec(url=f"sqlite:///{tmp_path / 'plan.db'}")
    said: list[tuple[str, list]] = []

    def ready(where: str) -> None:  # the study is there, seeded, before any trial ran
        (study,) = optuna.get_all_study_summaries(spec.open())
        trials = optuna.load_study(study_name=study.study_name, storage=spec.open()).trials
        said.append((where, [t.state for t in trials]))

    plan.search(dev, [Part("step", load(STEP))], TARGET, 2, 0, 1, RunOptions(), storage=spec, only=("l4",), ready=ready)
    assert said == [(spec.flag, [optuna.trial.TrialState.WAITING] * 4)]  # the committed policy and 3 references


def test_a_storage_url_is_shown_without_its_password():
    """The coordinator's "studies ready" line and every storage error name the flag: an RDB URL's
    password never reaches a log (SQLAlchemy's `render_as_string(hide_password=True)`)."""
    spec = StorageSpec(url="postgresql+psycopg://planner:s3cret@db.example:5432/optuna")
    assert spec.flag == "--storage postgresql+psycopg://planner:***@db.example:5432/optuna"


def test_an_unopenable_storage_is_named_without_its_password():
    with pytest.raises(ValueError, match=r"^--storage sqlite\+nodriver://u:\*\*\*@h/x: cannot open") as refused:
        journal.rdb_storage("sqlite+nodriver://u:s3cret@h/x")
    assert "s3cret" not in str(refused.value)
