import csv
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres import find_bin_dir, missing_binaries_message, run_postgres

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


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL on 127.0.0.1 for this test process (each xdist worker starts its own):
    a `postgresql+psycopg://` URL to one empty database; tests keep apart by study name."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.fail(missing_binaries_message(), pytrace=False)
    with run_postgres(bin_dir) as url:
        yield url
