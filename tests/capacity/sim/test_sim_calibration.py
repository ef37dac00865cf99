"""One simulated replica at fixed concurrency reproduces the measured A10G table within 15%."""

import csv
from pathlib import Path

import numpy as np
import pytest

from capacity.engine import get_profile
from capacity.sim.cluster.startup import Pool, Startup
from capacity.sim.simulator import OK, SimConfig, simulate
from capacity.workload.traces import Trace

CALIBRATION = (
    Path(__file__).resolve().parents[3] / ".." / "shared" / "calibration" / "a10g-deepseek-r1-14b-awq-concurrency.csv"
)
WARMUP_S, MEASURE_S = 30.0, 480.0


def rows():
    if not CALIBRATION.is_file():
        pytest.skip(f"calibration table not present at {CALIBRATION}")
    with open(CALIBRATION) as handle:
        return list(csv.DictReader(handle))


def closed_loop(concurrency: int):
    n = 4000
    shapes = Trace("calibration", np.zeros(n), np.full(n, 1024), np.full(n, 128))
    config = SimConfig(
        profile=get_profile("a10g-r1-14b-awq"),
        pools=(Pool("gpu-on-demand", "on-demand", 10, 1, 1.0),),
        startup=Startup((0, 0), (0, 0), 0.0, (0, 0)),
        initial_replicas=1,
        closed_loop_clients=concurrency,
        closed_loop_s=WARMUP_S + MEASURE_S,
    )
    result = simulate(config, shapes, None)
    finish = result.arrival + result.e2e
    measured = (result.outcome == OK) & (finish >= WARMUP_S) & (finish <= WARMUP_S + MEASURE_S)
    return measured.sum() / MEASURE_S, float(np.percentile(result.e2e[measured], 99))


@pytest.mark.parametrize("row", rows(), ids=lambda r: f"concurrency-{r['concurrency']}")
def test_single_replica_matches_measured_throughput_and_p99(row):
    rps, p99 = closed_loop(int(row["concurrency"]))
    assert rps == pytest.approx(float(row["successful_rps"]), rel=0.15)
    assert p99 == pytest.approx(float(row["p99_latency_s"]), rel=0.15)
