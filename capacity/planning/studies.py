"""Optuna studies on a shared storage, optimized by worker processes: Optuna's documented way to
run one study on many processes and machines (the tutorial "Easy Parallelization",
optuna.readthedocs.io tutorial/10_key_features/004_distributed: multi-process and multi-node
optimization are processes sharing the same storage backend, RDB or a file, each calling
`study.optimize` on the loaded study; the storage is all they share, so no home-made task queue).

A worker runs each study in turn until the study holds its count of finished trials (complete or
pruned), so a plan's budget is the study's, however many workers share it. The check is made
before each trial, as `optuna.study.MaxTrialsCallback` makes it after one, so that one machine's
workers never start more than the count between them (they claim each trial under a lock). The
claim includes `study.ask()`, which pops an enqueued (WAITING) trial: Optuna 5.0's
`Study._pop_waiting_trial_id` reads the waiting trials, then sets one RUNNING with
`RDBStorage.set_trial_state_values(..., for_update=True)`, and SQLite ignores FOR UPDATE (and
Python's sqlite3 starts no transaction before a SELECT), so two processes could both pop the same
seed, both run it, and the second `tell` failed with "Cannot tell a COMPLETE trial". Asked under
the lock, one machine's workers never share a trial on any storage; PostgreSQL's row lock and the
journal's file lock keep machines apart.
Workers on other machines claim on their own: two machines that start a trial at the same moment,
when one is left, both run it, so a study shared across machines can end a few trials beyond its
count (and every one is kept). Each worker's sampler has its own seed (`worker_seed`): seeded
alike, the samplers of parallel workers would propose the same points during TPE's random startup.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, wait
from dataclasses import dataclass
from typing import Any, Protocol

from capacity.planning import journal
from capacity.planning.journal import StorageSpec
from capacity.runtime import worker_pool

POLL_S = 1.0  # how often the coordinator counts the finished trials while its workers run


class Objectives(Protocol):
    """The objective of each study (by GPU type): handed once to every worker process as the pool
    starts it."""

    def objective(self, gpu: str) -> Callable[[Any], float]: ...

    def pruner(self) -> Any: ...


@dataclass(frozen=True)
class StudySpec:
    name: str
    gpu: str
    trials: int  # the finished trials the study must hold
    seed: int | None  # the sampler's seed of worker 0 (None: unseeded)


def worker_seed(seed: int | None, worker: int) -> int | None:
    """Worker 0 samples with the study's seed (one worker: the whole search reproducible), the
    others with seeds of their own."""
    return None if seed is None else seed + 7919 * worker


def sampler(seed: int | None) -> Any:
    """TPE as the planner runs it: multivariate, constraints read from `trial.set_constraint`
    (Optuna 5.0 reads them in place of the deprecated `constraints_func`), and the constant liar
    Optuna's docs advise for parallel workers (a running trial counts as a bad one, so parallel
    workers do not all propose the same region)."""
    import optuna

    return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)


@dataclass(frozen=True)
class Shared:
    """What one machine's workers share besides the storage: how many trials of each study they
    have under way (claimed under `lock`), and the Ctrl-C flag."""

    lock: Any
    in_flight: Any  # multiprocessing.Array("i", studies)
    stop: Any  # multiprocessing.Event

    @classmethod
    def new(cls, studies: int) -> Shared:
        return cls(multiprocessing.Lock(), multiprocessing.Array("i", studies), multiprocessing.Event())

    def claim(self, index: int, study: Any, trials: int) -> Any | None:
        """Ask study `index` for one more trial if its finished trials and this machine's under
        way stay below `trials` (the count Optuna's MaxTrialsCallback checks only after a trial);
        None when it holds its count."""
        with self.lock:
            if self.stop.is_set() or journal.finished(study) + self.in_flight[index] >= trials:
                return None
            trial = study.ask()
            self.in_flight[index] += 1
            return trial

    def release(self, index: int) -> None:
        with self.lock:
            self.in_flight[index] -= 1


def optimize(
    spec: StorageSpec, studies: Sequence[StudySpec], objectives: Objectives, worker: int, shared: Shared
) -> None:
    """One worker: each study in turn, one trial per claim through Optuna's ask-and-tell
    interface, until the study holds its count of finished trials (or Ctrl-C). The sampler and the
    pruner live across the trials, so one worker proposes exactly what one
    `optimize(n_trials=count)` would."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = spec.open()
    for index, s in enumerate(studies):
        study = optuna.load_study(
            study_name=s.name, storage=storage, sampler=sampler(worker_seed(s.seed, worker)), pruner=objectives.pruner()
        )
        objective = objectives.objective(s.gpu)
        while (trial := shared.claim(index, study, s.trials)) is not None:
            try:
                run_trial(study, trial, objective)
            finally:
                shared.release(index)


def run_trial(study: Any, trial: Any, objective: Callable[[Any], float]) -> None:
    """What `study.optimize` does with an asked trial (optuna/study/_optimize.py `_run_trial` at
    5.0.0): tell its value, PRUNED when the objective prunes it (Optuna records the last reported
    value), FAIL and re-raise on any other error."""
    import optuna
    from optuna.trial import TrialState

    try:
        value = objective(trial)
    except optuna.TrialPruned:
        study.tell(trial, state=TrialState.PRUNED)
    except BaseException:
        study.tell(trial, state=TrialState.FAIL)
        raise
    else:
        study.tell(trial, value)


# The worker process's part: set once when the pool starts it (fork), so a worker receives the
# objectives once, not with every call.
_WORK: tuple[StorageSpec, Sequence[StudySpec], Objectives, Shared] | None = None


def _start(spec: StorageSpec, studies: Sequence[StudySpec], objectives: Objectives, shared: Shared) -> None:
    global _WORK
    _WORK = (spec, studies, objectives, shared)


def _optimize(worker: int) -> None:
    assert _WORK is not None, "a worker optimizes only after the pool started it"
    spec, studies, objectives, shared = _WORK
    optimize(spec, studies, objectives, worker, shared)


def run_workers(
    spec: StorageSpec,
    studies: Sequence[StudySpec],
    objectives: Objectives,
    workers: int,
    progress: Callable[[int], None] | None = None,
    first_worker: int = 0,
) -> None:
    """`workers` processes optimizing `studies` on the shared storage until each holds its count;
    `progress(finished trials)` while they run. Ctrl-C: the trials under way finish, none starts,
    then KeyboardInterrupt. `first_worker`: the index of the first (its sampler seed)."""
    shared = Shared.new(len(studies))
    with worker_pool(workers, _start, (spec, studies, objectives, shared)) as pool:
        futures = [pool.submit(_optimize, first_worker + w) for w in range(workers)]
        watched = spec.open() if progress else None  # opened here, after the workers forked
        try:
            while True:
                done, running = wait(futures, timeout=POLL_S, return_when=FIRST_EXCEPTION)
                if progress:
                    progress(count_finished(watched, studies))
                if not running or any(f.exception() for f in done):
                    break
        except KeyboardInterrupt:
            shared.stop.set()
            wait(futures)
            raise
        for future in futures:
            future.result()  # a worker's error is the command's


def count_finished(storage: Any, studies: Sequence[StudySpec]) -> int:
    """The finished trials of `studies` in an opened storage."""
    import optuna

    return sum(journal.finished(optuna.load_study(study_name=s.name, storage=storage)) for s in studies)
