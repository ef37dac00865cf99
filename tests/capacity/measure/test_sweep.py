"""Sweep outputs: the envelope CSV, its plot and the report."""

import asyncio

import pytest

from capacity.engine import get_profile
from capacity.measure.config import LoadConfig
from capacity.measure.envelope import COLUMNS, read_envelope
from capacity.measure.report import write_report
from capacity.measure.sweep import SweepOptions, run_sweep
from capacity.mock.serving import serve_replicas

FAST = get_profile("8gb-qwen2.5-1.5b")


def test_sweep_writes_envelope_csv_plot_and_report(tmp_path):
    async def sweep():
        async with serve_replicas(FAST, speedup=10) as [replica]:
            # 2 s of wall time per level, requests big enough to hold KV blocks between samples: a busy
            # machine still samples every level several times
            base = LoadConfig(
                urls=(replica.url,),
                concurrency=1,
                warmup_s=1,
                duration_s=20,
                time_scale=10,
                prompt_tokens=1000,
                output_tokens=100,
                stream=True,
            )
            return await run_sweep(base, SweepOptions([1, 8], sample_interval_s=0.1))

    points = asyncio.run(sweep())
    paths = write_report(points, tmp_path, "test envelope", slo_p99=30, recommendations=["# none"])
    rows = read_envelope(paths["csv"])
    assert [r.concurrency for r in rows] == [1, 8]
    assert paths["csv"].read_text().splitlines()[0] == ",".join(COLUMNS)
    assert rows[1].successful_rps > rows[0].successful_rps
    assert rows[1].avg_kv_usage > rows[0].avg_kv_usage > 0  # sampled from /metrics
    assert rows[0].ttft_p95_s > 0
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| 8 |" in paths["md"].read_text() or "| 8 **(knee)** |" in paths["md"].read_text()


def test_a_model_name_the_replica_does_not_serve_is_refused_before_any_load():
    """Issue 37: `sweep --model qwen25-14b-awq` against `capacity serve` ran into a wall of 404s."""

    async def sweep():
        async with serve_replicas(FAST, speedup=10) as [replica]:
            base = LoadConfig(urls=(replica.url,), model="qwen25-14b-awq", concurrency=1, warmup_s=1, duration_s=2)
            return await run_sweep(base, SweepOptions([1], sample_interval_s=0.1))

    with pytest.raises(
        ValueError, match=r"serves .*, not 'qwen25-14b-awq': request one of them \(sweep --served-model-name\)"
    ):
        asyncio.run(sweep())


def test_sweep_requests_the_served_model_name_and_retunes_the_stack_model():
    from capacity.__main__ import build_parser
    from capacity.cli.load_args import config_from_args

    sweep = next(a for a in build_parser("sweep")._actions if hasattr(a, "choices") and a.choices)
    args = sweep.choices["sweep"].parse_args(
        ["--url", "http://127.0.0.1:1", "--model", "qwen25-14b-awq", "--served-model-name", "Qwen/Qwen2.5-1.5B"]
    )
    assert (args.model, config_from_args(args, concurrency=1).model) == ("qwen25-14b-awq", "Qwen/Qwen2.5-1.5B")
    without = sweep.choices["sweep"].parse_args(["--url", "http://127.0.0.1:1", "--model", "qwen25-14b-awq"])
    assert config_from_args(without, concurrency=1).model == "qwen25-14b-awq"
