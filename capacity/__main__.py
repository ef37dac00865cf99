"""Measure a vLLM replica, model it, and simulate and tune its scaling, from the stack's own settings.

Each command lives in a module exposing `add_arguments(parser)` and `run(args) -> int`; its
docstring's first line is the command's help. Register a command with one line in COMMANDS.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from capacity.cli.help import HelpFormatter

COMMANDS: dict[str, str] = {
    "model": "capacity.cli.model",
    "serve": "capacity.cli.serve",
    "load": "capacity.cli.load",
    "collect": "capacity.cli.collect",
    "history": "capacity.cli.history",
    "sweep": "capacity.cli.sweep",
    "recommend": "capacity.cli.recommend",
    "lab": "capacity.cli.lab",
    "simulate": "capacity.cli.simulate",
    "compare": "capacity.cli.compare",
    "tune": "capacity.cli.tune",
    "plan": "capacity.cli.plan",
    "plan-workers": "capacity.cli.plan_workers",
    "schedule": "capacity.cli.schedule",
    "explain": "capacity.cli.explain",
    "profile": "capacity.cli.profile",
}


def _prog() -> str:
    """`capacity` when run as the installed command, `python -m capacity` otherwise."""
    name = Path(sys.argv[0]).name
    return "python -m capacity" if name in ("__main__.py", "-c", "") else name


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """All commands, or (for a fast start) only `only` fully, the others by name."""
    parser = argparse.ArgumentParser(
        prog=_prog(), description=__doc__.splitlines()[0], epilog="Run a command with --help for its options."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name)
            continue
        module = importlib.import_module(module_name)
        help_line = (module.__doc__ or name).strip().splitlines()[0]
        command = sub.add_parser(name, help=help_line, description=module.__doc__, formatter_class=HelpFormatter)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    try:
        parser = build_parser(chosen if chosen in COMMANDS else None)
    except ModuleNotFoundError as missing:  # installed without the tools' extra
        print(
            f"{_prog()}: {missing.name} is not installed: pip install 'inference-platform-tools[capacity]'",
            file=sys.stderr,
        )
        return 2
    args = parser.parse_args(argv)
    from capacity.cli.stack_args import profiles_dir  # after the check above: it needs the tools' extra

    args._argv = list(argv)  # the command line, for the reports that record how they were made
    try:
        with profiles_dir(args):
            return int(args._run(args) or 0)
    except ValueError as error:  # bad input: one clear line, no traceback
        print(f"{parser.prog} {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C is how a user stops a command; what it started is already stopped
        print(f"{parser.prog} {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
