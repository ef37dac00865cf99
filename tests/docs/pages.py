"""Read the docs site's pages as the tests that keep them true need them: a page's text, its fenced
blocks with the marker comment above each, and one `python -m capacity <name>` command block.

A shell block a page tells the user to run carries a marker on the line above its fence:
`<!-- runs: tests/<file>.py::<test> -->` (that test executes it, read from the page) or
`<!-- needs: aws|cluster|gpu|database -->` (it needs what the suite has not: syntax-checked only) or
`<!-- sketch: placeholders -->` (a template with `...` or UPPER-CASE placeholders: syntax-checked only).
A quoted output (a fenced block, or a Markdown table) carries `<!-- output: tests/<file>.py::<test> -->`
on the line above it: that test regenerates it (`quoted` reads it) and fails when the page differs.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
SHELL = ("bash", "sh", "console", "shell")
MARKER = re.compile(r"^<!--\s*(runs|needs|output|sketch):\s*(.+?)\s*-->$")
FENCE = re.compile(r"^(\s*)(`{3,})(\w*)")


@dataclass(frozen=True)
class Block:
    page: str  # path under docs/ ("tasks/schedule.md"), or "README.md"
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    marker: tuple[str, str] | None  # ("runs", "tests/...::test") / ("needs", "aws") / ("output", ...)

    @property
    def is_shell(self) -> bool:
        return self.language in SHELL


def path_of(page: str) -> Path:
    return REPO / page if page == "README.md" else DOCS / page


def read(page: str) -> str:
    return path_of(page).read_text()


def pages() -> list[str]:
    """Every hand-written or generated page of the site, and the README."""
    return ["README.md", *sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))]


def blocks(page: str) -> list[Block]:
    """The fenced blocks of a page, in order, each with the marker comment right above it."""
    lines = read(page).splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, language = opening.groups()
        end = next(
            (
                j
                for j in range(i + 1, len(lines))
                if lines[j].strip().startswith(fence) and not lines[j].strip()[len(fence) :].strip()
            ),
            len(lines),
        )
        body = "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end])
        above = lines[i - 1].strip() if i else ""
        marker = MARKER.match(above)
        found.append(Block(page, i + 1, language, body, (marker[1], marker[2]) if marker else None))
        i = end + 1
    return found


def joined(text: str) -> list[str]:
    """A block's commands, one per entry, continuation lines joined."""
    return [
        line for line in text.replace("\\\n", " ").splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


def capacity_command(page: str, name: str) -> list[str]:
    """The page's `.venv/bin/python -m capacity <name>` command, joined over its continuation lines
    and split as the shell splits it (the first one, when a page shows several)."""
    for block in blocks(page):
        for line in joined(block.text):
            words = shlex.split(line, comments=True)
            if "..." in words:  # a sketch's placeholder, not a command to run
                continue
            if words[:4] == [".venv/bin/python", "-m", "capacity", name]:
                return words
    raise AssertionError(f"no `.venv/bin/python -m capacity {name}` command block in {page}")


def quoted(page: str, test: str) -> list[str]:
    """The outputs a page quotes under `<!-- output: ...::<test> -->` markers, in order: a fenced
    block's text, or the Markdown table (the lines up to the next blank one) right below the marker."""
    lines = read(page).splitlines()
    found: list[str] = []
    for i, line in enumerate(lines):
        marker = MARKER.match(line.strip())
        if not (marker and marker[1] == "output" and marker[2].endswith(f"::{test}")):
            continue
        opening = FENCE.match(lines[i + 1])
        if opening:
            (block,) = [b for b in blocks(page) if b.line == i + 2]
            found.append(block.text)
            continue
        end = next((j for j in range(i + 1, len(lines)) if not lines[j].strip()), len(lines))
        found.append(textwrap.dedent("\n".join(lines[i + 1 : end])))
    assert found, f"{page}: no <!-- output: ...::{test} --> marker"
    return found


def table_row(*cells: str) -> str:
    """One Markdown table row as the pages write it (an empty cell is `| |`)."""
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"


def expand(page: str, words: str) -> list[str]:
    """Shell words as a user's shell splits and expands them, with the variables the page's own
    blocks assign (`DAYS='rates:...'`)."""
    lines = [line for b in blocks(page) if b.is_shell for line in joined(b.text)]
    assignments = [line.strip() for line in lines if re.match(r"^\s*[A-Z]+=", line)]
    script = "\n".join([*assignments, f"printf '%s\\0' {words}"])
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=10, check=True)
    return run.stdout.split("\0")[:-1]
