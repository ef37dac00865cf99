"""Where a plan keeps the candidates it has evaluated: so an interrupted plan resumes, and so
workers on several processes or machines share one study.

A plan's storage is an Optuna journal file (`--journal FILE`: optuna.storages.JournalStorage over
JournalFileBackend, append-only, safe to cut at any point; one machine) or an Optuna RDB storage
(`--storage URL`, any SQLAlchemy URL Optuna's RDBStorage takes: `sqlite:///plan.db` for one
machine, `postgresql+psycopg://user@host/db` for many). Each GPU type's study is named after a digest of
everything that decides a candidate's result: the stack's config, the model and its engine
profile, the searched traffic, the target, the seed, the simulation options, the prices, the
policy pack's windows, whether the guardrails are kept, and the tooling's own source. A rerun
with other inputs, or after the tool changed, starts a fresh study in the same file instead of
reusing results that no longer hold; a rerun with the same inputs skips what is already
evaluated and evaluates the rest.

Each evaluated trial carries its candidate's parameters and its result as user attributes
(JSON), so the frontier and the winner are rebuilt from the file without re-running anything.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from capacity.planning.evaluator import Candidate, Evaluated
from capacity.planning.run import CombinedSummary, RunOptions
from capacity.planning.stack import StackModel
from capacity.workload.traces import Trace

CANDIDATE, RESULT = "candidate", "result"
WORKER = "worker"  # which process ran a trial: host/pid (workers on several machines share a study)
PRUNED_AFTER = "prunedAfterDays"  # a pruned trial's: how many days it ran before the pruner stopped it
# RDB workers beat every minute; a trial whose worker has not beaten for two is failed by the next
# worker's `optimize` (optuna.storages.RDBStorage heartbeat_interval / grace_period, Optuna 5.0),
# so a worker lost on another machine does not hold a trial RUNNING for ever.
HEARTBEAT_S, GRACE_S = 60, 120


@dataclass(frozen=True)
class StorageSpec:
    """Where a plan's studies live: a journal file or an RDB URL (one of the two). Plain data, so a
    worker process opens its own connection from it."""

    journal: Path | None = None
    url: str | None = None

    @property
    def flag(self) -> str:
        """The flag as messages show it: an RDB URL without its password (logs are read by many)."""
        return f"--journal {self.journal}" if self.journal else f"--storage {shown_url(str(self.url))}"

    @property
    def shared_by_machines(self) -> bool:
        """Workers elsewhere may be running its trials (an RDB storage): never fail them from here."""
        return self.url is not None

    def open(self) -> Any:
        """The Optuna storage (ValueError naming the flag when it cannot be opened)."""
        if self.journal is not None:
            return storage(self.journal)
        return rdb_storage(str(self.url))


# The source that decides a candidate's result: a change here invalidates what a journal holds.
SOURCE_ROOTS = tuple(Path(__file__).resolve().parents[2] / name for name in ("capacity", "contract"))


def plain(value: Any) -> Any:
    """`value` as JSON gives it back (numpy scalars as Python numbers): what a journal stores, so
    a resumed candidate and a fresh one compare equal."""
    return json.loads(json.dumps(value, default=lambda o: o.item() if isinstance(o, np.generic) else str(o)))


def _trace_digest(trace: Trace) -> str:
    h = hashlib.sha256()
    for column in (trace.arrivals, trace.prompt_tokens, trace.output_tokens):
        h.update(np.ascontiguousarray(column).tobytes())
    return h.hexdigest()


def source_digest(roots: Sequence[Path] = SOURCE_ROOTS) -> str:
    h = hashlib.sha256()
    for root in roots:
        for path in sorted(
            p for p in root.rglob("*") if p.suffix in (".py", ".yaml", ".json") and "__pycache__" not in p.parts
        ):
            h.update(path.relative_to(root.parent).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def run_key(
    sm: StackModel,
    traces: Sequence[Trace],
    target: float,
    seed: int,
    options: RunOptions,
    types: dict[str, Any],
    search_pools: bool,
    down_windows: Sequence[int],
    keep_guardrails: bool,
    min_warm: int,
    seeded: Sequence[Any] = (),
) -> str:
    """A short digest naming this search's inputs (the study names start with it); `seeded`: the
    points its studies try first (`plan.seeds`), which steer the whole search."""
    inputs = {
        "config": sm.source.config,
        "model": sm.model.name,
        "profile": repr(sm.profile),
        "traces": [_trace_digest(t) for t in traces],
        "target": target,
        "seed": seed,
        "options": dataclasses.asdict(options),
        "types": {name: dataclasses.asdict(kind) for name, kind in types.items()},
        "search_pools": search_pools,
        "down_windows": list(down_windows),
        "keep_guardrails": keep_guardrails,
        "min_warm": min_warm,
        "source": source_digest(),
    } | ({"seeded": list(seeded)} if seeded else {})
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]


def storage(path: Path) -> Any:
    """The Optuna storage over the journal file at `path` (created if missing). A file that is not
    an Optuna journal is refused naming its first bad line: Optuna would skip a bad last line and
    append after it, and the file would then fail to load at all."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    if not path.parent.is_dir():
        raise ValueError(f"--journal {path}: folder {path.parent} does not exist")
    if path.exists():
        _check_lines(path)
    return JournalStorage(JournalFileBackend(str(path)))


def shown_url(url: str) -> str:
    """`url` with its password masked (`***`), as SQLAlchemy renders it; unparsable ones as given."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def rdb_storage(url: str) -> Any:
    """Optuna's RDB storage at `url` (tables created if missing), with heartbeats (`HEARTBEAT_S`)."""
    import optuna
    from optuna.storages import RDBStorage
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with warnings.catch_warnings():  # the heartbeat is experimental in Optuna 5.0; its behaviour is what we need
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return RDBStorage(url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
    except (SQLAlchemyError, ImportError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"--storage {shown_url(url)}: cannot open it as an Optuna RDB storage ({reason})") from None


def release(opened: Any) -> None:
    """Close an RDB storage's connections before worker processes fork (each opens its own)."""
    engine = getattr(opened, "engine", None)
    if engine is not None:
        engine.dispose()


def _check_lines(path: Path) -> None:
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            try:
                ok = isinstance(entry := json.loads(line), dict) and "op_code" in entry
            except ValueError:  # JSON or UTF-8
                ok = False
            if not ok:
                cut = "" if line.endswith(b"\n") else " (cut off mid-write: remove that line to resume)"
                raise ValueError(f"--journal {path}: line {number} is not an Optuna journal entry{cut}")


def evaluated(study: Any, rebuild: Callable[[dict[str, Any]], Candidate]) -> list[Evaluated[CombinedSummary]]:
    """The candidates the study has evaluated to the end and their results, in trial order
    (`rebuild` turns a kept candidate's parameters back into the candidate)."""
    from optuna.trial import TrialState

    return [
        _kept(rebuild(trial.user_attrs[CANDIDATE]), trial.user_attrs[RESULT])
        for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if RESULT in trial.user_attrs
    ]


def finished(study: Any) -> int:
    """The trials that count against a plan's budget: evaluated to the end, or pruned."""
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def pruned(study: Any) -> int:
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)))


def fail_interrupted(study: Any) -> None:
    """Mark failed the trials an interrupted run left running (their candidates are evaluated
    anew). Only for storage no other machine's workers use: theirs may still be running."""
    from optuna.trial import TrialState

    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(trial.number, state=TrialState.FAIL)


def _kept(candidate: Candidate, result: dict[str, Any] | str) -> Evaluated[CombinedSummary]:
    """A kept result: the summary's `as_dict`, or the refusal's line."""
    if isinstance(result, str):
        return Evaluated(candidate, None, result)
    return Evaluated(candidate, CombinedSummary.from_dict(result))


def record(trial: Any, result: Evaluated[CombinedSummary]) -> None:
    """Keep the candidate's parameters and its result on the trial (before it is told, so a told
    trial has both)."""
    trial.set_user_attr(CANDIDATE, plain(dict(result.params)))
    trial.set_user_attr(RESULT, result.summary.as_dict() if result.summary else result.refused)
