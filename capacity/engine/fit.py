"""Fit the engine's `Calibration` on ../shared/calibration/ only, and measure it leave-one-source-out.

The fit set is every row of the calibration directory, nothing else:
- the A10G sweep (a10g-deepseek-r1-14b-awq-concurrency.csv): closed loop at concurrency 1-40 on
  the calibrated replica (vLLM v0.25.1), each row's throughput and p99 latency, predicted by the
  same closed-loop steady state as the measurement (`steady_state.predict`);
- the public vLLM measurements (public/vllm-public-measurements.csv), each replayed from its
  scenario file in benchmarks/scenarios/public/ (its GPU, model, flags, vLLM version, arrival
  pattern and lengths) through `scenario.run`. Its GEMM rows are not fitted here: they are the
  sustained compute figures of data/gpus.yaml.

The loss is the mean over sources of each source's mean squared log error, so a source with many
rows does not outweigh one with few; the search is a Nelder-Mead simplex over the log of the nine
calibration values (numpy only). A point's regime is "light" (concurrency <= 16, a Poisson rate,
a burst of <= 16, an offline batch of <= 8) or "saturated" (bigger bursts and batches,
concurrency > 16).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from capacity.engine.profiles import CALIBRATED, calibrated
from capacity.engine.roofline import Calibration
from capacity.engine.scenario import Scenario, load, run
from capacity.engine.steady_state import predict

SWEEP_SOURCE = "a10g-sweep"
SWEEP_SHAPE = (1024, 128)  # the calibration sweep's request shape (../shared/calibration/README.md)
SWEEP_WEIGHT = 2.0  # the calibrated replica is the one production runs on: its rows count double
LIGHT_CONCURRENCY = 16


@dataclass(frozen=True)
class SweepRow:
    concurrency: int
    rps: float
    p99_latency_s: float


@dataclass(frozen=True)
class Point:
    """One measured number and what the engine predicts for it."""

    source: str
    name: str
    gpu: str
    metric: str
    regime: str  # "light" or "saturated"
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


def source_of(scenario: Scenario) -> str:
    """The publisher a scenario's measurement comes from (what leave-one-source-out leaves out)."""
    return scenario.name.split("-")[0]


def regime_of(scenario: Scenario) -> str:
    n = scenario.arrival_value
    if scenario.arrival == "poisson":
        return "light"
    if scenario.arrival == "concurrency":
        return "light" if n <= LIGHT_CONCURRENCY else "saturated"
    if scenario.arrival == "burst":  # N requests at once: a closed loop's first N in flight
        return "light" if n <= LIGHT_CONCURRENCY else "saturated"
    return "light" if n <= 8 else "saturated"


def read_sweep(path: Path) -> list[SweepRow]:
    with path.open() as f:
        return [
            SweepRow(int(r["concurrency"]), float(r["successful_rps"]), float(r["p99_latency_s"]))
            for r in csv.DictReader(f)
        ]


def load_scenarios(directory: Path) -> list[Scenario]:
    return [load(p) for p in sorted(directory.glob("*.yaml"))]


def sweep_points(rows: Sequence[SweepRow], calibration: Calibration) -> list[Point]:
    profile = calibrated(calibration)
    out = []
    for r in rows:
        s = predict(profile, r.concurrency, *SWEEP_SHAPE)
        regime = "light" if r.concurrency <= LIGHT_CONCURRENCY else "saturated"
        name = f"a10g-r1-14b-awq-c{r.concurrency}"
        out.append(Point(SWEEP_SOURCE, name, "a10g", "successful_rps", regime, r.rps, s.rps))
        out.append(Point(SWEEP_SOURCE, name, "a10g", "p99_latency_s", regime, r.p99_latency_s, s.p99_latency_s))
    return out


def scenario_points(scenarios: Sequence[Scenario], calibration: Calibration) -> list[Point]:
    out = []
    for s in scenarios:
        m = run(s, calibration)
        for metric, value in s.measured.items():
            out.append(Point(source_of(s), s.name, s.gpu.name, metric, regime_of(s), value, m.metric(metric)))
    return out


def all_points(rows: Sequence[SweepRow], scenarios: Sequence[Scenario], calibration: Calibration) -> list[Point]:
    return sweep_points(rows, calibration) + scenario_points(scenarios, calibration)


def loss(points: Sequence[Point]) -> float:
    by_source: dict[str, list[float]] = {}
    for p in points:
        by_source.setdefault(p.source, []).append(math.log(max(p.predicted, 1e-12) / p.measured) ** 2)
    return sum(
        (SWEEP_WEIGHT if src == SWEEP_SOURCE else 1.0) * statistics.fmean(errs) for src, errs in by_source.items()
    )


def fit(
    rows: Sequence[SweepRow],
    scenarios: Sequence[Scenario],
    start: Calibration = CALIBRATED,
    iterations: int = 400,
) -> Calibration:
    """The calibration minimising `loss` over these sweep rows and scenarios."""

    def decode(x: np.ndarray) -> Calibration:
        return Calibration.from_vector([float(v) for v in np.exp(x)])

    def objective(x: np.ndarray) -> float:
        try:
            return loss(all_points(rows, scenarios, decode(x)))
        except ValueError:
            return math.inf  # out of range, or a replica that cannot start

    x0 = np.log(start.as_vector())
    return decode(nelder_mead(objective, x0, step=0.2, iterations=iterations))


def _held_out(
    held: str, rows: Sequence[SweepRow], scenarios: Sequence[Scenario], start: Calibration, iterations: int
) -> list[Point]:
    keep_rows = [] if held == SWEEP_SOURCE else list(rows)
    keep = [s for s in scenarios if source_of(s) != held]
    c = fit(keep_rows, keep, start, iterations)
    if held == SWEEP_SOURCE:
        return sweep_points(rows, c)
    return scenario_points([s for s in scenarios if source_of(s) == held], c)


def leave_one_source_out(
    rows: Sequence[SweepRow],
    scenarios: Sequence[Scenario],
    start: Calibration = CALIBRATED,
    iterations: int = 100,
    workers: int = 1,
) -> list[Point]:
    """Each source's points predicted by a calibration fitted on every other source (one fold
    per source, `workers` folds at once)."""
    sources = sorted({source_of(s) for s in scenarios} | ({SWEEP_SOURCE} if rows else set()))
    if workers <= 1:
        return [p for held in sources for p in _held_out(held, rows, scenarios, start, iterations)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_held_out, held, rows, scenarios, start, iterations) for held in sources]
        return [p for f in futures for p in f.result()]


def summary(points: Sequence[Point]) -> dict[str, float]:
    """median / saturated median / light median / worst |error|, and the share within 25%."""
    errs = [abs(p.error) for p in points]
    sat = [abs(p.error) for p in points if p.regime == "saturated"]
    light = [abs(p.error) for p in points if p.regime == "light"]
    return {
        "median": statistics.median(errs) if errs else math.nan,
        "saturated_median": statistics.median(sat) if sat else math.nan,
        "light_median": statistics.median(light) if light else math.nan,
        "worst": max(errs) if errs else math.nan,
        "within_25": sum(e <= 0.25 for e in errs) / len(errs) if errs else math.nan,
        "points": float(len(errs)),
    }


def nelder_mead(f: Callable[[np.ndarray], float], x0: np.ndarray, step: float, iterations: int) -> np.ndarray:
    simplex = [x0] + [x0 + step * np.eye(len(x0))[i] for i in range(len(x0))]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centroid = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        reflected = centroid + (centroid - worst)
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - worst)
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (worst - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:  # shrink towards the best point
                simplex = [simplex[0]] + [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    return simplex[int(np.argmin(values))]
