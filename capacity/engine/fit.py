"""Fit the three efficiency factors to closed-loop measurements (the calibration CSV).

The loss is the sum of squared log errors of throughput and p99 latency over the rows, each
row predicted by the same closed-loop steady state as the measurement (`predict`). The search
is a small Nelder-Mead simplex over the log of the factors (numpy only)."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from capacity.engine.profile import EngineProfile
from capacity.engine.roofline import Efficiency
from capacity.engine.steady_state import SteadyState, predict


@dataclass(frozen=True)
class Row:
    """One closed-loop measurement: concurrency and request shape -> throughput and p99."""

    concurrency: int
    prompt_tokens: int
    output_tokens: int
    rps: float
    p99_latency_s: float


def read_rows(path: Path, prompt_tokens: int, output_tokens: int) -> list[Row]:
    """The calibration CSV's rows (it records one request shape; the README names it)."""
    with path.open() as f:
        return [
            Row(
                int(r["concurrency"]),
                prompt_tokens,
                output_tokens,
                float(r["successful_rps"]),
                float(r["p99_latency_s"]),
            )
            for r in csv.DictReader(f)
        ]


def predict_rows(profile: EngineProfile, rows: Sequence[Row]) -> list[SteadyState]:
    return [predict(profile, r.concurrency, r.prompt_tokens, r.output_tokens) for r in rows]


def loss(states: Sequence[SteadyState], rows: Sequence[Row]) -> float:
    return sum(
        math.log(s.rps / r.rps) ** 2 + math.log(s.p99_latency_s / r.p99_latency_s) ** 2 for s, r in zip(states, rows)
    )


def fit(
    build: Callable[[Efficiency], EngineProfile],
    rows: Sequence[Row],
    start: Efficiency,
    iterations: int = 120,
) -> Efficiency:
    """The efficiency factors minimising `loss` over `rows` for the profile `build` makes."""

    def decode(x: np.ndarray) -> Efficiency:
        bandwidth, flops, overhead = (float(v) for v in np.exp(x))
        return Efficiency(min(bandwidth, 1.0), min(flops, 1.0), overhead)

    def objective(x: np.ndarray) -> float:
        return loss(predict_rows(build(decode(x)), rows), rows)

    x0 = np.log([start.bandwidth, start.flops, start.step_overhead_s])
    return decode(_nelder_mead(objective, x0, step=0.15, iterations=iterations))


def _nelder_mead(f: Callable[[np.ndarray], float], x0: np.ndarray, step: float, iterations: int) -> np.ndarray:
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
