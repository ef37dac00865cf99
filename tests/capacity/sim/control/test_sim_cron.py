"""KEDA's cron trigger: robfig/cron v3.0.1 parsing and `Next` (parser_test.go, spec_test.go
tables, 5-field rows with their seconds field dropped) and the window of
pkg/scalers/cron_scaler.go at KEDA 2.20.2."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from capacity.sim.control.cron import CronActivity, CronSchedule, CronWindow

UTC = ZoneInfo("UTC")
NEW_YORK = ZoneInfo("America/New_York")
MONDAY = datetime(2024, 1, 1, tzinfo=ZoneInfo("UTC"))


def at(text: str, zone: ZoneInfo = UTC) -> datetime:
    return datetime.strptime(text, "%a %b %d %H:%M %Y").replace(tzinfo=zone)


# --- parser.go ---------------------------------------------------------------------------


def test_weekday_and_month_names_in_any_case():
    schedule = CronSchedule("0 8 * jan-Mar MON-FRI")
    assert schedule.dow == {1, 2, 3, 4, 5} and schedule.month == {1, 2, 3}


def test_a_start_with_a_step_runs_to_the_end_of_the_range():
    # getRange: "N/step" means "N-max/step" (TestActivation: 5/15 fires at :05, :20, :50)
    assert CronSchedule("5/15 * * * *").minute == {5, 20, 35, 50}


@pytest.mark.parametrize(
    "field, expected",
    [
        ("5", {5}),
        ("5-6/2", {5}),
        ("5-7/2", {5, 7}),
        ("1,5-7/2,3", {1, 3, 5, 7}),
        ("*/20", {0, 20, 40}),
        ("?", set(range(60))),
    ],
)
def test_range_and_field_table(field, expected):
    # parser_test.go TestRange / TestField
    assert CronSchedule(f"{field} * * * *").minute == expected


@pytest.mark.parametrize(
    "expression, message",
    [
        ("5--5 * * * *", "too many hyphens"),
        ("0 8 * jan-x *", "failed to parse int from"),
        ("*/-12 * * * *", "negative number"),
        ("*//2 * * * *", "too many slashes"),
        ("0 0 0 * *", r"beginning of range \(0\) below minimum \(1\)"),
        ("0 24 * * *", r"end of range \(24\) above maximum \(23\)"),
        ("5-3 * * * *", "beyond end of range"),
        ("*/0 * * * *", "should be a positive number"),
        ("0 8 * * 7", r"day of week field: end of range \(7\) above maximum \(6\)"),
        ("0 8 * *", "expected exactly 5 fields, found 4"),
        ("@daily", "does not accept descriptors"),
    ],
)
def test_bad_expressions_fail_as_robfig_fails_them(expression, message):
    with pytest.raises(ValueError, match=message):
        CronSchedule(expression)


# --- spec.go Next ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "now, spec, expected",
    [
        ("Mon Jul 09 14:45 2012", "0/15 * * * *", "Mon Jul 09 15:00 2012"),
        ("Mon Jul 09 15:45 2012", "20-35/15 * * * *", "Mon Jul 09 16:20 2012"),
        ("Mon Jul 09 23:46 2012", "*/15 * * * *", "Tue Jul 10 00:00 2012"),
        ("Mon Jul 09 23:35 2012", "0 0 9 Apr-Oct ?", "Thu Aug 09 00:00 2012"),
        ("Mon Jul 09 23:35 2012", "0 0 */5 Apr,Aug,Oct Mon", "Tue Aug 01 00:00 2012"),
        ("Mon Jul 09 23:35 2012", "0 0 */5 Oct Mon", "Mon Oct 01 00:00 2012"),
        ("Mon Jul 09 23:35 2012", "0 0 * Feb Mon", "Mon Feb 04 00:00 2013"),
        ("Mon Jul 09 23:35 2012", "0 0 * Feb Mon/2", "Fri Feb 01 00:00 2013"),
        ("Mon Jul 09 23:35 2012", "0 0 29 Feb ?", "Mon Feb 29 00:00 2016"),
    ],
)
def test_next_table(now, spec, expected):
    # spec_test.go TestNext
    assert CronSchedule(spec).next(at(now), UTC) == at(expected)


def test_next_is_strictly_after_now():
    assert CronSchedule("0 8 * * *").next(at("Mon Jan 01 08:00 2024"), UTC) == at("Tue Jan 02 08:00 2024")
    assert CronSchedule("0 8 * * *").next(at("Mon Jan 01 07:59 2024") + timedelta(seconds=59.5), UTC) == at(
        "Mon Jan 01 08:00 2024"
    )


@pytest.mark.parametrize(
    "now, spec, expected",
    [
        # spring forward 2am EST -> 3am EDT: 02:30 does not exist that day
        ("2012-03-11T00:00:00-05:00", "30 2 11 Mar ?", "2013-03-11T02:30:00-04:00"),
        ("2012-03-11T01:00:00-05:00", "0 * * * ?", "2012-03-11T03:00:00-04:00"),
        ("2012-03-11T00:00:00-05:00", "0 2 * * ?", "2012-03-12T02:00:00-04:00"),
        # fall back 2am EDT -> 1am EST: 01:xx happens twice
        ("2012-11-04T01:45:00-04:00", "30 1 04 Nov ?", "2012-11-04T01:30:00-05:00"),
        ("2012-11-04T01:00:00-04:00", "0 * * * ?", "2012-11-04T01:00:00-05:00"),
        ("2012-11-04T01:00:00-04:00", "0 1 * * ?", "2012-11-04T01:00:00-05:00"),
        ("2012-11-04T01:00:00-05:00", "0 1 * * ?", "2012-11-05T01:00:00-05:00"),
    ],
)
def test_next_across_daylight_saving_time(now, spec, expected):
    # spec_test.go TestNext, the TZ=America/New_York rows
    assert CronSchedule(spec).next(datetime.fromisoformat(now), NEW_YORK) == datetime.fromisoformat(expected)


@pytest.mark.parametrize(
    "day, spec, fires",
    [
        ("Sun Jul 15 00:00 2012", "* * 1,15 * Sun", True),
        ("Fri Jun 15 00:00 2012", "* * 1,15 * Sun", True),
        ("Sun Jul 15 00:00 2012", "* * */10 * Sun", True),
        ("Sun Jul 15 00:00 2012", "* * * * Mon", False),
        ("Mon Jul 09 00:00 2012", "* * 1,15 * *", False),
        ("Sun Jul 15 00:00 2012", "* * */2 * Sun", True),
    ],
)
def test_day_of_month_and_day_of_week_table(day, spec, fires):
    # spec_test.go TestActivation: both restricted -> either; a star in one -> both
    moment = at(day)
    assert (CronSchedule(spec).next(moment - timedelta(seconds=1), UTC) == moment) is fires


def test_no_fire_within_five_years_is_none():
    assert CronSchedule("0 0 30 2 *").next(MONDAY, UTC) is None


# --- cron_scaler.go: the window ---------------------------------------------------------


def activity(start, end, tz="UTC", days=7):
    return CronActivity(CronWindow(start, end, tz, 2), MONDAY, days * 86400)


def test_window_is_active_from_start_until_end_on_weekdays():
    window = activity("0 8 * * MON-FRI", "0 20 * * MON-FRI")
    assert not window.inside(8 * 3600 - 1)
    assert window.inside(8 * 3600) and window.inside(20 * 3600 - 1)
    assert not window.inside(20 * 3600)
    assert not window.inside(5 * 86400 + 12 * 3600)  # Saturday noon


def test_window_follows_the_time_zone():
    # 08:00 in New York (UTC-5 in January) is 13:00 UTC
    window = activity("0 8 * * *", "0 9 * * *", "America/New_York", days=1)
    assert not window.inside(8 * 3600) and window.inside(13 * 3600)


def test_a_window_across_midnight():
    window = activity("0 22 * * *", "0 6 * * *", days=2)
    assert window.inside(0) and window.inside(23 * 3600) and not window.inside(12 * 3600)


def test_inside_when_the_end_is_no_later_than_the_next_start():
    # KEDA's isWithinInterval is true when nextStart is not before nextEnd, equal included
    window = activity("0,30 * * * *", "30 * * * *", days=1)
    assert window.inside(10 * 60)  # next start and next end both at :30
    assert not window.inside(40 * 60)  # next start 01:00, next end 01:30


def test_a_start_that_never_fires_is_always_inside():
    # Next returns Go's zero time, before any end: the scaler reads that as inside
    assert activity("0 0 30 2 *", "0 8 * * *", days=1).inside(3600)


def test_an_end_that_never_fires_is_never_inside():
    assert not activity("0 8 * * *", "0 0 30 2 *", days=1).inside(9 * 3600)


def test_a_monthly_window_is_found_beyond_a_week():
    window = activity("0 0 15 * *", "0 0 16 * *", days=31)
    assert not window.inside(13 * 86400) and window.inside(14 * 86400 + 60) and not window.inside(15 * 86400)


def test_identical_start_and_end_are_refused_as_keda_refuses_them():
    with pytest.raises(ValueError, match="start and end can not have exactly same time input"):
        activity("0 8 * * *", "0 8 * * *")


def test_an_unknown_time_zone_is_named():
    with pytest.raises(ValueError, match="cron timezone 'Mars/Olympus' is not an IANA time zone"):
        activity("0 8 * * *", "0 9 * * *", "Mars/Olympus")
