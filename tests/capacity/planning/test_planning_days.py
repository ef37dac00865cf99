"""Planning over days: a trace of two days or more is searched on its first days and validated on
its last ones, each day one run; a shorter trace keeps the time split; summaries say each day and
the worst one; the value a pruner compares never ranks a candidate meeting the target below one
missing it."""

import numpy as np
import pytest

from capacity.planning import plan
from capacity.planning.days import DAY_S, plan_parts, short_name, split_by_days, whole_days
from capacity.planning.run import combined
from capacity.workload.traces import Trace
from tests.summaries import run as summary


def hourly(hours: float) -> Trace:
    """One request an hour on the hour, from t = 0 (the last one at `hours` - 1)."""
    n = int(hours)
    arrivals = np.arange(n, dtype=np.float64) * 3600
    return Trace("hourly", arrivals, np.full(n, 100), np.full(n, 10))


def test_a_trace_spans_the_whole_days_from_its_first_request_to_within_an_hour_of_its_last():
    assert [whole_days(hourly(h)) for h in (24, 47, 48, 71, 72)] == [1, 1, 2, 2, 3]


def test_a_four_day_trace_keeps_its_first_day_as_history_searches_two_and_validates_the_last():
    searched, held = split_by_days(hourly(96), holdout_days=1)  # type: ignore[misc]  # four days: split
    assert [p.label for p in searched] == ["hourly day 2 of 4", "hourly day 3 of 4"]
    assert [p.label for p in held] == ["hourly day 4 of 4"]
    for part in [*searched, *held]:  # each day its own run: re-based, 24 requests, scored whole
        assert part.scored_from == 0 and len(part.trace) == 24
        assert part.trace.arrivals[0] == 0 and part.trace.arrivals[-1] < DAY_S


def test_each_day_carries_the_days_before_it_as_its_history():
    searched, held = split_by_days(hourly(96), holdout_days=1)  # type: ignore[misc]
    day_2, day_4 = searched[0].trace, held[0].trace
    assert day_2.history is not None and len(day_2.history.arrivals) == 24  # day 1, before t = 0
    assert day_4.history is not None and len(day_4.history.arrivals) == 72
    assert day_4.history.arrivals[-1] < 0 <= day_4.arrivals[0]


def test_a_two_day_trace_searches_its_first_day_it_has_no_other():
    searched, held = split_by_days(hourly(48), holdout_days=1)  # type: ignore[misc]
    assert ([p.label for p in searched], [p.label for p in held]) == (["hourly day 1 of 2"], ["hourly day 2 of 2"])


def test_holdout_days_choose_how_many_last_days_are_validated():
    searched, held = split_by_days(hourly(96), holdout_days=2)  # type: ignore[misc]  # four days: split
    assert (len(searched), len(held)) == (1, 2)


def test_holding_out_every_day_is_one_line_naming_the_flag():
    with pytest.raises(
        ValueError,
        match=r"^--holdout-days 2: trace 'hourly' spans 3 whole days \(the first 1 history only\); hold out 1 to 1",
    ):
        split_by_days(hourly(72), holdout_days=2)


def test_a_trace_shorter_than_two_days_keeps_the_time_split():
    searched, held = plan_parts(hourly(30), holdout_days=1, search_fraction=0.7)
    assert [p.label for p in searched] == ["hourly first 70%"] and len(searched[0].trace) == 21
    assert [(p.label, p.scored_from, len(p.trace)) for p in held] == [("hourly last 30%", 0.7, 30)]


def test_a_combined_summary_reports_each_day_and_the_worst_and_costliest_day():
    days = [summary(slo_attainment=0.995, cost_usd=3.0), summary(slo_attainment=0.97, cost_usd=2.0)]
    days.append(summary(slo_attainment=0.99, cost_usd=5.0))
    both = combined(days, 1000.0, labels=["day 1", "day 2", "day 3"])
    assert [(d.label, d.slo_attainment, d.cost_usd) for d in both.days] == [
        ("day 1", 0.995, 3.0),
        ("day 2", 0.97, 2.0),
        ("day 3", 0.99, 5.0),
    ]
    assert both.slo_attainment == 0.97 and both.worst_day.label == "day 2"  # type: ignore[union-attr]  # three days
    out = both.as_dict()
    assert (out["worst_day"]["label"], out["costliest_day"]["label"]) == ("day 2", "day 3")
    assert type(both).from_dict(out) == both  # a journal gives it back as it was


@pytest.mark.parametrize("target", [0.9, 0.99, 0.999])
def test_the_penalised_cost_ranks_every_candidate_meeting_the_target_before_every_one_missing_it(target):
    ceiling = 10.0  # USD per hour of the pools' ceiling fleet; each run below is one simulated hour
    costs = [0.5, 5.0, 9.99]  # no run costs more than the ceiling fleet
    meeting = [[summary(slo_attainment=a, cost_usd=c, simulated_s=3600.0)] for c in costs for a in (target, 1.0)]
    missing = [
        [summary(slo_attainment=a, cost_usd=c, simulated_s=3600.0)]
        for c in costs
        for a in (target - 1e-4, target - (1 - target), 0.0)
    ]
    worst_meeting = max(plan.penalised_cost(r, target, ceiling) for r in meeting)
    best_missing = min(plan.penalised_cost(r, target, ceiling) for r in missing)
    assert worst_meeting <= ceiling < best_missing


def test_a_miss_of_the_whole_error_budget_costs_one_more_ceiling_fleet_than_a_bare_miss():
    runs = [summary(slo_attainment=0.98, cost_usd=2.0, simulated_s=7200.0)]  # two hours, target 0.99
    assert plan.penalised_cost(runs, 0.99, 10.0) == pytest.approx(2.0 + 20.0 * (1 + 1))


def test_a_candidate_missing_on_any_day_so_far_is_penalised_by_its_worst_day():
    good = summary(slo_attainment=1.0, cost_usd=1.0, simulated_s=3600.0)
    bad = summary(slo_attainment=0.5, cost_usd=1.0, simulated_s=3600.0)
    assert plan.penalised_cost([good], 0.9, 10.0) == 1.0
    assert plan.penalised_cost([good, bad], 0.9, 10.0) > 20.0  # above the ceiling fleet's two hours


def test_a_label_names_a_trace_by_its_file_or_its_kind_not_its_whole_spec():
    curve = Trace("rates:../shared/traces/conv-5days.csv:lengths=a.csv,mean=0.05", np.zeros(1), np.ones(1), np.ones(1))
    synthetic = Trace("synthetic:step:base=2,peak=12", np.zeros(1), np.ones(1), np.ones(1))
    assert [short_name(t) for t in (curve, synthetic, hourly(1))] == ["conv-5days", "synthetic:step", "hourly"]
