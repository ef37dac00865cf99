"""The planner and its engine model's error (issue 22, item 4): a candidate on an extrapolated
profile is simulated, and so ranked, at its pessimistic bound; the winner is re-scored at both
edges of its profile's error band, and the plan says whether the target and the choice hold there.

dev's model is pinned at one replica, so attainment moves with the engine's speed alone: a minute
at 14 requests/s loads one L4 replica to its knee (83% within the SLO), one A10G not (100%)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from rich.console import Console

from capacity.cli.plan import band_note, band_table, ranked_caption
from capacity.engine.trust import trust_of
from capacity.planning import band, plan
from capacity.planning.days import Part
from capacity.planning.evaluator import evaluate
from capacity.planning.run import RunOptions
from capacity.planning.stack import apply_config_set, load_stack_model
from capacity.tables import TABLE_WIDTH
from capacity.workload.traces import load

ROOT = Path(__file__).resolve().parents[3]
KNEE = "synthetic:step:base=14,peak=14,at=0,length=60,duration=60,prompt=512,output=128"
# Ten times the cited prices, so a minute's cost differs between the types in cents.
PRICES = {"g5": 10.06, "g6": 8.05}
SCOPE = "autoscaling.qwen25-1p5b"


@pytest.fixture(scope="module")
def setup():
    one = [(f"{SCOPE}.minReplicas", 1), (f"{SCOPE}.maxReplicas", 1), (f"{SCOPE}.fallbackReplicas", 1)]
    sm = apply_config_set(load_stack_model("dev", root=ROOT), one)
    types = {t.gpu: t for t in plan.gpu_types(sm, PRICES)}
    trace = load(KNEE)
    return sm, types, trace, plan.PlanJob(sm, (Part("t", trace),), RunOptions(), types)


def on(sm, gpu: str, **params):
    """The stack's own policy and engine flags on `gpu` as a candidate (`params` added)."""
    return plan.candidate_of(sm, {"gpu": gpu, plan.COMMITTED: True, **params})


@pytest.fixture(scope="module")
def nominal(setup):
    sm, _, _, job = setup
    return {gpu: evaluate(job, on(sm, gpu)) for gpu in ("l4", "a10g")}


def result(setup, trials, best, target):
    return plan.PlanResult(list(trials), best, None, target, setup[1], rules=None)  # type: ignore[arg-type]  # the band reads no rules


def scored(setup, trials, best, target):
    sm, _, trace, _ = setup
    return band.band(sm, result(setup, trials, best, target), [Part("t", trace)], RunOptions(), workers=1)


def test_the_knee_is_where_the_tests_below_need_it(nominal):
    l4, a10g = nominal["l4"].summary, nominal["a10g"].summary
    assert 0.8 < l4.slo_attainment < 0.9 and a10g.slo_attainment == 1.0
    assert l4.cost_usd < a10g.cost_usd and l4.step_time_scale == a10g.step_time_scale == 1.0


def test_the_band_moves_the_winners_attainment_up_with_faster_steps_and_down_with_slower(setup, nominal):
    l4 = nominal["l4"]
    fast, slow = scored(setup, [l4], l4, 0.8).edges
    error = trust_of(apply_config_set(setup[0], l4.candidate.edits).profile).saturated_error
    assert (fast.step_time_scale, slow.step_time_scale) == (round(1 - error, 4), round(1 + error, 4))
    assert fast.winner.slo_attainment > l4.summary.slo_attainment > slow.winner.slo_attainment


def test_a_winner_missing_the_target_at_the_slow_edge_flips_the_target_and_the_choice_to_the_runner_up(setup, nominal):
    l4, a10g = nominal["l4"], nominal["a10g"]
    within = scored(setup, [l4, a10g], l4, 0.8)
    fast, slow = within.edges
    assert fast.challenger is None and not fast.flips  # nothing is cheaper than the winner
    assert slow.challenger is not None and slow.challenger.params["gpu"] == "a10g"
    assert not slow.meets_target and slow.flips
    assert within.target_flips and within.choice_flips
    note = band_note(within.as_dict(), within.trust.basis, 0.8)
    assert note.startswith("warning: ") and "missed at the slow edge" in note and "flips at the slow edge" in note


def test_a_cheaper_candidate_meeting_the_target_with_faster_steps_flips_the_choice_at_the_fast_edge(setup, nominal):
    l4, a10g = nominal["l4"], nominal["a10g"]  # at 90%, the L4 misses and the dearer A10G wins
    fast, slow = scored(setup, [l4, a10g], a10g, 0.9).edges
    assert fast.challenger is not None and fast.challenger.params["gpu"] == "l4"
    assert fast.challenger.summary.slo_attainment >= 0.9 and fast.flips
    assert slow.meets_target and not slow.flips


def extrapolated_l4(monkeypatch):
    """L4 profiles judged extrapolated (no GPU of dev's pools is), the rest as they are."""
    real = plan.trust_of
    monkeypatch.setattr(
        plan, "trust_of", lambda p: dataclasses.replace(real(p), level="extrapolated") if p.gpu == "l4" else real(p)
    )


def test_a_candidate_on_an_extrapolated_profile_is_simulated_at_its_pessimistic_bound(setup, nominal, monkeypatch):
    sm, _, _, job = setup
    extrapolated_l4(monkeypatch)
    bound = 1 + trust_of(apply_config_set(sm, nominal["l4"].candidate.edits).profile).saturated_error
    ranked = evaluate(job, on(sm, "l4")).summary
    assert ranked.step_time_scale == pytest.approx(bound, abs=1e-4)
    assert ranked == evaluate(job, on(sm, "l4", stepTimeScale=ranked.step_time_scale)).summary
    assert ranked.slo_attainment < nominal["l4"].summary.slo_attainment


def test_the_pessimistic_bound_ranks_an_extrapolated_candidate_below_one_it_beats_nominally(
    setup, nominal, monkeypatch
):
    sm, types, _, job = setup
    assert plan.winner([nominal["l4"], nominal["a10g"]], 0.8) is nominal["l4"]
    extrapolated_l4(monkeypatch)
    l4 = evaluate(job, on(sm, "l4"))
    assert plan.winner([l4, nominal["a10g"]], 0.8) is nominal["a10g"]
    kind = dataclasses.replace(types["l4"], trust=dataclasses.replace(types["l4"].trust, level="extrapolated"))
    row = plan.per_gpu_type(plan.PlanResult([l4], l4, None, 0.8, {"l4": kind}, rules=None))[0].as_dict()  # type: ignore[arg-type]  # the table reads no rules
    assert row["ranked_step_time_scale"] == l4.summary.step_time_scale > 1
    assert "pessimistic bound: l4 (extrapolated" in ranked_caption({"gpu_types": [row]})


def test_an_extrapolated_winners_slow_edge_is_the_run_that_ranked_it(setup, monkeypatch):
    sm, _, _, job = setup
    extrapolated_l4(monkeypatch)
    l4 = evaluate(job, on(sm, "l4"))
    calls = []
    real = band.evaluate
    monkeypatch.setattr(band, "evaluate", lambda j, c: calls.append(c) or real(j, c))
    _, slow = scored(setup, [l4], l4, 0.8).edges
    assert slow.winner is l4.summary and len(calls) == 1  # only the fast edge ran again


def test_the_band_table_fits_the_printed_width_with_every_number_whole(setup, nominal):
    l4, a10g = nominal["l4"], nominal["a10g"]
    within = scored(setup, [l4, a10g], l4, 0.8).as_dict()
    out = Console(width=TABLE_WIDTH, record=True)
    out.print(band_table({"band": within, "target": 0.8, "search": l4.summary.as_dict()}))
    text = out.export_text()
    assert max(len(line) for line in text.splitlines()) <= TABLE_WIDTH and "…" not in text
    assert f"{within['edges'][1]['step_time_scale']:g}" in text and "a10g" in text


def test_a_winner_moving_onto_an_extrapolated_profile_says_it_was_ranked_by_its_pessimistic_bound(monkeypatch):
    sm = load_stack_model("dev", root=ROOT)  # runs on the L4
    real = plan.gpu_trust
    monkeypatch.setattr(plan, "gpu_trust", lambda s, gpu: dataclasses.replace(real(s, gpu), level="extrapolated"))
    (move,) = [n for n in plan.deployment_notes(sm, {"gpu": "a10g", "consolidateAfter": None}) if "moves" in n]
    bound = plan.ranking_scale(plan.gpu_trust(sm, "a10g"))
    assert bound > 1 and f"ranked by its pessimistic bound (step times x{bound:g})" in move
