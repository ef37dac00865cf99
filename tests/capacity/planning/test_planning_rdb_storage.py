"""Optuna's RDB storage on a real PostgreSQL (psycopg 3), independent of the planner's code: what the
planner's `plan --storage URL` and its `--join` workers rest on.

Optuna 5.0 documents this use: "Easy Parallelization" (tutorial/10_key_features/004_distributed),
multi-process and multi-node optimisation "sharing the same storage backend, such as RDB"; a study
is created once and every process loads it by name. `optuna.study.MaxTrialsCallback` (optuna 5.0.0,
optuna/_callbacks.py) counts the study's trials in the given states after each trial and calls
`study.stop()` once they reach n_trials. It counts after a trial, not before the next, so with W
workers a study can end with up to W - 1 trials more than n_trials: two workers that both finish
trial N - 1 at once may each start one more.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import optuna
import pytest
from optuna.trial import TrialState

N_TRIALS = 12
WORKERS = 2
TIMEOUT_S = 180

# One worker: loads the study by name (created by the test first, as Optuna's tutorial does), runs
# trials until the study holds N_TRIALS complete ones, records its pid in each trial.
WORKER = """
import os, sys, time
import optuna
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState

url, name, n_trials, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.create_study(storage=url, study_name=name, load_if_exists=True)
# A barrier through the study itself: no worker starts before all have joined (bounded), so one
# slow to start on a loaded machine cannot find the study already done.
study.set_user_attr(f"joined-{os.getpid()}", True)
deadline = time.monotonic() + 60
while len(optuna.load_study(study_name=name, storage=url).user_attrs) < workers and time.monotonic() < deadline:
    time.sleep(0.1)

def objective(trial):
    trial.set_user_attr("worker_pid", os.getpid())
    time.sleep(0.05)  # long enough that both workers are mid-trial at once
    return trial.suggest_float("x", -1.0, 1.0) ** 2

study.optimize(
    objective,
    n_trials=n_trials,  # a bound for this worker alone; the callback stops it at the study's count
    callbacks=[MaxTrialsCallback(n_trials, states=(TrialState.COMPLETE,))],
)
"""


def run_workers(url: str, study_name: str) -> list[subprocess.CompletedProcess[str]]:
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, study_name, str(N_TRIALS), str(WORKERS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(WORKERS)
    ]
    done = []
    try:
        for worker in workers:
            out, err = worker.communicate(timeout=TIMEOUT_S)
            done.append(subprocess.CompletedProcess(worker.args, worker.returncode, out, err))
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=TIMEOUT_S)
    return done


@pytest.fixture(scope="module")
def shared_study(postgres_url: str) -> optuna.Study:
    name = f"two-workers-{uuid.uuid4().hex[:8]}"
    optuna.create_study(storage=postgres_url, study_name=name)
    for worker in run_workers(postgres_url, name):
        assert worker.returncode == 0, worker.stderr[-2000:]
    return optuna.load_study(study_name=name, storage=postgres_url)


def test_the_postgres_url_is_a_psycopg3_url_optuna_accepts(postgres_url):
    storage = optuna.storages.RDBStorage(postgres_url)
    assert storage.engine.dialect.driver == "psycopg"


def test_two_workers_fill_one_study_to_the_max_trials_callback_limit(shared_study):
    complete = shared_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    # MaxTrialsCallback checks after each trial: at most WORKERS - 1 trials beyond the limit (docstring)
    assert N_TRIALS <= len(complete) <= N_TRIALS + WORKERS - 1


def test_both_workers_ran_trials_of_the_shared_study(shared_study):
    pids = {t.user_attrs["worker_pid"] for t in shared_study.get_trials(deepcopy=False)}
    assert len(pids) == WORKERS


def test_no_trial_of_the_shared_study_is_left_running_or_failed(shared_study):
    states = {t.state for t in shared_study.get_trials(deepcopy=False)}
    assert states == {TrialState.COMPLETE}


def test_trial_numbers_are_unique_across_workers(shared_study):
    numbers = [t.number for t in shared_study.get_trials(deepcopy=False)]
    assert sorted(numbers) == list(range(len(numbers)))
