"""Refactoring is invisible to a deployed stack: Pulumi identifies a resource by its URN (type
token, parent chain and logical name), so a changed URN would replace live infrastructure.
The snapshots were taken from the program before the `contract/` move; a deliberate new or
renamed resource updates them (`python -m tests.snapshots.update`) in the same commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import StackRun

SNAPSHOTS = Path(__file__).parent / "snapshots"


def snapshot(stack: str) -> set[str]:
    return set((SNAPSHOTS / f"urns-{stack}.txt").read_text().split())


@pytest.mark.parametrize("name", ["dev", "prod"])
def test_urns_match_the_snapshot(name: str, dev: StackRun, prod: StackRun) -> None:
    run = {"dev": dev, "prod": prod}[name]
    urns = {r.urn for r in run.resources}
    expected = snapshot(name)
    assert not urns - expected, f"new URNs: {sorted(urns - expected)}"
    assert not expected - urns, f"URNs gone: {sorted(expected - urns)}"
