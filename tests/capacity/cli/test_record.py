"""How a report was made: the command line it records can be shared (capacity/cli/record.py)."""

import argparse

import pytest

from capacity.cli.record import made_by, run_record

URL = "postgresql+psycopg://planner:s3cret@db.internal:5432/optuna"


@pytest.mark.parametrize("flag", [["--storage", URL], [f"--storage={URL}"]])
def test_a_recorded_plan_command_masks_the_storage_password(flag):
    args = argparse.Namespace(_argv=["plan", "--stack", "prod", *flag], seed=0, trace=None)
    line = made_by(run_record(args))
    assert "s3cret" not in line
    assert "planner:***@db.internal:5432/optuna" in line


def test_a_recorded_command_without_a_storage_is_kept_as_typed():
    args = argparse.Namespace(_argv=["simulate", "--stack", "prod", "--trace", "a b.csv"], seed=3, trace="a b.csv")
    assert run_record(args)["command"] == "python -m capacity simulate --stack prod --trace 'a b.csv'"
