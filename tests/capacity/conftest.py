import csv
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CALIBRATION_DIR = Path(os.environ.get("CALIBRATION_DIR", REPO.parent / "shared" / "calibration"))
CALIBRATION_CSV = CALIBRATION_DIR / "a10g-deepseek-r1-14b-awq-concurrency.csv"
# One recommended command as `recommend`, `sweep` and `lab` print it.
CONFIG_SET_LINE = re.compile(
    r"^pulumi config set --path 'autoscaling\.(?P<key>[\w-]+)\.(?P<path>[\w.]+)' (?P<value>\S+) -s (?P<stack>\S+)   # .+$"
)


@pytest.fixture(scope="session")
def calibration_rows() -> list[dict[str, float]]:
    with CALIBRATION_CSV.open() as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
