"""Rewrite the URN snapshots from the current program: `python -m tests.snapshots.update`."""

from __future__ import annotations

from pathlib import Path

from tests.harness import run_program

HERE = Path(__file__).parent

if __name__ == "__main__":
    for stack in ("dev", "prod"):
        urns = sorted({r.urn for r in run_program(stack).resources})
        (HERE / f"urns-{stack}.txt").write_text("\n".join(urns) + "\n")
        print(f"{stack}: {len(urns)} URNs")
