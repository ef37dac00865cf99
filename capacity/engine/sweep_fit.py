"""A measured profile from one sweep of one replica: the engine's structure (roofline + vLLM's
scheduler) with only what a single closed-loop sweep can identify fitted to its rows.

A sweep holds one request shape on one replica at several concurrencies. Its light levels
(concurrency 1..a few) are decode steps of small batches: their time is the weights read at the
achieved bandwidth plus the engine's CPU time per step; its saturated levels are full token
budgets of prefill chunks: their time is the GEMM rate. So a sweep identifies three numbers of
the `Calibration` and no more (`FITTED`):
- the achieved fraction of the datasheet bandwidth of the GPU's memory class,
- the achieved fraction of its sustained GEMM rate,
- the scheduler generation's CPU time per engine step.
Everything else (GEMM fill, per-sequence CPU, the API server's per-request cost, the other
memory class and scheduler generation) stays at the global calibration fitted on
../shared/calibration/ (`profiles.CALIBRATED`): one request shape cannot tell the per-sequence
cost from the per-step one, nor the GEMM fill from the GEMM rate.

Validation is leave-one-concurrency-out: each row predicted by the fit of the other rows
(`held_out`), and the error per regime (light: concurrency <= 16; saturated: above) is what a
measured profile's trust rests on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from capacity.engine.fit import LIGHT_CONCURRENCY, Point, SweepRow, loss, nelder_mead, summary
from capacity.engine.hardware import Checkpoint, Gpu
from capacity.engine.measured import EngineFlags
from capacity.engine.profile import EngineProfile
from capacity.engine.profiles import CALIBRATED, derive
from capacity.engine.roofline import Calibration, scheduler_of
from capacity.engine.steady_state import predict

FITTED = ("bandwidth", "compute", "step_s")
MIN_FIT_ROWS = len(FITTED)  # each fold fits its 3 numbers on >= 3 levels (6 measured values)
MIN_ROWS = MIN_FIT_ROWS + 1  # and holds one level out
SOURCE = "sweep"
ITERATIONS = 20  # Nelder-Mead steps per fit: 3 numbers from a start near them (the calibration sweep: ~25 evaluations)


@dataclass(frozen=True)
class SweepSetup:
    """What was swept: one replica (GPU, checkpoint, flags) under one closed-loop request shape."""

    gpu: Gpu
    checkpoint: Checkpoint
    flags: EngineFlags
    prompt_tokens: int
    output_tokens: int
    warmup_s: float  # model seconds before each level's measured window (the sweep's)
    measure_s: float  # each level's measured window, model seconds (the sweep's)


@dataclass(frozen=True)
class SweepFit:
    calibration: Calibration
    in_sample: list[Point]  # every row predicted by the fit of every row
    held_out: list[Point]  # each row predicted by the fit of the other rows


def fitted_values(calibration: Calibration, setup: SweepSetup) -> list[float]:
    """The `FITTED` numbers of `calibration` for this replica's memory class and scheduler."""
    cpu = calibration.schedulers[scheduler_of(setup.flags.vllm_version)]
    return [calibration.bandwidth[setup.gpu.memory_class], calibration.compute, cpu.step_s]


def with_fitted(base: Calibration, setup: SweepSetup, values: Sequence[float]) -> Calibration:
    """`base` with this replica's `FITTED` numbers replaced by `values` (a ValueError if out of range)."""
    bandwidth, compute, step_s = values
    scheduler = scheduler_of(setup.flags.vllm_version)
    return replace(
        base,
        bandwidth={**base.bandwidth, setup.gpu.memory_class: bandwidth},
        compute=compute,
        schedulers={**base.schedulers, scheduler: replace(base.schedulers[scheduler], step_s=step_s)},
    )


def profile_of(name: str, setup: SweepSetup, calibration: Calibration, description: str = "") -> EngineProfile:
    f = setup.flags
    return derive(
        name,
        setup.checkpoint,
        setup.gpu,
        max_model_len=f.max_model_len,
        max_num_seqs=f.max_num_seqs,
        max_num_batched_tokens=f.max_num_batched_tokens,
        gpu_memory_utilization=f.gpu_memory_utilization,
        calibration=calibration,
        vllm_version=f.vllm_version,
        description=description,
    )


def regime_of(concurrency: int) -> str:
    return "light" if concurrency <= LIGHT_CONCURRENCY else "saturated"


def points(rows: Sequence[SweepRow], setup: SweepSetup, calibration: Calibration) -> list[Point]:
    """Each row's throughput and p99 latency, measured and predicted by the closed-loop steady state."""
    profile = profile_of("sweep-fit", setup, calibration)
    out = []
    for r in rows:
        s = predict(
            profile,
            r.concurrency,
            setup.prompt_tokens,
            setup.output_tokens,
            warmup_s=setup.warmup_s,
            measure_s=setup.measure_s,
        )
        name, regime = f"c{r.concurrency}", regime_of(r.concurrency)
        out.append(Point(SOURCE, name, setup.gpu.name, "successful_rps", regime, r.rps, s.rps))
        out.append(Point(SOURCE, name, setup.gpu.name, "p99_latency_s", regime, r.p99_latency_s, s.p99_latency_s))
    return out


def fit_rows(
    rows: Sequence[SweepRow], setup: SweepSetup, start: Calibration = CALIBRATED, iterations: int = ITERATIONS
) -> Calibration:
    """`start` with its `FITTED` numbers minimising the rows' mean squared log error."""

    def objective(x: np.ndarray) -> float:
        try:
            return loss(points(rows, setup, with_fitted(start, setup, [float(v) for v in np.exp(x)])))
        except ValueError:
            return math.inf  # a fraction out of range, or a replica that cannot start

    x0 = np.log(fitted_values(start, setup))
    best = nelder_mead(objective, x0, step=0.2, iterations=iterations)
    return with_fitted(start, setup, [float(v) for v in np.exp(best)])


def fit_sweep(
    rows: Sequence[SweepRow],
    setup: SweepSetup,
    start: Calibration = CALIBRATED,
    iterations: int = ITERATIONS,
    on_fold: Callable[[int, int], None] | None = None,
) -> SweepFit:
    """The fit of every row (its in-sample error) and, leaving one concurrency out at a time, each
    row's held-out prediction; every fold starts from `start` (never from the fit that saw its
    row). `on_fold(done, total)` after each fit. A ValueError when there are too few levels."""
    if len(rows) < MIN_ROWS:
        raise ValueError(
            f"the sweep has {len(rows)} concurrency level(s); fitting {len(FITTED)} numbers "
            f"({', '.join(FITTED)}) and holding one level out needs at least {MIN_ROWS}"
        )
    calibration = fit_rows(rows, setup, start, iterations)
    if on_fold:
        on_fold(1, len(rows) + 1)
    held: list[Point] = []
    for i, row in enumerate(rows):
        fold = fit_rows([r for j, r in enumerate(rows) if j != i], setup, start, iterations)
        held += points([row], setup, fold)
        if on_fold:
            on_fold(i + 2, len(rows) + 1)
    return SweepFit(calibration, points(rows, setup, calibration), held)


def errors_by_regime(held: Sequence[Point]) -> dict[str, float | None]:
    """Median |error| of the held-out points per regime (None where the sweep has no level)."""
    out: dict[str, float | None] = {}
    for regime in ("light", "saturated"):
        mine = [p for p in held if p.regime == regime]
        out[regime] = summary(mine)["median"] if mine else None
    return out
