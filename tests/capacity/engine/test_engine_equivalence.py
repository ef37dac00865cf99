"""The optimised ReplicaEngine is bit-identical to the reference engine it replaced.

`ReplicaEngine.advance` inlines its step-time arithmetic and skips work that cannot change
the outcome (e.g. no step fits before `now`). Every float it produces must still be the
exact same IEEE value as the straightforward code at REFERENCE (the last engine commit before
the optimisation), because the simulator's results depend on them (a decode segment split
differently rounds differently).

- `test_matches_the_reference_*`: the reference engine is loaded from git (skipped when the
  commit is not available, e.g. a shallow clone) and driven side by side with the current one
  through random submit / advance / abort / next_event_time / observation sequences, and
  through the scaling simulator; every observable is compared exactly (floats as hex).
- `test_digest_is_unchanged`: the same random sequences' digest, recorded from the reference
  engine, so the check also runs without git history.

An intended change to the model's behaviour fails these tests: move REFERENCE to the new
model's commit and re-record DIGEST (print `_digest(SEEDS, _reference())`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from capacity import engine as current
from capacity.engine import PROFILES

REPO = Path(__file__).resolve().parents[3]
REFERENCE = "7d384c1ce86bf893c40cea27319531af9f5f444b"  # capacity/engine.py before the fast paths
SEEDS = range(100)
DIGEST = "aca04bfc19766a522b9eb47a1150c0aa7510f0472436dc2ceb13f84afb52bf58"  # _digest(SEEDS, _reference())


def _reference() -> ModuleType:
    try:
        source = subprocess.run(
            ["git", "show", f"{REFERENCE}:capacity/engine.py"], cwd=REPO, capture_output=True, check=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"reference engine {REFERENCE[:12]} is not in this checkout's git history")
    name = "capacity_engine_reference"
    module = ModuleType(name)
    module.__file__ = f"<git {REFERENCE[:12]}:capacity/engine.py>"
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def _h(x: float | int) -> str:
    return float(x).hex()


def _finished(fs: list) -> list:
    return [(f.request.id, _h(f.first_token_time), _h(f.finish_time), _h(f.scheduled_time)) for f in fs]


def _observe(e) -> tuple:
    stats = e.drain_stats()
    ne = e.next_event_time()
    return (
        e.num_waiting,
        e.num_running,
        e.outstanding,
        _h(e.kv_usage),
        sorted(e.running_progress().items()),
        [(r.id, _h(t)) for r, t in e.first_tokens()],
        e.total_preemptions,
        stats.prompt_tokens,
        stats.generation_tokens,
        stats.preemptions,
        [(_h(d), n) for d, n in stats.inter_token_latencies],
        list(stats.step_tokens),
        None if ne is None else _h(ne),
    )


def _trajectory(module: ModuleType, seed: int) -> list:
    """Everything one random workload makes the engine of `module` report, in order."""
    rng = random.Random(seed)
    base = rng.choice(sorted(PROFILES.values(), key=lambda p: p.name))
    profile = module.EngineProfile(
        **{
            **dataclasses.asdict(base),
            "kv_cache_tokens": rng.choice([base.kv_cache_tokens, 3000, 6000, 12000, 20000]),
            "max_num_seqs": rng.choice([base.max_num_seqs, 2, 4, 12, 64]),
            "max_num_batched_tokens": rng.choice([base.max_num_batched_tokens, 256, 512, 4096]),
            "step_per_kv_token_s": rng.choice([base.step_per_kv_token_s, 0.0, 1.8e-6, 5e-5]),
            "max_model_len": max(base.max_model_len, 20000),
        }
    )
    t = rng.choice([0.0, 3.5])
    engine = module.ReplicaEngine(profile, t, record_stats=rng.random() < 0.5)
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
                engine.submit(module.Request(rid, arrival, prompt, output), t)
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
        out.append(_h(engine._clock))
    while (ne := engine.next_event_time()) is not None:
        out.append(_finished(engine.advance(ne)))
        out.append(_observe(engine))
    return out


def _digest(seeds, module: ModuleType = current) -> str:
    h = hashlib.sha256()
    for seed in seeds:
        h.update(repr(_trajectory(module, seed)).encode())
    return h.hexdigest()


def test_digest_is_unchanged():
    assert _digest(SEEDS) == DIGEST


def test_matches_the_reference_on_random_workloads():
    ref = _reference()
    for seed in SEEDS:
        assert _trajectory(current, seed) == _trajectory(ref, seed), f"seed {seed}"


@pytest.mark.parametrize(
    ("profile", "trace"),
    [
        ("a10g-r1-14b-awq", "synthetic:step:base=2,peak=9,at=300,length=900,duration=1800,prompt=1024,output=128,sigma=0.6,seed=3"),
        ("8gb-qwen2.5-3b-eager", "synthetic:step:base=2,peak=8,at=200,length=600,duration=1200,prompt=700,output=400,sigma=0.8,seed=5"),
    ],
)
def test_matches_the_reference_through_the_simulator(profile, trace, monkeypatch):
    """The prod stack's policy on a load step: identical per-request results and control loop."""
    import numpy as np

    from capacity.workload import traces
    from capacity.sim import simulator
    from capacity.sim.run import RunOptions, run_policy
    from capacity.sim.from_stack import load_stack_model

    ref = _reference()
    sm = load_stack_model("prod", profile=profile, root=REPO)
    tr = traces.load(trace)

    def run(engine_cls):
        monkeypatch.setattr(simulator, "ReplicaEngine", engine_cls)
        r = run_policy(sm, tr, RunOptions(initial_replicas=1))
        tl = r.timeline
        return (
            [np.asarray(a, dtype="<f8").tobytes() for a in (r.arrival, r.ttft, r.e2e, r.outcome)],
            sorted(r.gpu_seconds.items()), r.cost_usd, r.scale_events, r.max_replicas_used, r.end_time,
            tl.t, tl.desired, tl.ready, sorted(tl.signals.items()),
        )  # fmt: skip

    after = run(current.ReplicaEngine)
    before = run(ref.ReplicaEngine)
    assert after[0] == before[0]  # per-request arrival, TTFT, E2E, outcome: bit for bit
    assert after == before
