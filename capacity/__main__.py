"""`python -m capacity <command>`: measure a vLLM replica, model it, simulate and tune its scaling.

Each command lives in a module exposing `add_arguments(parser)` and `run(args) -> int`; its
docstring's first line is the command's help. Register a command with one line in COMMANDS.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS: dict[str, str] = {
    "model": "capacity.cli.model",
    "serve": "capacity.cli.serve",
    "load": "capacity.cli.load",
    "collect": "capacity.cli.collect",
    "sweep": "capacity.cli.sweep",
    "recommend": "capacity.cli.recommend",
    "lab": "capacity.cli.lab",
    "simulate": "capacity.cli.simulate",
    "compare": "capacity.cli.compare",
    "tune": "capacity.cli.tune",
    "plan": "capacity.cli.plan",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """All commands, or (for a fast start) only `only` fully, the others by name."""
    parser = argparse.ArgumentParser(prog="python -m capacity", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name)
            continue
        module = importlib.import_module(module_name)
        help_line = (module.__doc__ or name).strip().splitlines()[0]
        command = sub.add_parser(name, help=help_line, description=module.__doc__)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    args = build_parser(chosen if chosen in COMMANDS else None).parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except ValueError as error:  # bad input: one clear line, no traceback
        print(f"python -m capacity {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
