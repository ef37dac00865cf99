"""`pulumi config set --path` and `pulumi config rm --path` on a stack's config, as the Pulumi
CLI does them (pulumi/pulumi sdk/go/common/resource/config: value.go, object.go, map.go), so a
printed command and the config the tools validate after it are the same edit."""

from __future__ import annotations

import copy
import itertools
import re
import shlex
from dataclasses import dataclass
from typing import Any

from .errors import NAMESPACE

_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def path_keys(path: str) -> list[str | int]:
    """A `pulumi config set --path` key, e.g. `models[0].engine.maxNumSeqs`, as map keys and list indexes."""
    return [name if name else int(index) for name, index in _PATH_PART.findall(path)]


def holds(node: Any, path: str) -> bool:
    """Does the raw config `node` (maps and lists as written) have a value at `path`?"""
    for key in path_keys(path):
        if not _holds(node, key):
            return False
        node = node[key]
    return True


@dataclass(frozen=True)
class ConfigRemove:
    """`pulumi config rm --path PATH`: a list element is deleted (the later ones shift down), a
    map key dropped; a path that does not exist is left alone."""

    path: str


# One `pulumi config` edit: (path, value) is `pulumi config set --path PATH VALUE`.
ConfigEdit = tuple[str, Any] | ConfigRemove


def edited_config(config: dict[str, Any], edits: list[ConfigEdit] | tuple[ConfigEdit, ...]) -> dict[str, Any]:
    """A copy of the stack's config (namespaced keys as in `Pulumi.<stack>.yaml`) after each edit
    of `edits`, keys under the program's namespace (e.g. `autoscaling.<model>.minReplicas`)."""
    config = copy.deepcopy(config)
    for edit in edits:
        if isinstance(edit, ConfigRemove):
            _remove_path(config, f"{NAMESPACE}:{edit.path}")
        else:
            path, value = edit
            # A scalar is stored as the printed command would store it; a whole list or map (the
            # explain tool's edits, never printed as a command) as it is.
            stored = value if isinstance(value, (list, dict)) else stored_value(config_text(value))
            _set_path(config, f"{NAMESPACE}:{path}", stored)
    return config


def config_text(value: Any) -> str:
    """A value as a `pulumi config set` command line spells it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def config_command(edit: ConfigEdit, stack: str) -> str:
    """The shell line that makes `edit` on `stack` (`pulumi config set --path` or `rm --path`)."""
    if isinstance(edit, ConfigRemove):
        return f"pulumi config rm --path '{edit.path}' -s {stack}"
    path, value = edit
    return f"pulumi config set --path '{path}' {shlex.quote(config_text(value))} -s {stack}"


def stored_value(text: str) -> bool | int | str:
    """What `pulumi config set --path` stores for `text`: booleans and integers typed, anything
    else (floats too) a string (pulumi/pulumi sdk/go/common/resource/config/value.go
    `coerceObject`); the settings then parse it as a deploy's program would."""
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _set_path(config: dict[str, Any], path: str, value: Any) -> None:
    """Pulumi's `--path` semantics on the stack's config: the first key holds the namespace
    (`inference-platform:models`), `.key` and `[i]` walk into it, missing maps are created."""
    keys = path_keys(path)
    node: Any = config
    for key, following in itertools.pairwise(keys):
        if isinstance(key, int):
            if not isinstance(node, list) or key > len(node):
                raise ValueError(f"{path}: index {key} is past the end of the list")
            if key == len(node):
                node.append([] if isinstance(following, int) else {})
        elif key not in node or not isinstance(node[key], (dict, list)):
            node[key] = [] if isinstance(following, int) else {}
        node = node[key]
    last = keys[-1]
    if isinstance(last, int) and last == len(node):
        node.append(value)
    else:
        node[last] = value


def _remove_path(config: dict[str, Any], path: str) -> None:
    """`pulumi config rm --path` on the stack's config (pulumi/pulumi sdk/go/common/resource/config
    map.go `Remove`, object.go `Delete`): the element or key goes, a missing one is no error."""
    *parents, last = path_keys(path)
    node: Any = config
    for key in parents:
        if not _holds(node, key):
            return
        node = node[key]
    if _holds(node, last):
        del node[last]


def _holds(node: Any, key: str | int) -> bool:
    if isinstance(key, int):
        return isinstance(node, list) and 0 <= key < len(node)
    return isinstance(node, dict) and key in node
