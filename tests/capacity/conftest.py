import csv
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CALIBRATION_DIR = Path(os.environ.get("CALIBRATION_DIR", REPO.parent / "shared" / "calibration"))
CALIBRATION_CSV = CALIBRATION_DIR / "a10g-deepseek-r1-14b-awq-concurrency.csv"


@pytest.fixture(scope="session")
def calibration_rows() -> list[dict[str, float]]:
    with CALIBRATION_CSV.open() as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
