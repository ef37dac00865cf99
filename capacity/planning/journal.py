"""Where a plan keeps the candidates it has evaluated, so an interrupted plan resumes.

A journal is an Optuna journal file (optuna.storages.JournalStorage over JournalFileBackend:
append-only, safe to cut at any point). Each GPU type's study is named after a digest of
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from capacity.planning.evaluator import Candidate, Evaluated
from capacity.planning.run import CombinedSummary, RunOptions
from capacity.planning.stack import StackModel
from capacity.workload.traces import Trace

CANDIDATE, RESULT = "candidate", "result"
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
) -> str:
    """A short digest naming this search's inputs (the study names start with it)."""
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
    }
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
    """The candidates the study has evaluated and their results, in the order they were asked
    (`rebuild` turns a kept candidate's parameters back into the candidate); a trial left
    running by an interruption is marked failed (its candidate is evaluated anew)."""
    from optuna.trial import TrialState

    done = []
    for trial in study.get_trials(deepcopy=False):
        if trial.state == TrialState.COMPLETE and CANDIDATE in trial.user_attrs:
            done.append(_kept(rebuild(trial.user_attrs[CANDIDATE]), trial.user_attrs[RESULT]))
        elif trial.state in (TrialState.RUNNING, TrialState.WAITING):
            study.tell(trial.number, state=TrialState.FAIL)
    return done


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
