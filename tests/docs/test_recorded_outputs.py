"""Outputs of commands too slow for a suite run (from 20 s to minutes of CPU) are quoted from what the
command printed, committed under docs/examples/outputs/ with the command and the digest of the stack
settings it ran on (outputs.yaml; `.venv/bin/python scripts/docs_outputs.py [NAME]` re-records them).
A stack change that could move a quoted number fails here until the outputs are re-recorded; the
recorded command is the page's (and, where the output names its command, `made by:` is too); every
line a page quotes under `<!-- output: ...::<test> -->` is a line of its recorded output."""

from __future__ import annotations

import re
import shlex

import yaml

from scripts.docs_outputs import manifest, stale
from tests.docs.pages import REPO, blocks, expand, joined, quoted

OUTPUTS = REPO / "docs" / "examples" / "outputs"


def recorded(name: str) -> str:
    return (OUTPUTS / f"{name}.txt").read_text()


def recorded_command(name: str) -> str:
    """The command outputs.yaml records for an output, without whitespace (as `shown` gives a page's)."""
    return "".join(shlex.split(manifest()[name]["command"]))


def test_every_recorded_output_is_of_its_stack_as_it_is():
    assert stale(REPO) == [], "re-record them: .venv/bin/python scripts/docs_outputs.py NAME ..., then update the pages"


def test_every_recorded_output_has_its_command_and_every_entry_its_output():
    assert sorted(p.stem for p in OUTPUTS.glob("*.txt")) == sorted(manifest())


def made_by(text: str) -> str:
    """The command a capacity output says made it (`made by: python -m capacity ... (seed S, DATE)`),
    without whitespace: the tables fold it at their width, inside a long word too."""
    found = re.search(r"^made by: (.+?) \(seed \d+, [^)]+\)$", text, re.M | re.S)
    assert found, "no `made by:` line"
    return "".join(found[1].split())


def argv(page: str, command: str) -> list[str]:
    """A page's command (the first line of its shell blocks running `command`) as `python -m capacity
    ...` words."""
    lines = [line for b in blocks(page) if b.is_shell for line in joined(b.text)]
    (line,) = [line for line in lines if f" -m capacity {command} " in line][:1]
    return expand(page, "python -m capacity " + line.split(" -m capacity ", 1)[1])


def shown(page: str, command: str) -> str:
    """The page's command without whitespace, as `made_by` gives a recorded one."""
    return "".join(argv(page, command))


def lines_not_in(output: str, quotes: list[str]) -> list[str]:
    """The quoted lines the output does not print (trailing blanks aside: rich pads its tables)."""
    printed = {line.rstrip() for line in output.splitlines()}
    return [line for quote in quotes for line in quote.splitlines() if line.rstrip() not in printed]


def test_the_planners_band_is_what_plan_printed():
    page, output = "concepts/planner.md", recorded("plan-dev-band")
    assert made_by(output) == shown(page, "plan") == recorded_command("plan-dev-band")
    assert lines_not_in(output, quoted(page, "test_the_planners_band_is_what_plan_printed")) == []


def test_the_schedule_page_quotes_what_schedule_printed():
    page, output = "tasks/schedule.md", recorded("schedule-dev-diurnal")
    assert made_by(output) == shown(page, "schedule --stack dev") == recorded_command("schedule-dev-diurnal")
    assert lines_not_in(output, quoted(page, "test_the_schedule_page_quotes_what_schedule_printed")) == []


def test_the_capacity_loops_explain_rows_are_what_explain_printed():
    page, output = "tasks/capacity-loop.md", recorded("explain-prod-qwen25-14b-awq")
    assert made_by(output) == shown(page, "explain") == recorded_command("explain-prod-qwen25-14b-awq")
    quotes = quoted(page, "test_the_capacity_loops_explain_rows_are_what_explain_printed")
    assert lines_not_in(output, quotes) == []


def test_the_profile_page_quotes_what_profile_printed():
    """`profile` prints no `made by:`; the profile it writes records its command, which must be the
    page's, and the recorded output must say it wrote that profile."""
    page, output = "tasks/sweep-and-profile.md", recorded("profile-from-sweep")
    written = re.search(r"^wrote (\S+) \(trust: measured\)$", output, re.M)
    assert written, "the recorded output wrote no profile"
    profile = yaml.safe_load((REPO / written[1]).read_text())
    assert (
        "".join(profile["command"].split()) == "".join(argv(page, "profile")) == recorded_command("profile-from-sweep")
    )
    assert lines_not_in(output, quoted(page, "test_the_profile_page_quotes_what_profile_printed")) == []


def _compared(output: str, words: list[str]) -> list[str]:
    """What of a `compare` command its output does not show: it prints no `made by:`, but its title
    names the trace and its first column each policy file (both folded at the table's width)."""
    title = "".join(output.split("┏")[0].split())
    rows = "".join(line.split("│")[1].strip() for line in output.splitlines() if line.startswith("│"))

    def values(flag: str) -> list[str]:
        return [words[i + 1] for i, word in enumerate(words) if word == flag]

    return [t for t in values("--trace") if t not in title] + [p for p in values("--policy") if p not in rows]


def test_the_lever_tables_are_what_compare_printed():
    page = "tasks/capacity-loop.md"
    day5, stretched = recorded("compare-prod-levers-day5"), recorded("compare-prod-levers-stretched")
    words = argv(page, "compare")
    at = words.index("--trace") + 1
    on_thursday = [*words[:at], *expand(page, '"$THU"'), *words[at + 1 :]]
    assert "".join(words) == recorded_command("compare-prod-levers-day5")
    assert "".join(on_thursday) == recorded_command("compare-prod-levers-stretched")
    assert _compared(day5, words) == [] and _compared(stretched, on_thursday) == []
    first, second = quoted(page, "test_the_lever_tables_are_what_compare_printed")
    assert lines_not_in(day5, [first]) == [] and lines_not_in(stretched, [second]) == []


def test_the_capacity_loops_cron_window_is_what_schedule_printed():
    page, output = "tasks/capacity-loop.md", recorded("schedule-prod-days")
    assert made_by(output) == shown(page, "schedule") == recorded_command("schedule-prod-days")
    assert lines_not_in(output, quoted(page, "test_the_capacity_loops_cron_window_is_what_schedule_printed")) == []
