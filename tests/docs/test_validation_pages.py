"""The Validation pages' tables are what their benchmarks give: the rows a suite run can afford are
recomputed, the rest read from the file the benchmark writes (each page names the command)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from typing import Any

import pytest
import yaml

from capacity.engine.fit import all_points, load_scenarios, read_sweep, scenario_points, summary
from capacity.engine.profiles import CALIBRATED
from capacity.engine.trust import ACCURACY_FILE
from tests.docs.pages import REPO, blocks, quoted, read, table_row

CALIBRATION = REPO.parent / "shared" / "calibration"
SWEEP = CALIBRATION / "a10g-deepseek-r1-14b-awq-concurrency.csv"


@pytest.fixture(scope="module")
def accuracy() -> dict[str, Any]:
    """benchmarks/engine_accuracy.py's summaries: in-sample and validation recomputed now (about a
    second), the leave-one-source-out ones (minutes) from the accuracy file its --write stores."""
    points = all_points(read_sweep(SWEEP), load_scenarios(REPO / "benchmarks/scenarios/public"), CALIBRATED)
    stored = yaml.safe_load(ACCURACY_FILE.read_text())
    return {
        "in_sample": summary(points),
        "a10g_sweep": summary([p for p in points if p.source == "a10g-sweep"]),
        "validation": summary(scenario_points(load_scenarios(REPO / "benchmarks/scenarios/validation"), CALIBRATED)),
        "stored": stored,
    }


def _row(label: str, s: dict[str, float], regimes: bool = True) -> str:
    light = f"{s['light_median']:.1%}" if regimes else ""
    saturated = f"{s['saturated_median']:.1%}" if regimes else ""
    return table_row(label, f"{s['points']:.0f}", f"{s['median']:.1%}", light, saturated, f"{s['worst']:.1%}")


def test_the_accuracy_file_is_of_the_calibration_the_code_runs(accuracy):
    stored = accuracy["stored"]
    assert stored["calibration"] == pytest.approx(CALIBRATED.as_vector())
    assert stored["in_sample"] == pytest.approx(accuracy["in_sample"]), (
        "stale: run .venv/bin/python benchmarks/engine_accuracy.py --write"
    )


def test_the_engine_accuracy_table_is_the_benchmarks(accuracy):
    stored = accuracy["stored"]
    table = "\n".join(
        [
            "| | points | median | light median | saturated median | worst |",
            "|---|---|---|---|---|---|",
            _row("in-sample (fit set)", accuracy["in_sample"]),
            _row("leave-one-source-out (each publisher predicted by a fit on the others)", stored["loso"]),
            _row("A10G calibration sweep, in-sample", accuracy["a10g_sweep"], regimes=False),
            _row("A10G calibration sweep, held out", stored["loso_a10g_sweep"], regimes=False),
            _row(
                "validation: published, not in `../shared`, never fitted (`benchmarks/scenarios/validation/`)",
                accuracy["validation"],
            ),
        ]
    )
    assert quoted("validation/engine-accuracy.md", "test_the_engine_accuracy_table_is_the_benchmarks") == [table]
    assert f"({accuracy['validation']['within_25']:.0%} of its points within 25%)" in read(
        "validation/engine-accuracy.md"
    )


def test_the_prefix_cache_page_quotes_what_the_benchmark_prints():
    page = "validation/prefix-cache.md"
    (command,) = [b.text for b in blocks(page) if b.is_shell]
    words = shlex.split(command)
    assert words[:2] == [".venv/bin/python", "benchmarks/prefix_cache.py"]
    run = subprocess.run(
        [sys.executable, *words[1:]], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr
    assert quoted(page, "test_the_prefix_cache_page_quotes_what_the_benchmark_prints") == [run.stdout.rstrip("\n")]
