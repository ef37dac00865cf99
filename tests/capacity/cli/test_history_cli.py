"""`history`'s arguments: a bad one is one line naming the flag, before Prometheus is asked."""

import pytest

from capacity.__main__ import main
from capacity.lab.prometheus import free_port


def _history(capsys, *argv: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code = main(["history", "--prometheus", url, "--model", "m", *argv])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--range", "90s"), "--range must be a whole number of minutes, at least one, got '90s'"),
        (("--range", "a week"), "--range 'a week' is not a duration (e.g. 3600, 90m, 2h, 1d)"),
        (("--end", "yesterday"), "--end 'yesterday' is not an ISO 8601 date-time"),
    ],
)
def test_a_bad_range_is_one_line_naming_the_flag(capsys, argv, message):
    code, err = _history(capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1


def test_an_unreachable_prometheus_is_one_line_naming_its_url(capsys):
    code, err = _history(capsys, "--range", "1h", "--end", "2024-05-12T00:00:00Z")
    assert code == 2 and "unreachable (GET /-/ready did not answer 200)" in err and err.count("\n") == 1
