"""Optuna used as designed: the objective runs a candidate day by day, reports its penalised cost
after each day and lets the pruner stop a hopeless one; each study's first trials are its seeds,
the committed policy and the reference designs."""

from pathlib import Path

import optuna
import pytest

from capacity.planning import journal, plan
from capacity.planning.days import Part, days_of
from capacity.planning.guardrails import guardrails
from capacity.planning.journal import StorageSpec
from capacity.planning.run import RunOptions
from capacity.planning.space import REFERENCE_DESIGNS, distributions
from capacity.planning.stack import load_stack_model
from capacity.sim.scaledobject import read_scaled_object
from capacity.workload.traces import load

ROOT = Path(__file__).resolve().parents[3]
# Two days, each a quiet base and, at midnight and noon, a 2-minute burst of 20 req/s: three warm
# dev replicas serve the bursts, one cannot, and new replicas start long after a burst is over.
BURSTS = "synthetic:bursty:base=0.01,burst=20,every=43200,length=120,duration=172800,prompt=1024,output=64"
STEP = "synthetic:step:base=2,peak=12,at=300,length=300,duration=900,prompt=512,output=128"
TARGET = 0.9


@pytest.fixture(scope="module")
def dev():
    return load_stack_model("dev", root=ROOT)


def objectives(sm, parts) -> plan.Objectives:
    """The planner's objectives on `parts`, as `plan.search` builds them (l4 only, guardrails kept)."""
    types = {t.gpu: t for t in plan.gpu_types(sm) if t.gpu == "l4"}
    rules = guardrails(sm, [p.trace for p in parts], True)
    space = distributions(rules.max_replicas, False, (600,), True, False, False, plan.policy_min_warm_replicas(sm))
    points = plan.Points(sm, rules, {"l4": space})
    return plan.Objectives(plan.PlanJob(sm, tuple(parts), RunOptions(), types), points, TARGET)


def test_a_hopeless_candidate_is_pruned_after_its_first_day(dev):
    days = [Part(f"day {i + 1}", day) for i, day in enumerate(days_of(load(BURSTS)))]
    assert len(days) == 2
    run = objectives(dev, days)
    committed = run.points.committed("l4")
    warm = {**committed, "minReplicas": run.points.rules.max_replicas}  # every replica the pools hold, all day
    # One warm replica, scaling up slowly: the noon burst is over before a second replica is ready.
    hopeless = {**committed, "minReplicas": 1, "queueTarget": 12, "scaleUpPods": 1, "scaleUpPeriod": 60}
    hopeless.update(scaleDownPods=1, scaleDownPeriod=300)  # the policy pack: down no faster than up
    study = optuna.create_study(pruner=plan.pruner())
    study.enqueue_trial(warm)
    study.enqueue_trial(hopeless)
    study.optimize(run.objective("l4"), n_trials=2)
    first, second = study.trials
    assert first.state == optuna.trial.TrialState.COMPLETE and list(first.intermediate_values) == [1, 2]
    assert second.state == optuna.trial.TrialState.PRUNED
    assert list(second.intermediate_values) == [1] and second.user_attrs[journal.PRUNED_AFTER] == 1
    assert second.constraints["attainment"] > 0  # it missed the target on the day it ran
    assert second.intermediate_values[1] > first.intermediate_values[1]


def test_the_committed_policy_is_never_pruned(dev):
    days = [Part(f"day {i + 1}", day) for i, day in enumerate(days_of(load(BURSTS)))]
    run = objectives(dev, days)
    warm = {**run.points.committed("l4"), "minReplicas": run.points.rules.max_replicas}
    study = optuna.create_study(pruner=plan.pruner())
    study.enqueue_trial(warm)
    study.enqueue_trial(run.points.committed("l4"), user_attrs={plan.COMMITTED: True})
    study.optimize(run.objective("l4"), n_trials=2)
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 2


def test_each_studys_first_trials_are_its_seeds_the_committed_policy_then_the_reference_designs(dev, tmp_path):
    path = tmp_path / "plan.journal"
    plan.search(dev, [Part("step", load(STEP))], TARGET, 10, 0, 1, RunOptions(), storage=StorageSpec(path))
    storage = journal.storage(path)
    names = [f"reference {p.stem}" for p in sorted(REFERENCE_DESIGNS.glob("*.yaml"))]
    assert len(names) == 3
    seeded = {}
    for summary in optuna.get_all_study_summaries(storage):
        trials = optuna.load_study(study_name=summary.study_name, storage=storage).trials
        seeded[summary.study_name.rsplit("-", 1)[1]] = [t.user_attrs.get(plan.SEED) for t in trials]
    assert seeded["l4"][:4] == ["committed", *names]  # dev runs on the L4
    assert seeded["a10g"][:3] == names
    assert all(seed is None for seed in seeded["l4"][4:] + seeded["a10g"][3:])


def test_a_reference_design_is_seeded_as_its_thresholds_at_the_nearest_point_of_the_space(dev):
    run = objectives(dev, [Part("step", load(STEP))])
    point = run.points.reference("l4", read_scaled_object(REFERENCE_DESIGNS / "benchmark-derived.yaml"))
    committed = run.points.committed("l4")
    # Its queue trigger (threshold 2 over avg_over_time[1m]), its behavior's windows and periods.
    assert (point["queueTarget"], point["queueWindow"]) == (2, 60)
    assert (point["scaleUpWindow"], point["scaleUpPeriod"], point["scaleDownPeriod"]) == (60, 30, 60)
    assert point["scaleDownWindow"] == 600  # its 300 s, at the shortest window this search allows
    assert point["minReplicas"] == max(1, plan.policy_min_warm_replicas(dev))  # its 1, at the warm floor
    assert not point["promptEnabled"] and not point["ttftEnabled"]  # triggers it does not have
    # Percent policies have no counterpart: the stack's pods per period stay.
    assert (point["scaleUpPods"], point["scaleDownPods"]) == (committed["scaleUpPods"], committed["scaleDownPods"])


def test_an_operators_seed_policy_is_tried_right_after_the_committed_one_at_its_own_thresholds(dev, tmp_path):
    """`plan --seed-policy FILE`: a policy overlay (the shape `simulate --policy` takes) becomes a
    study's second trial, its floor and trigger targets as written."""
    overlay = tmp_path / "reactive.yaml"
    overlay.write_text(
        "qwen25-1p5b:\n  minReplicas: 2\n  fallbackReplicas: 2\n  maxReplicas: 3\n"
        "  triggers:\n    promptTokens: {enabled: true, targetPerReplica: 400, windowSeconds: 60}\n"
    )
    seeded = load_stack_model("dev", policy_file=overlay, root=ROOT)
    path = tmp_path / "plan.journal"
    plan.search(
        dev,
        [Part("step", load(STEP))],
        TARGET,
        3,
        0,
        1,
        RunOptions(),
        storage=StorageSpec(path),
        only=("l4",),
        seed_policies=[("reactive.yaml", seeded)],
    )
    storage = journal.storage(path)
    (summary,) = optuna.get_all_study_summaries(storage)
    first, second = optuna.load_study(study_name=summary.study_name, storage=storage).trials[:2]
    assert (first.user_attrs[plan.SEED], second.user_attrs[plan.SEED]) == ("committed", "seed policy reactive.yaml")
    assert (second.params["minReplicas"], second.params["promptEnabled"], second.params["promptTarget"]) == (
        2,
        True,
        400,
    )


def test_a_seed_policy_names_its_own_study(dev, tmp_path):
    """Seeds change the search, so the study's name does too: a rerun without them never resumes it."""
    overlay = tmp_path / "floor.yaml"
    overlay.write_text("qwen25-1p5b:\n  minReplicas: 2\n  fallbackReplicas: 2\n  maxReplicas: 3\n")
    seeded = load_stack_model("dev", policy_file=overlay, root=ROOT)
    path = tmp_path / "plan.journal"
    parts = [Part("step", load(STEP))]
    for seed_policies in ([], [("floor.yaml", seeded)]):
        plan.search(
            dev,
            parts,
            TARGET,
            1,
            0,
            1,
            RunOptions(),
            storage=StorageSpec(path),
            only=("l4",),
            seed_policies=seed_policies,
        )
    assert len(optuna.get_all_study_summaries(journal.storage(path))) == 2
