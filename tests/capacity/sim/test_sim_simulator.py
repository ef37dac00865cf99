"""The simulator's cluster behaviour on small synthetic traces (a fast toy engine profile)."""

from dataclasses import replace

import numpy as np
import pytest

from capacity.planning.stack import scaled_object
from capacity.sim.cluster.startup import Pool, Startup
from capacity.sim.simulator import FAILED, OK, REJECTED, SimConfig, Simulation, simulate
from capacity.workload.traces import Trace, load
from contract.settings.autoscaling import ModelAutoscaling
from tests.capacity.sim.toy import POLICY, STEP, TOY

SPOT = Pool("gpu-spot", "spot", 100, 4, 0.5)
ON_DEMAND = Pool("gpu-on-demand", "on-demand", 10, 2, 1.0)
STARTUP = Startup((60, 60), (60, 60), 10.0, (20, 20))  # exactly 150 s


def config(**overrides):
    base = dict(profile=TOY, pools=(SPOT, ON_DEMAND), startup=STARTUP, initial_replicas=1)
    return SimConfig(**{**base, **overrides})


def run(trace=STEP, policy=POLICY, **overrides):
    trace = trace if isinstance(trace, Trace) else load(trace)
    return simulate(config(**overrides), trace, scaled_object(policy))


def ready_at(result, t):
    tl = result.timeline
    return tl.ready[int(np.searchsorted(tl.t, t, side="right")) - 1]  # at the last sync <= t


def test_same_seed_gives_the_same_run():
    a, b = run(seed=1, spot_interruptions_per_hour=2.0), run(seed=1, spot_interruptions_per_hour=2.0)
    assert np.array_equal(a.e2e, b.e2e, equal_nan=True)
    assert a.gpu_seconds == b.gpu_seconds


def test_a_load_step_scales_out_and_back_in():
    result = run()
    assert max(result.timeline.desired) > 1
    assert result.timeline.desired[-1] < max(result.timeline.desired)
    assert result.scale_events >= 2


def test_new_replicas_serve_only_after_the_startup_time():
    result = run()
    tl = result.timeline
    first_up = next(t for t, d in zip(tl.t, tl.desired) if d > 1)
    assert ready_at(result, first_up + 149) == 1
    assert ready_at(result, first_up + 151 + 15) > 1


def test_scale_in_drains_in_flight_requests():
    result = run()
    assert (result.outcome == FAILED).sum() == 0
    assert (result.outcome == OK).sum() == len(result.outcome)


def test_replicas_never_exceed_the_nodepool_gpu_limits():
    policy = POLICY.model_copy(update={"max_replicas": 20})
    assert run(policy=policy).max_replicas_used <= SPOT.gpu_limit + ON_DEMAND.gpu_limit


def test_max_replicas_used_counts_serving_replicas_not_a_draining_pod_and_its_replacement():
    # Spot reclaims drain a pod while its replacement starts: both sit on nodes, one serves.
    result = run(policy=POLICY.model_copy(update={"max_replicas": 3}), spot_interruptions_per_hour=20.0, seed=3)
    assert result.max_replicas_used <= 3
    assert result.max_replicas_used >= max(result.timeline.ready)


def test_on_demand_is_used_only_when_spot_is_full():
    result = run(pools=(SPOT.__class__("gpu-spot", "spot", 100, 1, 0.5), ON_DEMAND))
    assert result.gpu_seconds.get("on-demand", 0) > 0
    assert result.cost_usd == pytest.approx(
        result.gpu_seconds["spot"] / 3600 * 0.5 + result.gpu_seconds["on-demand"] / 3600 * 1.0
    )


def test_spot_reclaims_are_replaced_and_fail_only_requests_past_the_warning():
    quiet = "synthetic:step:base=2,peak=2,duration=3600,prompt=128,output=32"
    result = run(trace=quiet, spot_interruptions_per_hour=6.0, pools=(SPOT,))
    tl = result.timeline
    # each reclaim leaves a gap while the replacement starts, but the fleet comes back
    assert min(tl.ready) == 0 or min(tl.ready) < max(tl.ready)
    assert tl.ready[-1] >= 1
    # short requests finish within the 2-minute warning: only requests arriving with no ready replica fail
    assert (result.outcome == OK).mean() > 0.8


def test_requests_longer_than_max_model_len_are_rejected():
    trace = Trace("t", np.array([0.0, 1.0]), np.array([100, 5000]), np.array([10, 10]))
    result = simulate(config(), trace, None)
    assert result.outcome.tolist() == [OK, REJECTED]


def test_static_fleet_never_scales_and_bills_every_replica():
    trace = load("synthetic:step:base=1,peak=1,duration=600,prompt=128,output=16")
    result = simulate(config(initial_replicas=3), trace, None)
    assert result.scale_events == 0
    assert sum(result.gpu_seconds.values()) == pytest.approx(3 * result.end_time)


def test_requests_without_a_ready_replica_fail():
    trace = Trace("t", np.array([1.0]), np.array([100]), np.array([10]))
    result = simulate(config(initial_replicas=0), trace, None)
    assert result.outcome.tolist() == [FAILED]


def test_round_robin_spreads_requests_evenly_over_a_static_fleet():
    trace = load("synthetic:step:base=4,peak=4,duration=300,prompt=128,output=16")
    result = simulate(config(initial_replicas=2, router="round-robin"), trace, None)
    assert (result.outcome == OK).all()


def test_a_warm_fleet_is_not_scaled_down_before_the_metrics_arrive():
    quiet = "synthetic:step:base=0.2,peak=0.2,duration=300,prompt=128,output=16"
    result = run(trace=quiet, initial_replicas=4)
    assert result.timeline.desired[0] == 4


def test_a_prometheus_outage_drives_the_fleet_to_fallback_replicas():
    policy = ModelAutoscaling.model_validate(
        {
            "minReplicas": 1,
            "maxReplicas": 6,
            "fallbackReplicas": 4,
            "triggers": {"e2eLatency": {"enabled": False}},
            "behavior": {
                "scaleDown": {
                    "stabilizationWindowSeconds": 0,
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}],
                }
            },
        }
    )
    quiet = "synthetic:step:base=0.2,peak=0.2,duration=900,prompt=128,output=16"
    result = run(trace=quiet, policy=policy, metrics_outages=((300.0, 600.0),))
    tl = result.timeline
    during = [d for t, d in zip(tl.t, tl.desired) if 400 <= t < 600]
    after = [d for t, d in zip(tl.t, tl.desired) if t >= 700]
    assert set(during) == {4}
    assert after[-1] == 1


def test_a_value_trigger_falls_back_through_an_outage_too():
    # KEDA 2.20.2 doFallback: target x fallbackReplicas / ready pods for a Value trigger
    policy = ModelAutoscaling.model_validate(
        {
            "minReplicas": 1,
            "maxReplicas": 6,
            "fallbackReplicas": 3,
            "fallbackBehavior": "static",
            "triggers": {"queueDepth": {"enabled": False}, "kvCache": {"enabled": False}},
        }
    )
    quiet = "synthetic:step:base=0.2,peak=0.2,duration=900,prompt=128,output=16"
    tl = run(trace=quiet, policy=policy, metrics_outages=((300.0, 900.0),)).timeline
    assert {d for t, d in zip(tl.t, tl.desired) if t < 300} == {1}
    assert 3 in {d for t, d in zip(tl.t, tl.desired) if t >= 400}


def test_a_cron_trigger_reports_0_outside_its_window_and_desired_replicas_inside():
    policy = ModelAutoscaling.model_validate(
        {
            "minReplicas": 1,
            "maxReplicas": 6,
            "triggers": {"cron": {"enabled": True, "start": "10 0 * * *", "end": "20 0 * * *", "desiredReplicas": 3}},
        }
    )
    quiet = "synthetic:step:base=0.2,peak=0.2,duration=1800,prompt=128,output=16"
    tl = run(trace=quiet, policy=policy).timeline
    cron = dict(zip(tl.t, tl.signals["warm-peak"]))
    assert {v for t, v in cron.items() if t < 600} == {0.0}
    assert {v for t, v in cron.items() if 600 <= t < 1200} == {3.0}


def test_a_prometheus_outage_leaves_the_cron_trigger_alone():
    # the cron scaler reads no metric: it keeps reporting its window while the queries fail
    policy = ModelAutoscaling.model_validate(
        {
            "minReplicas": 1,
            "maxReplicas": 6,
            "triggers": {"cron": {"enabled": True, "start": "10 0 * * *", "end": "20 0 * * *", "desiredReplicas": 3}},
        }
    )
    quiet = "synthetic:step:base=0.2,peak=0.2,duration=1800,prompt=128,output=16"
    tl = run(trace=quiet, policy=policy, metrics_outages=((0.0, 1800.0),)).timeline
    inside = [(c, q) for t, c, q in zip(tl.t, tl.signals["warm-peak"], tl.signals["queue-depth"]) if 600 <= t < 1200]
    assert {c for c, _ in inside} == {3.0} and all(np.isnan(q) for _, q in inside)


def test_a_cron_trigger_holds_desired_replicas_inside_its_window():
    policy = ModelAutoscaling.model_validate(
        {
            "minReplicas": 1,
            "maxReplicas": 6,
            "triggers": {"cron": {"enabled": True, "start": "10 0 * * *", "end": "20 0 * * *", "desiredReplicas": 3}},
            "behavior": {
                "scaleDown": {
                    "stabilizationWindowSeconds": 0,
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}],
                }
            },
        }
    )
    quiet = "synthetic:step:base=0.2,peak=0.2,duration=1800,prompt=128,output=16"
    tl = run(trace=quiet, policy=policy).timeline
    desired = dict(zip(tl.t, tl.desired))
    assert max(d for t, d in desired.items() if t < 600) == 1
    assert {d for t, d in desired.items() if 700 <= t < 1200} == {3}
    assert desired[max(tl.t)] == 1


def test_scale_to_zero_after_the_cooldown_and_requests_then_fail():
    # vLLM's own metrics vanish with the last replica, so nothing can activate it again until
    # the cron window (weekdays 08:00-20:00 by default, the trace runs from midnight).
    policy = ModelAutoscaling.model_validate(
        {
            "minReplicas": 0,
            "maxReplicas": 2,
            "pollingIntervalSeconds": 30,
            "cooldownPeriodSeconds": 120,
            "triggers": {"cron": {"enabled": True}},
        }
    )
    trace = Trace("t", np.array([10.0, 400.0]), np.array([100, 100]), np.array([10, 10]))
    result = run(trace=trace, policy=policy)
    assert result.outcome.tolist() == [OK, FAILED]
    assert 0 in result.timeline.desired


def scale_in_then_out(consolidate_after_s):
    """Two warm replicas, a forced scale-in to one at ~60 s and back out to two at ~300 s."""
    pool = Pool("gpu-spot", "spot", 100, 4, 0.5, consolidate_after_s=consolidate_after_s)
    sim = Simulation(
        config(pools=(pool,), initial_replicas=2), load("synthetic:step:base=0.1,peak=0.1,duration=900"), None
    )
    original = sim._sync

    def forced(t, since):
        if 60 <= t < 75:
            sim.set_replicas(1, t)
        if 300 <= t < 315:
            sim.set_replicas(2, t)
        original(t, since)

    sim._sync = forced
    return sim.run()


def ready_after(result, t0):
    tl = result.timeline
    return next(t for t, r in zip(tl.t, tl.ready) if t >= t0 and r == 2) - t0


def test_a_new_replica_reuses_an_empty_node_before_consolidation():
    reused = scale_in_then_out(consolidate_after_s=600)
    fresh = scale_in_then_out(consolidate_after_s=0)
    # STARTUP: 60 s node + 60 s image + 10 s weights + 20 s engine; a kept node skips the first two
    assert ready_after(reused, 300) <= 30 + 15
    assert ready_after(fresh, 300) >= 150


def test_an_empty_node_is_billed_until_consolidation():
    kept = scale_in_then_out(consolidate_after_s=10_000)
    fresh = scale_in_then_out(consolidate_after_s=0)
    assert sum(kept.gpu_seconds.values()) > sum(fresh.gpu_seconds.values()) + 200


def test_keda_brings_a_target_at_zero_up_to_min_replicas():
    # With ignoreNullValues (KEDA's default) the empty results of a fleet at zero read 0, no
    # trigger errors, so RequestScale sets minReplicaCount at its first poll.
    quiet = "synthetic:step:base=0.5,peak=0.5,duration=600,prompt=128,output=16"
    so = scaled_object(POLICY)
    so = replace(so, triggers=tuple(replace(t, ignore_null_values=True) for t in so.triggers))
    result = simulate(config(initial_replicas=0), load(quiet), so)
    assert result.timeline.desired[0] == 1
    assert result.timeline.ready[-1] == 1


def test_a_target_at_zero_whose_queries_are_empty_waits_for_the_fallback():
    # ignoreNullValues false (the stack's manifests for minReplicas >= 1): a fleet at zero has
    # no series, so the queries error (prometheus_scaler.go ExecutePromQuery) and RequestScale
    # leaves the target alone until more than failureThreshold (3) failed polls, 15 s apart,
    # put the triggers on fallback, which counts as active (scale_handler.go getScalerState).
    quiet = "synthetic:step:base=0.5,peak=0.5,duration=600,prompt=128,output=16"
    tl = run(trace=quiet, initial_replicas=0).timeline
    assert [d for t, d in zip(tl.t, tl.desired) if t < 45] == [0, 0, 0]
    assert tl.desired[tl.t.index(50.0)] == 1


def outage_from_the_start(behavior: str) -> set[int]:
    """Five warm replicas, Prometheus gone from t=0 to 600 s: what KEDA's fallback holds."""
    policy = ModelAutoscaling.model_validate(
        {
            "minReplicas": 1,
            "maxReplicas": 6,
            "fallbackReplicas": 2,
            "fallbackBehavior": behavior,
            "triggers": {"e2eLatency": {"enabled": False}},
            "behavior": {
                "scaleDown": {
                    "stabilizationWindowSeconds": 0,
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}],
                }
            },
        }
    )
    quiet = "synthetic:step:base=0.2,peak=0.2,duration=900,prompt=128,output=16"
    result = run(trace=quiet, policy=policy, initial_replicas=5, metrics_outages=((0.0, 600.0),))
    return {d for t, d in zip(result.timeline.t, result.timeline.desired) if 200 <= t < 600}


def test_the_stacks_fallback_behavior_keeps_a_larger_fleet_through_an_outage():
    assert outage_from_the_start("currentReplicasIfHigher") == {5}


def test_a_static_fallback_resizes_the_fleet_to_fallback_replicas():
    assert outage_from_the_start("static") == {2}


def test_the_timeline_records_each_spot_reclaim_notice_and_the_outages():
    quiet = "synthetic:step:base=2,peak=2,duration=3600,prompt=128,output=32"
    tl = run(trace=quiet, spot_interruptions_per_hour=6.0, pools=(SPOT,), metrics_outages=((300.0, 600.0),)).timeline
    assert tl.spot_reclaims and all(0 <= t <= tl.t[-1] for t in tl.spot_reclaims)
    assert tl.metrics_outages == ((300.0, 600.0),)


def test_the_prompt_token_rate_follows_the_prefill_work_served():
    policy = ModelAutoscaling.model_validate(
        {
            "minReplicas": 4,
            "maxReplicas": 6,
            "triggers": {
                "queueDepth": {"enabled": False},
                "kvCache": {"enabled": False},
                "e2eLatency": {"enabled": False},
                "promptTokens": {"enabled": True, "targetPerReplica": 100000, "windowSeconds": 60},
            },
        }
    )
    result = run(policy=policy, initial_replicas=4)
    tl = result.timeline
    signal = dict(zip(tl.t, tl.signals["prompt-tokens"]))
    before = [v for t, v in signal.items() if 90 <= t < 120]  # 0.5 req/s x 256 prompt tokens
    during = [v for t, v in signal.items() if 400 <= t < 700]  # 12 req/s x 256
    assert np.median(before) == pytest.approx(0.5 * 256, rel=0.5)
    assert np.median(during) == pytest.approx(12 * 256, rel=0.2)
