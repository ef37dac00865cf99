"""What `lab`, `sweep` and `recommend` print after an envelope: the stack model they retune, and
only `pulumi config set` lines that the stack's settings accept and that keep the planner's rules
(a planned block's guardrails and ceiling, checked on its evidence traffic as tests/test_evidence.py
does); where a line moves a planned value, or the envelope is of another GPU or engine than the
stack pins, the output says so."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from capacity.engine import get_profile
from capacity.measure.recommend import Recommendation, Setting, commands, report_lines
from capacity.planning.evidence import Evidence, evidence, evidence_traffic, for_key
from capacity.planning.guardrails import Guardrails, guardrails
from capacity.planning.stack import StackModel, apply_config_set, load_stack_model, replica_budget
from contract.gpu import GPU_OF_FAMILY
from contract.settings.stack_file import read_stack

EVIDENCE_TEST = "tests/test_evidence.py"
COMMENT_WIDTH = 110  # the comments before the commands: a terminal's or a review's width


@dataclass(frozen=True)
class Target:
    """The stack model whose `autoscaling.<model>` block the commands retune."""

    sm: StackModel  # with the stack's own (pinned) capacityProfile and engine flags
    chosen_by: str  # how the model was chosen, for the output
    plan: Evidence | None  # the evidence block above autoscaling.<model>: its values were planned
    rules: Guardrails | None  # the planner's rules on the plan's searched traffic (None: no plan, or no trace)
    rules_note: str | None  # why the rules could not be checked


def model_served_with(stack_file: Path, profile_name: str) -> str | None:
    """The stack's model whose `capacityProfile` is this profile (None: none, or no readable stack)."""
    try:
        models = read_stack(stack_file).settings().models
    except (OSError, ValueError):
        return None
    return next((m.name for m in models if m.capacity_profile == profile_name), None)


def choose_target(path: Path, model: str | None, profile: str | None = None) -> Target:
    """`model` when given; else the model served with `profile` (the one swept); else the stack's
    first model, in the stack file at `path`. The model must exist (one clear error otherwise)."""
    chosen_by = "--model"
    if model is None and profile is not None and (served := model_served_with(path, profile)):
        model, chosen_by = served, f"its capacityProfile is the swept {profile}"
    elif model is None:
        chosen_by = "the stack's first model; --model retunes another"
    sm = load_stack_model(path, model, source=read_stack(path))
    plan = for_key(evidence(sm.source.path), f"autoscaling.{sm.model.name}")
    rules, note = None, None
    if plan is not None:
        try:
            traffic = evidence_traffic(sm, evidence(sm.source.path))
            rules = guardrails(sm, [p.trace for p in traffic.parts()[0]])
        except (OSError, ValueError) as error:  # the evidence trace is not on this machine
            note = f"the planner's rules were not checked: {error}"
    return Target(sm, chosen_by, plan, rules, note)


def gpu_of_profile(name: str) -> str | None:
    """The GPU a profile name starts with (`<gpu>-<model>`, as GPU_OF_FAMILY names them)."""
    gpus = sorted(set(GPU_OF_FAMILY.values()), key=len, reverse=True)
    return next((g for g in gpus if name.startswith(g + "-")), None)


def measured_lines(target: Target, measured: str | None) -> list[str]:
    """Where the envelope's replica differs from the one the stack pins for the model."""
    sm = target.sm
    pinned = sm.model.capacity_profile
    families = sm.model.instance_families or []
    where = f"{sm.stack} pins {sm.model.name} to {pinned} (instanceFamilies [{', '.join(families)}])"
    if measured is None:
        return [f"# the envelope's GPU is not given (--profile): {where}; these lines hold for that GPU only"]
    lines = []
    swept, stack = get_profile(measured), sm.profile
    if measured != pinned:
        gpu, pinned_gpu = gpu_of_profile(measured), gpu_of_profile(pinned or "")
        differs = [f"GPU ({gpu} vs {pinned_gpu})"] if gpu != pinned_gpu else []
        if swept.checkpoint != stack.checkpoint:  # the served names of one checkpoint differ between profiles
            differs.append(f"checkpoint ({swept.checkpoint} vs {stack.checkpoint})")
        other = f"another {' and '.join(differs)}" if differs else "another profile"
        lines.append(
            f"# the envelope is of {measured}, {other}: {where}. The lines below are what one {measured} "
            f"replica reads; the pinned replica's are `lab --profile {pinned}`, or a sweep of one such replica"
        )
    flags = [
        (key, a, b)
        for key, a, b in (
            ("maxNumSeqs", swept.max_num_seqs, stack.max_num_seqs),
            ("maxNumBatchedTokens", swept.max_num_batched_tokens, stack.max_num_batched_tokens),
        )
        if a != b
    ]
    if flags:
        lines.append(
            "# the swept replica ran the profile's engine flags ("
            + ", ".join(f"{k} {a}" for k, a, _ in flags)
            + "); the stack sets "
            + ", ".join(f"{k} {b}" for k, _, b in flags)
        )
    return lines


def _full(target: Target, s: Setting) -> str:
    return f"autoscaling.{target.sm.model.name}.{s.path}"


def _culprit(problem: str, target: Target, settings: Sequence[Setting]) -> Setting:
    """The setting a refusal names first (its full key path, else its path), else the last one."""
    named = [(problem.find(key), s) for s in settings for key in (_full(target, s), s.path) if key in problem]
    return min(named, key=lambda found: found[0])[1] if named else settings[-1]


def _budget_line(target: Target, rec: Recommendation) -> str:
    """What the pools' replica budget for the model serves at the envelope's planning capacity."""
    budget = replica_budget(target.sm)
    return (
        f"#   the pools hold {budget} replicas of {target.sm.model.name} (after the other models' maxReplicas): at "
        f"{rec.planning_rps:.2f} req/s each they serve {budget * rec.planning_rps:.1f} req/s; for more, raise "
        "gpuCapacity.pools[].gpuLimit"
    )


def _settle(target: Target, settings: list[Setting]) -> tuple[list[Setting], list[str]]:
    """The settings the stack accepts and the planner's rules keep, and a line for each one withheld."""
    kept, withheld = list(settings), []
    committed_breaks = set(target.rules.breaks(target.sm.policy, target.sm.profile)) if target.rules else set()
    while kept:
        try:
            applied = apply_config_set(target.sm, [(_full(target, s), s.value) for s in kept])
        except ValueError as refusal:
            problem = str(refusal)
            reason = problem
        else:
            new = (
                [b for b in target.rules.breaks(applied.policy, applied.profile) if b not in committed_breaks]
                if (target.rules)
                else []
            )
            if not new:
                break
            problem = new[0]
            reason = f"breaks the planner's rule ({problem}); {EVIDENCE_TEST} would fail on it"
        drop = _culprit(problem, target, kept)
        kept.remove(drop)
        current = drop.current(target.sm.policy) if drop.current else None
        stays = f"; the stack's {_render(current)} stays" if current is not None else ""
        withheld.append(f"# not printed: {_full(target, drop)} {_render(drop.value)}: {reason}{stays}")
    return kept, withheld


def _render(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def plan_lines(target: Target, kept: Sequence[Setting]) -> list[str]:
    """Which printed lines move a planned value, and which wins."""
    if target.plan is None:
        return []
    moved = [s.path for s in kept if s.current is not None and s.current(target.sm.policy) != s.value]
    head = (target.plan.text.splitlines() or ["Evidence"])[0]
    lines = [f"# autoscaling.{target.sm.model.name} is planned ({head})"]
    if moved:
        lines += [
            f"# {len(moved)} line(s) below move a planned value ({', '.join(moved)}; 'plan:' shows it).",
            "# The plan simulated the fleet on its trace; this envelope reads one replica at one request shape.",
            f"# The plan stands unless you apply them; {EVIDENCE_TEST} re-checks a moved value against its evidence.",
        ]
    else:
        lines.append("# every line below keeps the planned value")
    if target.rules_note:
        lines.append(f"# {target.rules_note}")
    return lines


def advice(
    rec: Recommendation, target: Target, measured: str | None, slo_p99: float | None, slo_ttft: float | None
) -> list[str]:
    """The whole printout: the reading, where it stands against the stack, the accepted commands."""
    kept, withheld = _settle(target, list(rec.settings))
    ceiling = f"# not printed: autoscaling.{target.sm.model.name}.maxReplicas "
    at = next((i for i, line in enumerate(withheld) if line.startswith(ceiling)), None)
    if at is not None:
        withheld.insert(at + 1, _budget_line(target, rec))
    sm = target.sm
    return [
        f"# retunes autoscaling.{sm.model.name} of {sm.stack} ({target.chosen_by})",
        *report_lines(rec, slo_p99, slo_ttft),
        *measured_lines(target, measured),
        *plan_lines(target, kept),
        *withheld,
        *commands(rec, sm.stack, sm.model.name, sm.policy, kept, planned=target.plan is not None),
    ]


def folded(lines: Sequence[str], width: int = COMMENT_WIDTH) -> list[str]:
    """The advice as printed: each `# ...` comment folded to `width` columns (continuations
    indented), so the notes before the commands read at a glance; the commands stay whole."""
    out: list[str] = []
    for line in lines:
        if not line.startswith("#") or len(line) <= width:
            out.append(line)
            continue
        indent = "#" + " " * (len(line[1:]) - len(line[1:].lstrip()))
        body = line[len(indent) :]
        out += textwrap.wrap(
            body, width, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False
        )
    return out
