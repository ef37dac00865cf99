"""Run the OS package's promtool on rule groups and unit tests written to a temp folder.

promtool evaluates PromQL with Prometheus' own engine, so a query that parses here parses in
Prometheus, and a unit test proves what a real Prometheus returns for the given series.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

TIMEOUT_SECONDS = 60


# Where `make system-packages` unpacks Debian's `prometheus` package (never installed as a service)
CHECKOUT_TOOLS = Path(__file__).resolve().parents[2] / ".tools" / "bin"


def promtool() -> str:
    found = shutil.which("promtool") or shutil.which("promtool", path=str(CHECKOUT_TOOLS))
    if not found:  # a missing tool is a failure, never a skip (`make system-packages` unpacks it)
        raise FileNotFoundError("promtool not found: run `make system-packages` (or put promtool on PATH)")
    return found


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False
    )


def write_rules(groups: list[dict[str, Any]], folder: Path, name: str = "rules.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def check_rules(groups: list[dict[str, Any]], folder: Path) -> subprocess.CompletedProcess[str]:
    return _run("check", "rules", str(write_rules(groups, folder)), cwd=folder)


def parse_queries(queries: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    """Parse arbitrary PromQL by wrapping each query in a recording rule."""
    rules = [{"record": f"query_{i}", "expr": q} for i, q in enumerate(queries)]
    return check_rules([{"name": "queries", "rules": rules}], folder)


def run_rule_tests(
    groups: list[dict[str, Any]], tests: list[dict[str, Any]], folder: Path, interval: str = "15s"
) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` with `tests` (each: input_series plus alert/expr expectations)."""
    rules = write_rules(groups, folder)
    spec = {"rule_files": [rules.name], "evaluation_interval": interval, "tests": tests}
    test_file = folder / "tests.yaml"
    test_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    return _run("test", "rules", test_file.name, cwd=folder)
