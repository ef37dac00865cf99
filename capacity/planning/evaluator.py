"""What every search evaluates, and the one worker pool that evaluates it.

A search (`plan`, `tune`, `sensitivity`) proposes `Candidate`s: the `pulumi config set --path`
edits that deploy a policy on the stack, and what the search chose, by its own names. A `Job`
says how a candidate deploys and how its run is scored; `evaluate` turns a candidate into an
`Evaluated` (its summary, or the one line saying why it could not deploy). `evaluators` starts
worker processes that receive the job once, so each call ships only a candidate.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from capacity.planning.stack import ConfigEdit, StackModel
from capacity.runtime import worker_pool

Summary = TypeVar("Summary")
Summary_co = TypeVar("Summary_co", covariant=True)


@dataclass(frozen=True)
class Candidate:
    """One policy a search tries: the edits that deploy it on the stack (applied in order, as
    `pulumi config set --path` / `config rm --path` would; none: the stack as it is) and the
    values the search chose, by the search's names (the planner's parameters, tune's knobs)."""

    edits: tuple[ConfigEdit, ...]
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Evaluated(Generic[Summary]):
    """A candidate and its summary, or why it was refused (it would not deploy or start)."""

    candidate: Candidate
    summary: Summary | None
    refused: str | None = None

    @property
    def params(self) -> Mapping[str, Any]:
        return self.candidate.params


class Job(Protocol[Summary_co]):
    """How one search deploys a candidate and scores its run; picklable, sent once per worker."""

    def deploy(self, candidate: Candidate) -> StackModel:
        """The stack model running the candidate; ValueError (its message one line) if it cannot."""
        ...

    def score(self, deployed: StackModel) -> Summary_co: ...


def evaluate(job: Job[Summary], candidate: Candidate) -> Evaluated[Summary]:
    """The candidate deployed and scored by `job`, in this process."""
    try:
        deployed = job.deploy(candidate)
    except ValueError as refusal:
        return Evaluated(candidate, None, str(refusal))
    return Evaluated(candidate, job.score(deployed))


# The job of this worker process: set once when the pool starts it.
_JOB: Job[Any] | None = None


def _start(job: Job[Any]) -> None:
    global _JOB
    _JOB = job


def _evaluate(candidate: Candidate) -> Evaluated[Any]:
    assert _JOB is not None, "a worker evaluates only after the pool started it with its job"
    return evaluate(_JOB, candidate)


class Evaluator(Generic[Summary]):
    """Evaluates candidates over the pool's workers, results in the order given."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    def map(self, candidates: Iterable[Candidate]) -> Iterator[Evaluated[Summary]]:
        return self._pool.map(_evaluate, candidates)


@contextmanager
def evaluators(job: Job[Summary], workers: int) -> Iterator[Evaluator[Summary]]:
    """`workers` processes evaluating `job`'s candidates (Ctrl-C is the command's, see `worker_pool`)."""
    with worker_pool(workers, _start, (job,)) as pool:
        yield Evaluator(pool)
