"""The evidence comments of a stack file: where each committed threshold came from.

An evidence block is the YAML comment directly above a mapping key (or a list item), whose
first line starts with `Evidence`; it applies to every value under that key:

    # Evidence: planned 2026-12-01 on engine profile a10g-r1-14b-awq
    #   python -m capacity plan --stack prod --model qwen25-14b-awq --trace ../shared/traces/azure-llm-2023-conv.csv
    #   validation (last 30% of the trace): attainment 99.4%, 5.21 GPU-h, 1.21x oracle, $2.10
    qwen25-14b-awq:

Other comment lines may sit above the block (a blank line ends it). Keys are the dotted config
paths `pulumi config set --path` takes, relative to `config:` and without the program's
namespace: `autoscaling.qwen25-14b-awq`, `models[0].engine` (another namespace keeps its own,
`aws:region`). PyYAML's node marks give each key its line, so comments are read from the text
as written, without a comment-preserving loader.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from capacity.planning.days import HOLDOUT_DAYS, Part, plan_parts
from capacity.planning.plan import SEARCH_FRACTION  # what `plan` splits at when its command does not say
from capacity.planning.stack import NAMESPACE, StackModel, model_index
from capacity.workload import traces

_EVIDENCE_LINE = re.compile(r"^\s*#\s?Evidence\b")
_COMMENT = re.compile(r"^\s*#")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_PROFILE = re.compile(r"(?<![-\w])profile\s+([A-Za-z0-9][\w.-]*[\w])")
_COMMAND = re.compile(r"(?:^|/)python3?\s+-m\s+capacity\b")
_LAST_PART = re.compile(r"(\.[^.\[\]]+|\[\d+\])$")
# The held-out numbers as `plan --write` words them (capacity/cli/plan.evidence_block); `\s+` spans the
# block's wrapped lines: "validation (last 30% ...): attainment 99.88%, 3.22 GPU-h"
_HELD_OUT = re.compile(r"validation\s+\([^)]*\):\s+attainment\s+(?P<percent>[\d.]+)%,\s+(?P<gpu_hours>[\d.]+)\s+GPU-h")


@dataclass(frozen=True)
class HeldOut:
    """What an evidence block records of its policy on the held-out part of its traffic."""

    attainment: float  # share of requests within the SLO, 0..1
    gpu_hours: float
    digits: int  # decimals the GPU-hours were written with: a reproduction is exact to half the last one


@dataclass(frozen=True)
class Evidence:
    """One evidence block: its text (comment markers removed), the command that produced the
    values (the first `python -m capacity ...` line), the date and engine profile it names."""

    text: str
    command: str | None
    date: str | None
    profile: str | None

    def held_out_days(self) -> dict[str, float]:
        """The recorded held-out cost (USD) of each part, by label (`per day: LABEL 99.06% $160.29;
        ...`): what a replay of some of the parts is compared with. Empty: the block records none."""
        lines = self.text.split("\n")
        # The block wraps at hyphens too ("azure2024-conv-5days-" / "rates"): a line ending in one continues.
        joined = "".join(line + ("" if line.endswith("-") else " ") for line in (part.strip() for part in lines))
        found = re.search(r"per day: (.*?); worst day", joined)
        if found is None:
            return {}
        days = (
            re.fullmatch(r"(?P<label>.+) [\d.]+% \$(?P<cost>[\d.]+)", entry.strip())
            for entry in found.group(1).split("; ")
        )
        return {day.group("label"): float(day.group("cost")) for day in days if day}

    def held_out(self) -> HeldOut | None:
        """The recorded held-out attainment and GPU-hours (None: the block records none)."""
        found = _HELD_OUT.search(self.text)
        if found is None:
            return None
        hours = found.group("gpu_hours")
        digits = len(hours.partition(".")[2])
        return HeldOut(float(found.group("percent")) / 100, float(hours), digits)

    def option(self, flag: str) -> str | None:
        """The value the command passes for `flag` (`--trace X` or `--trace=X`; the first one)."""
        if self.command is None:
            return None
        try:
            tokens = shlex.split(self.command)
        except ValueError as error:  # an unbalanced quote
            raise ValueError(f"evidence command {self.command!r}: {error}") from None
        for token, following in zip(tokens, [*tokens[1:], None]):
            if token == flag:
                return following
            if token.startswith(flag + "="):
                return token[len(flag) + 1 :]
        return None


def evidence(stack_file_path: Path) -> dict[str, Evidence]:
    """Every evidence block of the stack file, by the config path of the key it sits above."""
    path = Path(stack_file_path)
    text = path.read_text()
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ValueError(f"stack file {path}: not YAML{where} ({getattr(error, 'problem', None) or error})") from None
    starts: dict[int, str] = {}  # line -> the outermost config path that starts it
    scalar_lines: set[int] = set()  # lines inside block scalars: a `#` there is text, not a comment
    config = _child(root, "config")
    if config is not None:
        _walk(config, "", starts, scalar_lines, top=True)
    lines = text.splitlines()
    found = {}
    for line, key in starts.items():
        block = _block_above(lines, line, scalar_lines)
        if block is not None:
            found[key] = _parse(block)
    return found


def for_key(blocks: Mapping[str, Evidence], path: str) -> Evidence | None:
    """The evidence of the nearest block enclosing `path` (the key itself, then its parents)."""
    while path:
        if path in blocks:
            return blocks[path]
        stripped = _LAST_PART.sub("", path)
        path = "" if stripped == path else stripped
    return None


def key_of(blocks: Mapping[str, Evidence], found: Evidence | None) -> str | None:
    """The key a block sits above (`for_key` hands back the block itself)."""
    return next((key for key, e in blocks.items() if e is found), None)


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    return next((value for k, value in node.value if k.value == key), None)


def _config_key(key: str, top: bool) -> str:
    """`inference-platform:models` -> `models` at the top of `config:`; other keys as written."""
    return key.removeprefix(f"{NAMESPACE}:") if top else key


def _walk(node: yaml.Node, path: str, starts: dict[int, str], scalar_lines: set[int], top: bool = False) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            name = _config_key(str(key_node.value), top)
            child = f"{path}.{name}" if path else name
            starts.setdefault(key_node.start_mark.line, child)
            _walk(value, child, starts, scalar_lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = f"{path}[{index}]"
            starts.setdefault(item.start_mark.line, child)
            _walk(item, child, starts, scalar_lines)
    elif isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
        scalar_lines.update(range(node.start_mark.line, node.end_mark.line + 1))


def _block_above(lines: list[str], line: int, scalar_lines: set[int]) -> list[str] | None:
    """The comment lines from the nearest `# Evidence` line above `line` down to it, if any."""
    above = line - 1
    while above >= 0 and above not in scalar_lines and _COMMENT.match(lines[above]):
        if _EVIDENCE_LINE.match(lines[above]):
            return lines[above:line]
        above -= 1
    return None


def _parse(block: list[str]) -> Evidence:
    body = [re.sub(r"^\s*#\s?", "", line).rstrip() for line in block]
    command = next((line.strip() for line in body if _COMMAND.search(line.strip())), None)
    date = _DATE.search(body[0])
    profile = _PROFILE.search("\n".join(body))
    return Evidence(
        text="\n".join(body),
        command=command,
        date=date.group(0) if date else None,
        profile=profile.group(1) if profile else None,
    )


# --- the traffic an evidence command names ---------------------------------------------------


@dataclass(frozen=True)
class Traffic:
    """What one model is simulated on, and whose evidence said so (None: the flags alone)."""

    trace: traces.Trace
    spec: str
    rate_scale: float
    search_fraction: float
    seed: int
    source: str | None
    holdout_days: int = HOLDOUT_DAYS

    def parts(self) -> tuple[list[Part], list[Part]]:
        """What the plan searched and validated on: the trace's days, or its time split."""
        return plan_parts(self.trace, self.holdout_days, self.search_fraction)


def _option(proof: Evidence | None, source: str | None, flag: str, given: Any, default: Any) -> Any:
    """A flag's value: as passed, else as the evidence command passed it, else its default."""
    if given is not None:
        return given
    text = proof.option(flag) if proof else None
    if text is None:
        return default
    try:
        return type(default)(text)
    except ValueError:
        raise ValueError(
            f"the evidence command above {source} passes {flag} {text!r}, not a {type(default).__name__}"
        ) from None


def evidence_traffic(
    sm: StackModel,
    blocks: Mapping[str, Evidence],
    trace: str | None = None,
    rate_scale: float | None = None,
    search_fraction: float | None = None,
    seed: int | None = None,
) -> Traffic:
    """What to replay for a model: the given values, else those of its first evidence command
    that names a --trace (its own autoscaling block, its engine, then where each threshold is
    set), else the planner's defaults; no trace at all is one clear error."""
    index = model_index(sm)
    keys = [f"autoscaling.{sm.model.name}", f"models[{index}].engine", f"models[{index}]", "autoscaling.default"]
    proof = next((e for key in keys if (e := for_key(blocks, key)) and e.option("--trace")), None)
    source = key_of(blocks, proof)
    spec = trace
    if spec is None:
        if proof is None:
            raise ValueError(
                f"no evidence comment of {sm.stack}/{sm.model.name} names a --trace (a '# Evidence' block "
                f"above autoscaling.{sm.model.name} with its 'python -m capacity plan ... --trace' line): "
                "pass --trace"
            )
        spec = str(proof.option("--trace"))
        spec = traces.rebased(spec, sm.source.path.parent)  # the evidence command ran at the project root
    rate = _option(proof, source, "--rate-scale", rate_scale, 1.0)
    fraction = _option(proof, source, "--search-fraction", search_fraction, SEARCH_FRACTION)
    seed = _option(proof, source, "--seed", seed, 0)
    holdout_days = _option(proof, source, "--holdout-days", None, HOLDOUT_DAYS)
    if rate <= 0:
        raise ValueError(f"--rate-scale must be > 0, got {rate}")
    if not 0 < fraction < 1:
        raise ValueError(f"--search-fraction must be in (0, 1), got {fraction}")
    given = trace is not None
    loaded = traces.rate_scale(traces.load(spec), rate, seed=seed)
    return Traffic(loaded, spec, rate, fraction, seed, None if given else source, holdout_days)
