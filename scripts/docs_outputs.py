"""Re-record the outputs the docs quote from commands too slow for a suite run (from 20 s to minutes of
CPU each): every entry of docs/examples/outputs/outputs.yaml is run from the project root as the
page shows it, its stdout written to docs/examples/outputs/<name>.txt, and the digest of the stack
settings it ran on stored beside it.

    .venv/bin/python scripts/docs_outputs.py            # all of them (about 15 minutes on 2 cores)
    .venv/bin/python scripts/docs_outputs.py NAME ...   # only these
    .venv/bin/python scripts/docs_outputs.py --check    # exit 1 naming the outputs whose stack changed

tests/docs/test_recorded_outputs.py fails when a stack's settings no longer digest to what an output
ran on (a re-plan, a new price, another start-up figure: anything that can move a quoted number), and
when a page quotes a line its recorded output does not print: re-record, then make the page follow.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capacity.planning.stack import read_stack  # noqa: E402

OUTPUTS = ROOT / "docs" / "examples" / "outputs"
MANIFEST = OUTPUTS / "outputs.yaml"
# What a simulation reads of a stack: the pools and nodes, the predictors, the models, their
# policies, the planning figures (start-up, prices) and the scrape interval the triggers sample at.
SIMULATED = ("gpu_capacity", "serving", "models", "autoscaling", "capacity_planning", "observability")


def settings_digest(stack: str, root: Path = ROOT) -> str:
    """A short digest of what a simulation reads of the stack's settings (not its comments)."""
    settings = read_stack(stack, root).settings().model_dump(mode="json")
    simulated = {key: settings[key] for key in SIMULATED}
    return hashlib.sha256(json.dumps(simulated, sort_keys=True).encode()).hexdigest()[:16]


def manifest() -> dict[str, dict[str, Any]]:
    return dict(yaml.safe_load(MANIFEST.read_text()))


def stale(root: Path = ROOT) -> list[str]:
    """The outputs whose stack's settings changed since they were recorded."""
    return [
        name
        for name, entry in manifest().items()
        if entry.get("stack") and settings_digest(entry["stack"], root) != entry["settings"]
    ]


def record(name: str, entry: dict[str, Any]) -> None:
    words = shlex.split(entry["command"])
    assert words[0] == "python", f"{name}: a recorded command starts with `python`"
    with (OUTPUTS / f"{name}.txt").open("w") as out:
        subprocess.run([sys.executable, *words[1:]], cwd=ROOT, stdout=out, check=True)
    if entry.get("stack"):
        entry["settings"] = settings_digest(entry["stack"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="outputs to re-record (default: all)")
    parser.add_argument("--check", action="store_true", help="only name the outputs whose stack changed")
    args = parser.parse_args()
    entries = manifest()
    if args.check:
        names = stale()
        print("\n".join(f"stale: {name}" for name in names) or "every recorded output is of its stack as it is")
        return 1 if names else 0
    unknown = sorted(set(args.names) - set(entries))
    if unknown:
        parser.error(f"unknown outputs {unknown}: one of {sorted(entries)}")
    for name in args.names or entries:
        print(f"recording {name}: {entries[name]['command']}", file=sys.stderr)
        record(name, entries[name])
        MANIFEST.write_text(HEADER + yaml.safe_dump(entries, sort_keys=True, width=1000))
    return 0


HEADER = (
    "# Recorded by scripts/docs_outputs.py: each output's command and the digest of the stack settings it ran on.\n"
)

if __name__ == "__main__":
    sys.exit(main())
