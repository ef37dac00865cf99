"""The one way to a stack's validated settings: from a stack name or `Pulumi.<stack>.yaml`
path (the capacity tooling, the tests), or from the config the Pulumi engine hands a program.
Both end in `parse()`, so a stack file means the same thing to the program and to every tool."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import StackSettings, parse
from .errors import NAMESPACE, SettingsError
from .observability import plaintext_webhook_problems


def namespace_config(flat: dict[str, Any]) -> dict[str, Any]:
    """`{"inference-platform:network": "<json>", "aws:region": ...}` -> `{"network": {...}}`."""
    raw: dict[str, Any] = {}
    for full_key, value in flat.items():
        namespace, _, key = full_key.partition(":")
        if namespace != NAMESPACE:
            continue
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass  # a plain string value such as `environment: dev`
        raw[key] = value
    return raw


def from_engine_config(flat: dict[str, Any], is_secret: Callable[[str], bool]) -> StackSettings:
    """Validate the config as the engine hands it to a program (`ns:key` -> value or JSON),
    plus the rules only the engine can check: which keys were set as secrets (`is_secret`)."""
    settings = parse(namespace_config(flat))
    problems = plaintext_webhook_problems(settings.observability, is_secret)
    if problems:
        raise SettingsError(problems)
    return settings


def find_stack_file(stack: str | Path, root: Path = Path(".")) -> Path:
    """A stack name (`prod` -> `<root>/Pulumi.prod.yaml`) or a path to a stack file."""
    text = str(stack)
    path = Path(text) if text.endswith((".yaml", ".yml")) else Path(root) / f"Pulumi.{text}.yaml"
    if not path.is_file():
        raise ValueError(f"stack file {path} does not exist (pass a stack name like 'dev' or a Pulumi.<stack>.yaml path)")
    return path


@dataclass(frozen=True)
class StackFile:
    """One `Pulumi.<stack>.yaml` as written: its `config:` mapping, validated on demand."""

    path: Path
    config: dict[str, Any]

    @property
    def name(self) -> str:
        return self.path.stem.removeprefix("Pulumi.")

    def settings(self, autoscaling: dict[str, Any] | None = None) -> StackSettings:
        """The validated settings; `autoscaling` replaces the file's section (a policy file, a
        tuning candidate) and is held to every rule the stack file is."""
        raw = namespace_config(self.config)
        if autoscaling is not None:
            raw["autoscaling"] = autoscaling
        return parse(raw)

    def engine_config(self) -> dict[str, str]:
        """The config as the engine hands it to a program: objects as JSON strings."""
        return {key: value if isinstance(value, str) else json.dumps(value) for key, value in self.config.items()}


def read_stack(stack: str | Path, root: Path = Path(".")) -> StackFile:
    path = find_stack_file(stack, root)
    document = yaml.safe_load(path.read_text()) or {}
    if not isinstance(document, dict) or not isinstance(document.get("config") or {}, dict):
        raise ValueError(f"stack file {path}: expected a mapping with a 'config:' mapping")
    return StackFile(path, dict(document.get("config") or {}))


def load_stack(stack: str | Path, root: Path = Path("."), autoscaling: dict[str, Any] | None = None) -> StackSettings:
    """Stack name or path -> validated settings (raises SettingsError naming every bad key)."""
    return read_stack(stack, root).settings(autoscaling)
