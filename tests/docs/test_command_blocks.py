"""Every shell block a page tells the user to run is executed by a test or, when it needs what the suite
has not (an AWS account, a cluster, a GPU, a database), is marked so and parses as bash."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.docs.pages import MARKER, REPO, blocks, pages, read

# slow: minutes of CPU, beyond a suite run (a plan, a day replayed); its result is what another test checks
NEEDS = {"aws", "cluster", "gpu", "database", "registry", "slow"}  # registry: a container registry reachable
SHELL_BLOCKS = [b for page in pages() for b in blocks(page) if b.is_shell]


def _id(block) -> str:
    return f"{block.page}:{block.line}"


def test_the_pages_have_shell_blocks_to_check():
    assert len(SHELL_BLOCKS) >= 20


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_id)
def test_every_shell_block_is_run_by_a_test_or_marked_with_what_it_needs(block):
    assert block.marker is not None, f"{_id(block)}: no <!-- runs: ... --> or <!-- needs: ... --> above it"
    kind, value = block.marker
    if kind == "sketch":
        return
    if kind == "needs":
        assert set(value.split(",")) <= NEEDS, f"{_id(block)}: needs one of {sorted(NEEDS)}"
        return
    assert kind == "runs", f"{_id(block)}: a shell block is run or needs something, not {kind}"
    path, _, test = value.partition("::")
    source = REPO / path
    assert source.is_file() and re.search(rf"^def {re.escape(test)}\(", source.read_text(), re.M), (
        f"{_id(block)}: {value} is not a test"
    )


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_id)
def test_every_shell_block_parses_as_bash(block):
    run = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True, timeout=10, check=False)
    assert run.returncode == 0, f"{_id(block)}: {run.stderr}"


def test_every_marked_output_names_the_test_that_regenerates_it():
    marked = [
        (page, m[2]) for page in pages() for m in map(MARKER.match, read(page).splitlines()) if m and m[1] == "output"
    ]
    assert marked
    for page, value in marked:
        path, _, test = value.partition("::")
        assert re.search(rf"^def {re.escape(test)}\(", (REPO / path).read_text(), re.M), f"{page}: {value}"
