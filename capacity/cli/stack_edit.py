"""`plan --write`: `pulumi config set/rm --path` edits applied to a stack file in place, as the
Pulumi CLI applies them (contract/settings/config_path.py decides every stored value), with the
file's comments, order and layout kept (a ruamel.yaml round trip), and the `# Evidence` block
above the planned key replaced. The file is written only when the result loads as the program's
settings and holds exactly the config `edited_config` makes; nothing is half-written. Before a
plan runs, `evidence_check` compares it with the evidence block it would replace."""

from __future__ import annotations

import io
import itertools
import os
import re
import shlex
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from capacity.planning.evidence import Evidence
from contract.settings.config_path import ConfigEdit, ConfigRemove, config_text, edited_config, path_keys, stored_value
from contract.settings.errors import NAMESPACE, SettingsError
from contract.settings.stack_file import StackFile

_EVIDENCE = re.compile(r"^\s*#\s?Evidence\b")
_COMMENT = re.compile(r"^\s*#")


def _yaml() -> YAML:
    """The stack files' layout: 2-space maps, lists indented 2 under their key, no re-wrapping."""
    y = YAML()
    y.preserve_quotes = True
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    return y


def _pop_trailing(node: Any) -> Any:
    """The comment after the last entry of `node` (comments that precede whatever follows it in
    the file), removed from there: it moves below an appended entry."""
    if isinstance(node, CommentedMap) and node:
        last = list(node)[-1]
        if isinstance(node[last], (CommentedMap, CommentedSeq)) and node[last]:
            return _pop_trailing(node[last])
        entry = node.ca.items.get(last)
        if entry and len(entry) > 2 and entry[2] is not None:
            token, entry[2] = entry[2], None
            return token
    if isinstance(node, CommentedSeq) and node:
        if isinstance(node[-1], (CommentedMap, CommentedSeq)) and node[-1]:
            return _pop_trailing(node[-1])
        entry = node.ca.items.get(len(node) - 1)
        if entry and entry[0] is not None:
            token, entry[0] = entry[0], None
            return token
    return None


def _push_trailing(node: Any, key: Any, token: Any) -> None:
    if token is None:
        return
    value = node[key]
    if isinstance(value, (CommentedMap, CommentedSeq)) and value:
        _push_trailing(value, list(value)[-1] if isinstance(value, CommentedMap) else len(value) - 1, token)
    elif isinstance(node, CommentedMap):
        node.ca.items.setdefault(key, [None, None, None, None])[2] = token
    else:
        node.ca.items.setdefault(key, [None, None, None, None])[0] = token


def _child(node: Any, key: str | int, path: str) -> Any:
    if isinstance(key, int):
        if not isinstance(node, CommentedSeq) or key >= len(node):
            raise ValueError(f"{path}: index {key} is out of range (pulumi config set: array index out of range)")
        return node[key]
    if not isinstance(node, CommentedMap):
        raise ValueError(f"{path}: {key!r} is under a value that is not a map")
    if key not in node:
        token = _pop_trailing(node)
        node[key] = CommentedMap()
        _push_trailing(node, key, token)
    return node[key]


def _set(config: CommentedMap, path: str, value: Any) -> None:
    *parents, leaf = path_keys(f"{NAMESPACE}:{path}")
    node = config
    for key in parents:
        node = _child(node, key, path)
    if isinstance(leaf, int):
        if not isinstance(node, CommentedSeq) or leaf > len(node):
            raise ValueError(f"{path}: index {leaf} is out of range (pulumi config set: array index out of range)")
        if leaf == len(node):
            token = _pop_trailing(node)
            node.append(value)
            _push_trailing(node, leaf, token)
        else:
            node[leaf] = value
    elif leaf in node:
        node[leaf] = value
    else:
        token = _pop_trailing(node)
        node[leaf] = value
        _push_trailing(node, leaf, token)


def _remove(config: CommentedMap, path: str) -> None:
    *parents, leaf = path_keys(f"{NAMESPACE}:{path}")
    node = config
    for key in parents:
        if isinstance(key, int) and (not isinstance(node, CommentedSeq) or key >= len(node)):
            return
        if isinstance(key, str) and (not isinstance(node, CommentedMap) or key not in node):
            return
        node = node[key]
    if (isinstance(leaf, int) and isinstance(node, CommentedSeq) and leaf < len(node)) or (
        isinstance(leaf, str) and isinstance(node, CommentedMap) and leaf in node
    ):
        del node[leaf]


def _key_line(text: str, path: str) -> tuple[int, int] | None:
    """(line, column) of the key `path` (`autoscaling.<model>`) under `config:` in `text`."""
    node = yaml.compose(text)
    for key in ["config", *path_keys(f"{NAMESPACE}:{path}")]:
        if not isinstance(node, yaml.MappingNode):
            return None
        found = next(((k, v) for k, v in node.value if k.value == key), None)
        if found is None:
            return None
        key_node, node = found
    return key_node.start_mark.line, key_node.start_mark.column


def with_evidence(text: str, path: str, block: Sequence[str]) -> str:
    """`text` with the `# Evidence` block directly above the key `path` replaced by `block` (lines
    without their `# `), or added where there was none; other comments above it stay."""
    where = _key_line(text, path)
    if where is None:
        raise ValueError(f"no key {path} in the stack file to write its evidence above")
    line, column = where
    lines = text.splitlines(keepends=True)
    top = line
    while top > 0 and _COMMENT.match(lines[top - 1]):
        top -= 1
    start = next((i for i in range(top, line) if _EVIDENCE.match(lines[i])), line)
    indent = " " * column
    new = [f"{indent}# {block[0]}\n", *(f"{indent}#   {text_line}\n" for text_line in block[1:])]
    return "".join(lines[:start] + new + lines[line:])


def edited_text(path: Path, edits: Sequence[ConfigEdit], evidence_key: str, evidence: Sequence[str]) -> str:
    """The stack file's text after `edits` and the evidence block, checked: it loads as the
    program's settings and its config is exactly `edited_config` of the file's (else ValueError)."""
    original = path.read_text()
    y = _yaml()
    document = y.load(original)
    config = document["config"]
    for edit in edits:
        if isinstance(edit, ConfigRemove):
            _remove(config, edit.path)
        else:
            key, value = edit
            _set(config, key, stored_value(config_text(value)))
    out = io.StringIO()
    y.dump(document, out)
    text = with_evidence(out.getvalue(), evidence_key, evidence) if evidence else out.getvalue()
    written = yaml.safe_load(text)["config"]
    expected = edited_config(yaml.safe_load(original)["config"], list(edits))
    if written != expected:  # a layout this writer does not handle: refuse rather than write something else
        raise ValueError(f"{path}: the edited file would not hold what `pulumi config set --path` sets; not written")
    try:
        StackFile(path, written).settings()
    except SettingsError as exc:
        raise ValueError(f"{path}: would not deploy: {'; '.join(exc.problems)}; not written") from None
    return text


def write_stack(path: Path, edits: Sequence[ConfigEdit], evidence_key: str, evidence: Sequence[str]) -> None:
    """`edited_text` written over the stack file at once (a temporary file renamed over it)."""
    text = edited_text(path, edits, evidence_key, evidence)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as f:
        f.write(text)
    os.replace(temporary, path)


# What a plan and the evidence block its --write replaces are compared on: the traffic (traces,
# rate scale) and the search's size. Each flag with the value its absence means.
COMPARED_FLAGS = ("--trace", "--validate-trace", "--rate-scale", "--trials")


def recorded_values(command: str, flag: str) -> list[str]:
    """Every value `command` passes for `flag` (`--flag X` or `--flag=X`), in order."""
    tokens = shlex.split(command)
    values = [following for token, following in itertools.pairwise(tokens) if token == flag]
    return values + [t.removeprefix(flag + "=") for t in tokens if t.startswith(flag + "=")]


def evidence_check(
    recorded: Evidence | None, new: dict[str, list[str]], defaults: dict[str, str]
) -> tuple[list[str], str | None]:
    """One line per compared flag on which a plan differs from the evidence block it would
    replace, and why it must not replace it unforced (None: it may): a plan that ran fewer trials
    searched less, so its winner is weaker evidence than the one it would silently overwrite."""
    if recorded is None or recorded.command is None:
        return [], None
    lines, weaker = [], None
    for flag in COMPARED_FLAGS:
        default = [defaults[flag]] if flag in defaults else []
        before = recorded_values(recorded.command, flag) or default
        after = new.get(flag) or default
        if _normal(flag, before) == _normal(flag, after):
            continue
        lines.append(
            f"{flag} differs from the evidence it replaces: {' '.join(before) or 'none'} there, {' '.join(after) or 'none'} here"
        )
        if flag == "--trials" and _normal(flag, after) < _normal(flag, before):
            weaker = f"this plan runs {after[0]} trials, the evidence it would replace ran {before[0]}"
    return lines, weaker


NUMERIC_FLAGS: dict[str, Any] = {"--trials": int, "--rate-scale": float}


def _normal(flag: str, values: list[str]) -> Any:
    """Values compared as what they mean: numbers as numbers, traces (and a value that is not a
    number) as written."""
    parse = NUMERIC_FLAGS.get(flag)
    try:
        return [parse(v) for v in values] if parse else values
    except ValueError:
        return values
