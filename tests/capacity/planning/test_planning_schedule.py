"""The cron pre-warm window derived from the oracle's per-interval replicas (`capacity.planning.schedule`)."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from capacity.planning.schedule import (
    DAY_S,
    EVERY_DAY,
    WEEKDAYS,
    WEEKEND,
    best_window,
    daily_needs,
    derive,
    later_part,
    origin_utc,
    runs,
    warm_up_lead_s,
    whole_days,
)
from capacity.planning.stack import apply_config_set, load_stack_model
from capacity.sim.control.cron import CronActivity, CronWindow
from capacity.workload import traces

ROOT = Path(__file__).resolve().parents[3]
HOUR = 3600.0
MONDAY = datetime(2024, 1, 1, tzinfo=UTC)  # the simulator's default trace start
# 2 replicas all day, 5 from 09:00 to 17:00 (hourly slots).
OFFICE_HOURS = np.array([2] * 9 + [5] * 8 + [2] * 7)


@pytest.fixture(scope="module")
def prod():
    """Prod's first model scaling between 2 and 12 replicas, the range the office-hours needs move in."""
    stack = load_stack_model("prod", root=ROOT)
    block = f"autoscaling.{stack.model.name}"
    edits = [(f"{block}.minReplicas", 2), (f"{block}.fallbackReplicas", 2), (f"{block}.maxReplicas", 12)]
    return apply_config_set(stack, edits)


def test_lead_is_the_slowest_replica_startup_plus_one_polling_interval(prod):
    # prod's startup (contract/startup.py): node 120 + Auto Mode's SOCI pull 45 + weights 20 + the
    # stack's engine 90, then polling 15.
    assert warm_up_lead_s(prod) == 120 + 45.0 + prod.startup.weight_load_s + 90 + 15


def test_runs_join_across_midnight():
    above = np.array([True, False, False, True, True])
    assert runs(above) == [(3, 3)]


def test_daily_need_is_the_median_over_days_rounded_up():
    two_days = np.r_[OFFICE_HOURS, OFFICE_HOURS + 1]
    needs = daily_needs(two_days, HOUR, MONDAY, EVERY_DAY)
    assert needs[12] == 6  # median of 5 and 6 is 5.5
    assert needs[0] == 3


def test_daily_need_keeps_only_the_days_asked_for():
    weekend_rush = np.r_[np.tile([1] * 24, 5), np.tile([9] * 24, 2)]  # Monday..Sunday
    assert daily_needs(weekend_rush, HOUR, MONDAY, WEEKDAYS).max() == 1


def test_an_interval_that_does_not_divide_a_day_is_refused():
    with pytest.raises(ValueError, match="must divide a day"):
        daily_needs(OFFICE_HOURS, 7 * 60.0, MONDAY, EVERY_DAY)


def test_the_window_holds_the_peak_from_its_lead_before_it_until_it_ends():
    window = best_window(OFFICE_HOURS, HOUR, floor=2, ceiling=12, lead_s=600.0, days=EVERY_DAY)
    assert (window.start, window.end, window.desired_replicas) == ("50 8 * * *", "0 17 * * *", 5)
    assert window.other_windows == 0


def test_a_lead_before_midnight_moves_the_start_to_the_day_before():
    early = np.array([5] * 3 + [2] * 21)
    window = best_window(early, HOUR, floor=2, ceiling=12, lead_s=600.0, days=WEEKDAYS)
    assert (window.start, window.end) == ("50 23 * * 0-4", "0 3 * * 1-5")


def test_a_weekend_window_past_midnight_ends_on_the_following_days():
    late = np.array([5] + [2] * 21 + [5] * 2)  # 22:00 to 01:00
    window = best_window(late, HOUR, floor=2, ceiling=12, lead_s=0.0, days=WEEKEND)
    assert (window.start, window.end) == ("0 22 * * 0,6", "0 1 * * 0,1")


def test_desired_replicas_stay_within_max_replicas():
    window = best_window(OFFICE_HOURS, HOUR, floor=2, ceiling=4, lead_s=0.0, days=EVERY_DAY)
    assert window.desired_replicas == 4


def test_no_window_when_nothing_needs_more_than_min_replicas():
    assert best_window(np.full(24, 2), HOUR, floor=2, ceiling=12, lead_s=0.0, days=EVERY_DAY) is None


def test_a_brief_spike_is_not_worth_a_long_lead():
    spike = np.array([1] * 10 + [2] + [1] * 13)
    assert best_window(spike, HOUR, floor=1, ceiling=12, lead_s=5 * HOUR, days=EVERY_DAY) is None


def test_two_peaks_a_day_report_the_second_window_wanted():
    two_peaks = np.array([2] * 8 + [5] * 3 + [2] * 4 + [4] * 3 + [2] * 6)
    window = best_window(two_peaks, HOUR, floor=2, ceiling=12, lead_s=0.0, days=EVERY_DAY)
    assert (window.start, window.desired_replicas, window.other_windows) == ("0 8 * * *", 5, 1)


def test_a_week_of_office_hours_gives_a_weekday_window(prod):
    week = np.r_[np.tile(OFFICE_HOURS, 5), np.tile([2] * 24, 2)]
    window = derive(prod, week, HOUR, MONDAY)
    assert window.start.endswith("* * 1-5") and window.end == "0 17 * * 1-5"
    assert window.other_windows == 0


def test_a_weekday_peak_outweighs_a_higher_weekend_peak_over_a_week(prod):
    # Scores (served above minReplicas 2, minus the lead hour's idle replicas): weekend 16 - 2 = 14 a
    # day, 28 a week; weekday mornings 9 - 3 = 6 a day, 30 a week.
    weekend_peak = np.array([2] * 9 + [4] * 8 + [2] * 7)
    week = np.r_[np.tile(OFFICE_HOURS[:12].tolist() + [2] * 12, 5), np.tile(weekend_peak, 2)]
    window = derive(prod, week, HOUR, MONDAY)
    assert window.end == "0 12 * * 1-5" and window.other_windows == 1


def test_the_derived_window_is_inside_when_the_need_starts_and_outside_after_it(prod):
    window = derive(prod, OFFICE_HOURS, HOUR, MONDAY)
    activity = CronActivity(
        CronWindow(window.start, window.end, window.timezone, window.desired_replicas), MONDAY, DAY_S
    )
    lead = warm_up_lead_s(prod)
    assert not activity.inside(9 * HOUR - lead - 120)
    assert activity.inside(9 * HOUR - lead + 60) and activity.inside(16.9 * HOUR)
    assert not activity.inside(17 * HOUR + 60)


def test_the_derived_window_deploys_through_the_stacks_settings(prod):
    window = derive(prod, OFFICE_HOURS, HOUR, MONDAY)
    scheduled = apply_config_set(prod, window.config_edits(prod.model.name))
    cron = scheduled.policy.triggers.cron
    assert (cron.enabled, cron.start, cron.end, cron.desired_replicas) == (True, window.start, window.end, 5)


def test_a_later_part_moves_the_wall_clock_along():
    trace = traces.load("synthetic:diurnal:mean=0.01,duration=172800")
    day_two = later_part(trace, DAY_S, DAY_S)
    assert origin_utc(day_two) == MONDAY + timedelta(days=1)
    assert day_two.arrivals.min() >= 0 and day_two.duration < DAY_S


def test_a_span_within_a_minute_of_a_day_counts_the_day():
    assert (whole_days(DAY_S - 30), whole_days(DAY_S - 120), whole_days(2 * DAY_S)) == (1, 0, 2)
