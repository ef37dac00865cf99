"""The stack every command reads: `--stack` (a name or a stack file path) and `--stack-dir`,
resolved by the one resolver (contract.settings.stack_file.find_stack_file); `--profiles-dir`,
where measured profiles are found besides the shipped ones."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from capacity.cli import DEFAULT_STACK
from capacity.engine.measured import PROFILES_DIR_ENV
from contract.settings.stack_file import find_stack_file

STACK_HELP = "stack name (Pulumi.<stack>.yaml in --stack-dir, else here, else in the checkout) or a stack file path"


def add_stack_arguments(
    parser: argparse.ArgumentParser,
    default: str | None = DEFAULT_STACK,
    what: str = "",
    profiles: bool = True,
    required: bool = False,
) -> None:
    """`--stack/-s` and `--stack-dir` (and `--profiles-dir` when the command reads profiles);
    `what` says what the command does with the stack."""
    parser.add_argument(
        "--stack",
        "-s",
        default=None if required else default,
        required=required,
        help=STACK_HELP + (f"; {what}" if what else "") + ("" if default or required else " (default: none)"),
    )
    parser.add_argument(
        "--stack-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder holding the Pulumi.<stack>.yaml files a stack name is looked up in (default: here, else the checkout)",
    )
    if profiles:
        add_profiles_dir_argument(parser)


def stack_file(args: argparse.Namespace) -> Path:
    """The stack file `--stack` names (one clear line when it does not exist)."""
    if args.stack_dir is not None and not Path(args.stack_dir).is_dir():
        raise ValueError(f"--stack-dir {args.stack_dir} is not a directory")
    return find_stack_file(args.stack, args.stack_dir)


def profile_help(what: str = "engine profile") -> str:
    """`--profile`'s help: every name it takes, the measured profiles (shipped and --profiles-dir's) too."""
    from capacity.engine import profile_names  # the engine loads only for a command that names profiles

    return f"{what}, one of: {', '.join(profile_names())} (measured profiles in --profiles-dir too)"


def add_profiles_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profiles-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"folder of measured profiles, looked up by name before the shipped ones (default: ${PROFILES_DIR_ENV} "
        "if set, else the shipped ones only)",
    )


@contextmanager
def profiles_dir(args: argparse.Namespace) -> Iterator[None]:
    """While a command runs, `--profiles-dir` is where measured profiles are found (and, for
    `profile --from-sweep`, written); the environment carries it to the worker processes."""
    folder = getattr(args, "profiles_dir", None)
    if folder is None:
        yield
        return
    if Path(folder).exists() and not Path(folder).is_dir():
        raise ValueError(f"--profiles-dir {folder} is not a directory")
    before = os.environ.get(PROFILES_DIR_ENV)
    os.environ[PROFILES_DIR_ENV] = str(folder)
    try:
        yield
    finally:
        if before is None:
            del os.environ[PROFILES_DIR_ENV]
        else:
            os.environ[PROFILES_DIR_ENV] = before
