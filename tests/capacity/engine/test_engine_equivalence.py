"""The analytic fast path equals evaluating the step-time function one step at a time.

`StepCost.decode_span` / `decode_steps_within` sum and invert many pure-decode steps in closed
form (the roofline is piecewise linear in the step index: one crossover between the memory and
compute sides). `SteppedCost` is the reference: the same `step_time`, evaluated and added step
by step. They must agree:

- directly, on random roofline parameters chosen so that every regime occurs (memory-bound,
  compute-bound, crossing over in either direction, flat);
- through the engine: random submit / advance / abort / next_event_time / observation sequences
  give the same trajectory (every count and order exact, every time to 1e-9 relative);
- through the scaling simulator: the prod stack's policy on a load step gives the same
  per-request results and the same control-loop decisions.
"""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import numpy as np
import pytest

from capacity.engine import PROFILES, EngineProfile, ReplicaEngine, Request
from capacity.engine.roofline import DecodeLine, StepCost

REPO = Path(__file__).resolve().parents[3]
SEEDS = range(60)


class SteppedCost(StepCost):
    """The reference: every pure-decode step evaluated through `step_time`, one at a time."""

    def decode_line(self, b: int, ctx: int) -> DecodeLine:
        return SteppedLine(self, b, ctx)


class SteppedLine(DecodeLine):
    """`DecodeLine`'s questions answered step by step."""

    def __init__(self, cost: StepCost, b: int, ctx: int) -> None:
        super().__init__(cost.decode_step(b, ctx), math.nan)
        self.cost, self.b, self.ctx = cost, b, ctx

    def span(self, k: int) -> float:
        return math.fsum(self.cost.decode_step(self.b, self.ctx + self.b * j) for j in range(k))

    def steps_within(self, dt: float) -> int:
        k, total, carry = 0, 0.0, 0.0  # Neumaier-compensated running sum: as exact as fsum
        while True:
            step = self.cost.decode_step(self.b, self.ctx + self.b * k)
            t = total + step
            carry += (total - t) + step if abs(total) >= abs(step) else (step - t) + total
            total = t
            if total + carry > dt + 1e-12:
                return k
            k += 1


def stepped(profile: EngineProfile) -> EngineProfile:
    return dataclasses.replace(profile, cost=SteppedCost(**vars(profile.cost)))


def _random_cost(rng: random.Random) -> StepCost:
    return StepCost(
        step_s=rng.choice([0.0, 0.002, 0.02]),
        seq_s=rng.choice([0.0, 1e-4]),
        weights_s=rng.choice([0.0, 0.005, 0.02]),
        kv_token_s=rng.choice([0.0, 4.7e-7, 2e-6, 5e-5]),
        act_token_s=rng.choice([0.0, 3e-5]),
        token_s=rng.choice([0.0, 5e-4, 3e-3]),
        sample_s=rng.choice([0.0, 3e-5]),
        attn_pair_s=rng.choice([0.0, 2e-8, 1e-6]),
    )


def test_a_decode_lines_first_step_is_exactly_the_decode_step() -> None:
    # the engine tests whether a decode segment can start with the line's first step
    rng = random.Random(1)
    for _ in range(2000):
        try:
            cost = _random_cost(rng)
        except ValueError:
            continue
        b, ctx = rng.randint(1, 64), rng.randint(0, 50_000)
        assert cost.decode_line(b, ctx).first == cost.decode_step(b, ctx)


def _regime(cost: StepCost, b: int, ctx: int, k: int) -> str:
    first = cost.memory_bound(b, b, ctx, ctx)
    last = cost.memory_bound(b, b, ctx + b * (k - 1), ctx + b * (k - 1))
    return f"{'memory' if first else 'compute'}->{'memory' if last else 'compute'}"


def test_decode_span_and_its_inverse_equal_step_by_step_evaluation_in_every_regime():
    rng = random.Random(0)
    regimes: set[str] = set()
    for _ in range(3000):
        try:
            fast = _random_cost(rng)
        except ValueError:
            continue  # a step that takes no time is not a cost
        ref = SteppedCost(**vars(fast))
        b, ctx, k = rng.randint(1, 64), rng.randint(0, 50_000), rng.randint(1, 400)
        regimes.add(_regime(fast, b, ctx, k))
        span = ref.decode_span(b, ctx, k)
        assert fast.decode_span(b, ctx, k) == pytest.approx(span, rel=1e-12, abs=1e-15)
        for dt in (span, span * (1 - 1e-6), span * (1 + 1e-6), rng.random() * span):
            assert fast.decode_steps_within(b, ctx, dt) == ref.decode_steps_within(b, ctx, dt), (fast, b, ctx, dt)
    assert regimes == {"memory->memory", "compute->compute", "compute->memory", "memory->compute"}


def _same(a, b) -> bool:
    """Structural equality; floats equal to 1e-9 relative."""
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _finished(fs: list) -> list:
    return [(f.request.id, f.first_token_time, f.finish_time, f.scheduled_time) for f in fs]


def _observe(e: ReplicaEngine) -> tuple:
    stats = e.drain_stats()
    return (
        e.num_waiting,
        e.num_running,
        e.outstanding,
        e.kv_usage,
        sorted(e.running_progress().items()),
        [(r.id, t) for r, t in e.first_tokens()],
        e.total_preemptions,
        stats.prompt_tokens,
        stats.generation_tokens,
        stats.preemptions,
        list(stats.inter_token_latencies),
        list(stats.step_tokens),
        e.next_event_time(),
        e.step_bound(),
    )


def _trajectory(seed: int, reference: bool) -> list:
    """Everything one random workload makes an engine report, in order."""
    rng = random.Random(seed)
    base = rng.choice(sorted(PROFILES.values(), key=lambda p: p.name))
    costs = [
        base.cost,
        _random_cost(random.Random(seed)),
        StepCost(step_s=0.002, weights_s=0.005, kv_token_s=2e-6, token_s=3e-3),
    ]
    profile = dataclasses.replace(
        base,
        cost=rng.choice(costs),
        kv_cache_tokens=rng.choice([base.kv_cache_tokens, 3000, 6000, 12000, 20000]),
        max_num_seqs=rng.choice([base.max_num_seqs, 2, 4, 12, 64]),
        max_num_batched_tokens=rng.choice([base.max_num_batched_tokens, 256, 512, 4096]),
        max_model_len=max(base.max_model_len, 20000),
    )
    if reference:
        profile = stepped(profile)
    t = rng.choice([0.0, 3.5])
    engine = ReplicaEngine(profile, t, record_stats=rng.random() < 0.5)
    rate = rng.choice([0.5, 3.0, 20.0, 100.0])
    max_prompt, max_output = rng.choice([100, 1500, 2500]), rng.choice([5, 200, 600])
    out: list = []
    ids: list[int] = []
    for rid in range(rng.choice([50, 200, 400])):
        r = rng.random()
        if r < 0.45:  # an arrival, as the simulator does it: advance, then submit
            t += rng.expovariate(rate)
            out.append(_finished(engine.advance(t)))
            prompt, output = rng.randint(1, max_prompt), rng.randint(1, max_output)
            if prompt + output + profile.block_size > profile.kv_cache_tokens:
                prompt = profile.kv_cache_tokens // 2 - output - profile.block_size
            if prompt >= 1:
                arrival = t + (rng.random() * 0.5 if rng.random() < 0.1 else 0.0)  # sometimes ahead
                engine.submit(Request(rid, arrival, prompt, output), t)
                ids.append(rid)
        elif r < 0.6:  # reads at arbitrary times, from far below one step to many steps
            t += rng.random() * rng.choice([1e-4, 0.01, 0.5, 5.0])
            out.append(_finished(engine.advance(t)))
        elif r < 0.7:  # exactly at the engine's next event
            ne = engine.next_event_time()
            if ne is not None and ne >= t:
                t = ne
                out.append(_finished(engine.advance(t)))
        elif r < 0.75 and ids:
            out.append(engine.abort(rng.choice(ids)))
        out.append(_observe(engine))
        out.append(engine._clock)
    while (ne := engine.next_event_time()) is not None:
        out.append(_finished(engine.advance(ne)))
        out.append(_observe(engine))
    return out


def test_engine_with_the_fast_path_matches_the_step_by_step_engine_on_random_workloads():
    for seed in SEEDS:
        fast, ref = _trajectory(seed, reference=False), _trajectory(seed, reference=True)
        assert len(fast) == len(ref), f"seed {seed}"
        for i, (a, b) in enumerate(zip(fast, ref)):
            assert _same(a, b), f"seed {seed}, record {i}: {a!r} != {b!r}"


@pytest.mark.parametrize(
    ("profile", "trace"),
    [
        (
            "a10g-r1-14b-awq",
            "synthetic:step:base=2,peak=9,at=300,length=600,duration=1200,prompt=1024,output=128,sigma=0.6,seed=3",
        ),
        (
            "8gb-qwen2.5-3b-eager",
            "synthetic:step:base=2,peak=8,at=200,length=400,duration=800,prompt=700,output=400,sigma=0.8,seed=5",
        ),
    ],
)
def test_fast_path_matches_step_by_step_through_the_simulator(profile, trace):
    """The prod stack's policy on a load step: the same per-request results and control loop."""
    from capacity.planning.run import RunOptions, run_policy
    from capacity.planning.stack import load_stack_model
    from capacity.workload import traces

    sm = load_stack_model("prod", profile=profile, root=REPO)
    tr = traces.load(trace)

    def run(model):
        r = run_policy(model, tr, RunOptions(initial_replicas=1))
        tl = r.timeline
        return r, (r.scale_events, r.max_replicas_used, tl.desired, tl.ready)

    fast, fast_loop = run(sm)
    ref, ref_loop = run(dataclasses.replace(sm, profile=stepped(sm.profile)))
    np.testing.assert_array_equal(fast.outcome, ref.outcome)
    for field in ("arrival", "ttft", "e2e"):
        np.testing.assert_allclose(getattr(fast, field), getattr(ref, field), rtol=1e-9, atol=1e-9)
    assert fast_loop == ref_loop
