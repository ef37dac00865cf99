"""What each committed threshold of a model does: the stack's policy simulated on the traffic its
plan held out (the last days of a trace of days, else the rest after the search's time split),
then every threshold at half and double its value (a boolean flipped), each
edit applied as `pulumi config set --path` would and validated as a deploy would be.

A threshold is a scalar leaf of the model's merged autoscaling policy (not the SLO, which the
thresholds are judged against; of a disabled trigger only its `enabled`) or one of the engine
flags that decide a replica's capacity. An edit goes into the model's own block, so it changes
this model only. An engine flag changes the replica itself: a physics profile (`<gpu>-<model>`)
is re-derived with the new flags when the stack loads (`from_stack.with_engine_flags`), as the
planner derives a candidate's; a measured profile's flags are not varied.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from capacity.planning.days import Part
from capacity.planning.evaluator import Candidate, Evaluated, evaluate, evaluators
from capacity.planning.run import CombinedSummary, RunOptions, held_out_parts
from capacity.planning.stack import StackModel, apply_config_set, model_index, scope_sets, with_engine_flags
from contract.triggers import TRIGGERS, enabled_triggers

# The vLLM flags that decide a replica's capacity envelope (the ones the planner searches).
ENGINE_FLAGS = ("maxNumSeqs", "maxNumBatchedTokens", "gpuMemoryUtilization")
DEFAULT_KEY = "default"  # the block every model inherits (contract.settings.autoscaling.DEFAULT_KEY)
_LIST_LEAF = re.compile(r"^(?P<list>.+)\[(?P<index>\d+)\]\.(?P<leaf>[^.\[\]]+)$")

Scalar = bool | int | float
SAME_VALUE = "the same value once rounded"


@dataclass(frozen=True)
class Threshold:
    """One committed value: its name in the model's policy (`triggers.kvCache.targetPerReplica`,
    `engine.maxNumSeqs`), the config path an edit sets, what it is for and where it is set."""

    name: str
    path: str  # under the program's namespace, as `pulumi config set --path` takes it
    value: Scalar
    purpose: str
    set_in: str | None  # the stack key that holds the value; None: the built-in default
    floor: int | None  # the least integer the field's own rule allows


@dataclass(frozen=True)
class Variant:
    label: Literal["half", "double", "flipped"]
    value: Scalar
    edits: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Outcome:
    """A variant's held-out summary, or the one line saying why there is none."""

    variant: Variant
    summary: CombinedSummary | None
    reason: str | None


@dataclass(frozen=True)
class Explanation:
    baseline: CombinedSummary
    rows: list[tuple[Threshold, list[Outcome]]]
    engine_refusal: str | None  # why the engine flags' variants did not run (engine_refusal)


# --- the thresholds --------------------------------------------------------------------------


def thresholds(sm: StackModel) -> list[Threshold]:
    """The model's thresholds, policy leaves in the settings' order, then the engine flags."""
    scope = f"autoscaling.{sm.model.name}"
    disabled = {f"triggers.{t.key}." for t in TRIGGERS if t not in enabled_triggers(sm.policy)}
    found = []
    for name, value, field in _leaves(sm.policy):
        if name.startswith("slo.") or (any(name.startswith(d) for d in disabled) and not name.endswith(".enabled")):
            continue
        found.append(Threshold(name, f"{scope}.{name}", value, _purpose(name, field), _set_in(sm, name), _floor(field)))
    index = model_index(sm)
    engine = sm.model.engine
    for name, value, field in _leaves(engine, "engine"):
        flag = name.removeprefix("engine.")
        if flag in ENGINE_FLAGS:
            given = any(type(engine).model_fields[f].alias == flag for f in engine.model_fields_set)
            path = f"models[{index}].{name}"
            found.append(Threshold(name, path, value, field.description or "", path if given else None, _floor(field)))
    return found


def _leaves(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, Scalar, FieldInfo]]:
    """(camelCase key path, value, field) of every bool or number under a settings model."""
    for attribute, field in type(model).model_fields.items():
        value = getattr(model, attribute)
        path = f"{prefix}.{field.alias}" if prefix else str(field.alias)
        if isinstance(value, BaseModel):
            yield from _leaves(value, path)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from _leaves(item, f"{path}[{i}]")
        elif isinstance(value, (bool, int, float)):
            yield path, value, field


def _purpose(name: str, field: FieldInfo) -> str:
    """A trigger's target says why its metric type; its switch which trigger; the rest the field's description."""
    for trigger in TRIGGERS:
        if name == trigger.target_path():
            return f"{field.description}; {trigger.metric_type}: {trigger.why}"
        if name == f"triggers.{trigger.key}.enabled":
            return f"turns the {trigger.keda_name} trigger ({trigger.label.lower()}) on or off"
    return field.description or ""


def _floor(field: FieldInfo) -> int | None:
    for rule in field.metadata:
        if getattr(rule, "ge", None) is not None:
            return int(rule.ge)
        if getattr(rule, "gt", None) is not None:
            return int(rule.gt) + 1
    return None


def _set_in(sm: StackModel, name: str) -> str | None:
    """Where the merged value comes from: the model's block, `default`, or neither (built in)."""
    for scope in (sm.model.name, DEFAULT_KEY):
        if scope_sets(sm, scope, name):
            return f"autoscaling.{scope}.{name}"
    return None


# --- half, double, flipped -------------------------------------------------------------------


def variants(sm: StackModel, threshold: Threshold) -> list[Variant]:
    """A boolean flipped; a number halved and doubled (an integer rounded half to even, and
    never below its field's floor)."""
    value = threshold.value
    if isinstance(value, bool):
        return [Variant("flipped", not value, _edits(sm, threshold, not value))]
    out = []
    for label, factor in (("half", 0.5), ("double", 2.0)):
        if isinstance(value, int):
            new: Scalar = max(round(value * factor), threshold.floor if threshold.floor is not None else 0)
        else:
            new = float(f"{value * factor:.6g}")
        out.append(Variant(label, new, _edits(sm, threshold, new)))  # type: ignore[arg-type]  # a threshold's varied value keeps its scalar type
    return out


def _edits(sm: StackModel, threshold: Threshold, value: Scalar) -> tuple[tuple[str, Any], ...]:
    """One leaf inside a list sets the whole merged list: a list in the model's block replaces
    the merged one (settings merge), so the other entries and keys must come along."""
    match = _LIST_LEAF.match(threshold.name)
    if match is None or threshold.name.startswith("engine."):
        return ((threshold.path, value),)
    merged = sm.policy.model_dump(by_alias=True, mode="json")
    for key in match["list"].split("."):
        merged = merged[key]
    entries = [dict(entry) for entry in merged]
    entries[int(match["index"])][match["leaf"]] = value
    return ((f"autoscaling.{sm.model.name}.{match['list']}", entries),)


# --- the runs --------------------------------------------------------------------------------


def engine_refusal(sm: StackModel) -> str | None:
    """Why the model's engine flags cannot be varied in the simulator, or None when they can:
    its profile must be a physics profile of the model, which the stack re-derives from its
    flags (`from_stack.with_engine_flags`); a measured profile keeps the flags it was measured with."""
    if with_engine_flags(sm.profile, sm.model) is sm.profile:
        return (
            f"engine profile {sm.profile.name} is measured, not derived from the stack's engine flags "
            "(<gpu>-<model> physics profiles are): its flags are not varied"
        )
    return None


@dataclass(frozen=True)
class ExplainJob:
    """A variant's edits on the stack, simulated on the held-out parts (each day, or the time
    split's rest, as the plan validated on them). An engine flag's variant runs on the profile
    re-derived with it, unless `engine_reason` says it cannot be."""

    sm: StackModel
    held: tuple[Part, ...]
    options: RunOptions
    engine_reason: str | None = None

    def deploy(self, candidate: Candidate) -> StackModel:
        if not candidate.edits:
            return self.sm  # the baseline: the stack as committed
        engine = any(
            ".engine." in edit[0] for edit in candidate.edits if isinstance(edit, tuple)
        )  # `models[i].engine.<flag>`
        if engine and self.engine_reason:
            raise ValueError(self.engine_reason)
        return apply_config_set(self.sm, candidate.edits)  # re-derives a physics profile's flags

    def score(self, deployed: StackModel) -> CombinedSummary:
        return held_out_parts(deployed, self.held, self.options, oracle=False)


def outcome(
    sm: StackModel,
    variant: Variant,
    held: Sequence[Part],
    options: RunOptions,
    engine_reason: str | None = None,
) -> Outcome:
    """One variant deployed (or why not) and simulated on the held-out parts, in this process."""
    done = evaluate(ExplainJob(sm, tuple(held), options, engine_reason), Candidate(variant.edits))
    return Outcome(variant, done.summary, done.refused)


def explain(
    sm: StackModel,
    held: Sequence[Part],
    options: RunOptions,
    workers: int,
    progress: Callable[[int, int], None] | None = None,
) -> Explanation:
    """The baseline and every threshold's variants on the held-out parts, over `workers`
    processes; `progress(done, total)` after each run."""
    rows = [(t, variants(sm, t)) for t in thresholds(sm)]
    simulated = [v for t, vs in rows for v in vs if v.value != t.value]
    candidates = [Candidate(()), *(Candidate(v.edits) for v in simulated)]  # the baseline first
    refusal = engine_refusal(sm)
    results: list[Evaluated[CombinedSummary]] = []
    with evaluators(ExplainJob(sm, tuple(held), options, refusal), max(1, min(workers, len(candidates)))) as evaluator:
        for done in evaluator.map(candidates):
            results.append(done)
            if progress:
                progress(len(results), len(candidates))
    baseline, *ran = results
    if baseline.summary is None:
        raise ValueError(f"the committed policy does not run: {baseline.refused}")
    outcomes = iter(Outcome(v, done.summary, done.refused) for v, done in zip(simulated, ran))  # in the order simulated
    return Explanation(
        baseline.summary,
        [(t, [next(outcomes) if v.value != t.value else Outcome(v, None, SAME_VALUE) for v in vs]) for t, vs in rows],
        refusal,
    )
