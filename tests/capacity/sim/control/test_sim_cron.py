"""KEDA's cron trigger window, minute by minute."""

from datetime import datetime, timezone

import pytest

from capacity.sim.control.cron import CronSchedule, window_mask

MONDAY = datetime(2024, 1, 1, tzinfo=timezone.utc)


def test_window_is_active_from_start_until_end_on_weekdays():
    mask = window_mask("0 8 * * 1-5", "0 20 * * 1-5", "UTC", MONDAY, 7 * 24 * 60)
    assert not mask[7 * 60 + 59]
    assert mask[8 * 60] and mask[19 * 60 + 59]
    assert not mask[20 * 60]
    saturday_noon = 5 * 24 * 60 + 12 * 60
    assert not mask[saturday_noon]


def test_window_follows_the_time_zone():
    # 08:00 in New York (UTC-5 in January) is 13:00 UTC
    mask = window_mask("0 8 * * *", "0 9 * * *", "America/New_York", MONDAY, 24 * 60)
    assert not mask[8 * 60] and mask[13 * 60]


def test_steps_lists_and_sunday_as_seven():
    schedule = CronSchedule("*/15 9,17 * * 7")
    assert schedule.matches(datetime(2024, 1, 7, 17, 45))  # a Sunday
    assert not schedule.matches(datetime(2024, 1, 7, 17, 50))
    assert not schedule.matches(datetime(2024, 1, 8, 9, 0))  # a Monday


def test_day_of_month_or_day_of_week_when_both_are_set():
    schedule = CronSchedule("0 0 1 * 1")
    assert schedule.matches(datetime(2024, 2, 1, 0, 0))  # the 1st, a Thursday
    assert schedule.matches(datetime(2024, 1, 8, 0, 0))  # a Monday


def test_bad_expression_names_the_field():
    with pytest.raises(ValueError, match="cron field '25' is outside 0-23"):
        CronSchedule("0 25 * * *")
