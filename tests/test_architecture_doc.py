"""docs/architecture.md stays true: every file its tree names exists where it says, and every
module of contract/, capacity/ and components/ is named there (a new module gets its line)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
MAPPED = ("contract", "capacity", "components")
# An entry: a folder (`name/`) or a file (`name.py`, `name.yaml`); the description follows 2+ spaces.
ENTRY = re.compile(r"^[\w.-]+(/|\.py|\.yaml|\.json)$")


def tree_block() -> list[str]:
    text = DOC.read_text()
    section = text.split("## The tree", 1)[1]
    return section.split("```", 2)[1].splitlines()


def named_paths() -> set[str]:
    """Every path the tree names: entries before a line's description, nested by indentation."""
    parents: list[tuple[int, str]] = []  # (indent, folder path)
    found: set[str] = set()
    for line in tree_block():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        entries = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0].split()
        if not all(ENTRY.match(e) for e in entries):
            continue  # a description continued from the line above
        while parents and parents[-1][0] >= indent:
            parents.pop()
        base = parents[-1][1] if parents else ""
        for entry in entries:
            found.add(base + entry)
        folders = [e for e in entries if e.endswith("/")]
        if len(folders) == 1 and len(entries) == 1:
            parents.append((indent, base + folders[0]))
    return found


def modules() -> set[str]:
    return {
        str(p.relative_to(ROOT))
        for top in MAPPED
        for p in (ROOT / top).rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }


def test_every_path_the_architecture_tree_names_exists():
    missing = sorted(p for p in named_paths() if not (ROOT / p.rstrip("/")).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_module_is_named_in_the_architecture_tree():
    unnamed = sorted(modules() - named_paths())
    assert not unnamed, f"docs/architecture.md's tree does not name: {unnamed}"
