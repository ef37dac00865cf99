"""The one way to a stack's validated settings: from a stack name or `Pulumi.<stack>.yaml`
path (the capacity tooling, the tests), or from the config the Pulumi engine hands a program.
Both end in `parse()`, so a stack file means the same thing to the program and to every tool."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import StackSettings, parse
from .errors import NAMESPACE, SettingsError
from .observability import plaintext_webhook_problems

# Namespaces a stack file legitimately holds besides the program's own.
OTHER_NAMESPACES = ("aws", "pulumi", "kubernetes", "eks", "random")


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


def misspelled_namespaces(flat: dict[str, Any]) -> list[str]:
    """Keys whose namespace nearly matches the program's are silently ignored by Pulumi: say so."""
    problems = []
    for key in flat:
        namespace, _, name = key.partition(":")
        if namespace == NAMESPACE or namespace in OTHER_NAMESPACES:
            continue
        if difflib.get_close_matches(namespace, [NAMESPACE], n=1, cutoff=0.8):
            problems.append(
                f"{key} is ignored: its namespace {namespace!r} is not {NAMESPACE!r}; did you mean {NAMESPACE}:{name}?"
            )
    return problems


def from_engine_config(flat: dict[str, Any], is_secret: Callable[[str], bool]) -> StackSettings:
    """Validate the config as the engine hands it to a program (`ns:key` -> value or JSON),
    every problem at once: misspelled namespaces, the settings, and the rules only the engine
    can check (which keys were set as secrets: `is_secret`)."""
    problems = misspelled_namespaces(flat)
    region = flat.get("aws:region")
    try:
        settings = parse(namespace_config(flat), aws_region=region if isinstance(region, str) else None)
    except SettingsError as exc:
        raise SettingsError([*problems, *exc.problems]) from None
    problems += plaintext_webhook_problems(settings.observability, is_secret)
    if problems:
        raise SettingsError(problems)
    return settings


# A checkout's root (it holds Pulumi.yaml): a stack name is also looked up there, so the tools find
# the repository's stacks from any directory. An installed package has no Pulumi.yaml beside it,
# so an install never looks inside site-packages.
CHECKOUT = Path(__file__).resolve().parents[2]


def is_stack_path(stack: str | Path) -> bool:
    """`Pulumi.prod.yaml`, `/x/Pulumi.dev.yaml`, `stacks/dev.yml` are paths; `dev` is a name."""
    text = str(stack)
    return isinstance(stack, Path) or text.endswith((".yaml", ".yml")) or "/" in text or "\\" in text


def stack_dirs(stack_dir: Path | None = None) -> list[Path]:
    """Where a stack name is looked up: `stack_dir` alone when given, else the working directory
    and then the checkout the tools run from (if they run from one)."""
    if stack_dir is not None:
        return [Path(stack_dir)]
    here = [Path(".")]
    if (CHECKOUT / "Pulumi.yaml").is_file() and Path.cwd().resolve() != CHECKOUT:
        here.append(CHECKOUT)
    return here


def find_stack_file(stack: str | Path, root: Path | None = None) -> Path:
    """The one stack resolver: a path to a stack file is taken as it is (relative to the working
    directory); a name (`dev`) is `Pulumi.dev.yaml` in `root` (`--stack-dir`) when given, else in
    the working directory, else in the checkout."""
    if is_stack_path(stack):
        path = Path(stack)
        if not path.is_file():
            raise ValueError(f"stack file {path} does not exist")
        return path
    name = str(stack)
    dirs = stack_dirs(root)
    for folder in dirs:
        if (folder / f"Pulumi.{name}.yaml").is_file():
            return folder / f"Pulumi.{name}.yaml"
    where = " or ".join(str(folder / f"Pulumi.{name}.yaml") for folder in dirs)
    raise ValueError(
        f"stack {name!r}: {where} does not exist (pass --stack-dir DIR, or --stack as a Pulumi.<stack>.yaml path)"
    )


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
        config = dict(self.config)
        if autoscaling is not None:
            config[f"{NAMESPACE}:autoscaling"] = autoscaling
        return from_engine_config(config, self.is_secret)

    def is_secret(self, key: str) -> bool:
        """A key set with `pulumi config set --secret` holds `secure:` values in the file."""

        def secure(value: Any) -> bool:
            if isinstance(value, dict):
                return set(value) == {"secure"} or any(secure(v) for v in value.values())
            return isinstance(value, list) and any(secure(v) for v in value)

        return secure(self.config.get(key))

    def engine_config(self) -> dict[str, str]:
        """The config as the engine hands it to a program: objects as JSON strings."""
        return {key: value if isinstance(value, str) else json.dumps(value) for key, value in self.config.items()}


def read_stack(stack: str | Path, root: Path | None = None) -> StackFile:
    path = find_stack_file(stack, root)
    document = yaml.safe_load(path.read_text()) or {}
    if not isinstance(document, dict) or not isinstance(document.get("config") or {}, dict):
        raise ValueError(f"stack file {path}: expected a mapping with a 'config:' mapping")
    return StackFile(path, dict(document.get("config") or {}))


def load_stack(stack: str | Path, root: Path | None = None, autoscaling: dict[str, Any] | None = None) -> StackSettings:
    """Stack name or path -> validated settings (raises SettingsError naming every bad key)."""
    return read_stack(stack, root).settings(autoscaling)
