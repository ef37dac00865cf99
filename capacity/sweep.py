"""Measure a replica's capacity envelope: closed-loop load at each concurrency; CSV, PNG, Markdown.

Each --url is one replica: with several, every level runs that concurrency per replica
(round-robin) and the envelope is reported per replica. A gateway URL with N replicas behind
it measures the whole pool. Queue and KV columns come from the replica's /metrics (sampled
during each measurement window) or, when given, from Prometheus with the KEDA queries.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import aiohttp

from capacity.collector import PrometheusClient, SignalReading, collect, keda_signals
from capacity.envelope import EnvelopeRow, find_knee, write_envelope
from capacity.loadgen import LoadConfig, discover_model, run_load
from capacity.loadgen_cmd import add_load_arguments, config_from_args, progress_bar
from capacity.report import markdown_report, plot_envelope
from contract import signals


@dataclass
class PointResult:
    row: EnvelopeRow
    summary: dict
    keda: dict[str, SignalReading] = field(default_factory=dict)


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--concurrency must be a comma-separated list of integers, got {text!r}") from None
    if not levels or any(c < 1 for c in levels) or len(set(levels)) != len(levels):
        raise ValueError(f"--concurrency needs distinct integers >= 1, got {text!r}")
    return sorted(levels)


class MetricsSampler:
    """Polls replicas' /metrics: requests waiting and KV usage per replica, over time."""

    def __init__(self, urls: list[str], interval_s: float) -> None:
        self.urls = [u.rstrip("/") + "/metrics" for u in urls]
        self.interval_s = interval_s
        self.samples: list[tuple[float, float, float]] = []  # (wall time, waiting/replica, kv/replica)

    async def available(self, session: aiohttp.ClientSession) -> bool:
        try:
            async with session.get(self.urls[0]) as response:
                return response.status == 200 and signals.Vllm.REQUESTS_WAITING in await response.text()
        except aiohttp.ClientError:
            return False

    async def run(self, session: aiohttp.ClientSession) -> None:
        while True:
            texts = await asyncio.gather(*(self._fetch(session, u) for u in self.urls))
            waiting = [_gauge(t, signals.Vllm.REQUESTS_WAITING) for t in texts if t]
            kv = [_gauge(t, signals.Vllm.KV_CACHE_USAGE) for t in texts if t]
            if waiting:
                self.samples.append((time.time(), sum(waiting) / len(waiting), sum(kv) / len(kv)))
            await asyncio.sleep(self.interval_s)

    @staticmethod
    async def _fetch(session: aiohttp.ClientSession, url: str) -> str | None:
        try:
            async with session.get(url) as response:
                return await response.text() if response.status == 200 else None
        except aiohttp.ClientError:
            return None

    def window(self, start: float, end: float) -> list[tuple[float, float, float]]:
        return [s for s in self.samples if start <= s[0] <= end]


def _gauge(text: str, name: str) -> float:
    """Sum of a gauge's series in Prometheus text (one replica may serve several model names)."""
    prefix = name + "{"
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


@dataclass(frozen=True)
class SweepOptions:
    levels: list[int]
    sample_interval_s: float = 1.0  # wall seconds between /metrics samples
    prometheus: str | None = None
    scope_model: str | None = None  # model_name label for the KEDA queries (default: the requested model)
    queue_window_s: int = 60  # Prometheus (wall) windows
    latency_window_s: int = 120


async def run_sweep(base: LoadConfig, options: SweepOptions, on_point=None, progress=None) -> list[PointResult]:  # noqa: ANN001
    points: list[PointResult] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        if base.model is None:  # one name for every level and for the KEDA queries' model_name
            headers = {"Authorization": f"Bearer {base.api_key}"} if base.api_key else {}
            base = replace(base, model=await discover_model(session, base.urls[0], headers))
        sampler = MetricsSampler(list(base.urls), options.sample_interval_s)
        sample = await sampler.available(session)
        for level in options.levels:
            replicas = len(base.urls)
            config = replace(base, concurrency=level * replicas, rate=None, trace=None)
            started = time.time()
            task = asyncio.create_task(sampler.run(session)) if sample else None
            try:
                result = await run_load(config, progress)
            finally:
                if task:
                    task.cancel()
            s = result.summary
            w0 = started + config.warmup_s / config.time_scale
            w1 = started + (config.warmup_s + config.duration_s) / config.time_scale
            window = sampler.window(w0, w1) if sample else []
            keda: dict[str, SignalReading] = {}
            if options.prometheus:
                keda = _keda(options, config, w0, w1)
            avg_waiting = max_waiting = kv = None
            if window:
                avg_waiting = sum(x[1] for x in window) / len(window)
                max_waiting = max(x[1] for x in window)
                kv = sum(x[2] for x in window) / len(window)
            elif keda and keda["requests_waiting"].mean is not None:
                avg_waiting = keda["requests_waiting"].mean / replicas
                max_waiting = (keda["requests_waiting"].max or 0) / replicas
                kv = (keda["kv_cache_usage"].mean or 0) / replicas
            if not s["successful"]:
                raise ValueError(f"no successful request at concurrency {level}: errors {s['errors']}")
            row = EnvelopeRow(
                concurrency=level,
                successful_rps=s["successful_rps"] / replicas,
                total_tokens_per_s=s["total_tokens_per_s"] / replicas,
                p95_latency_s=s["latency_s"]["p95"],
                p99_latency_s=s["latency_s"]["p99"],
                avg_waiting=avg_waiting,
                max_waiting=max_waiting,
                ttft_p95_s=s["ttft_s"]["p95"],
                avg_kv_usage=kv,
            )
            point = PointResult(row, s, keda)
            points.append(point)
            sampler.samples.clear()
            if on_point:
                on_point(point)
    return points


def _keda(options: SweepOptions, config: LoadConfig, start: float, end: float) -> dict[str, SignalReading]:
    client = PrometheusClient(options.prometheus)
    try:
        queries = keda_signals(signals.Scope(options.scope_model or config.model or ""),
                               queue_window_s=options.queue_window_s, latency_window_s=options.latency_window_s)  # fmt: skip
        time.sleep(1.5)  # let the last scrape of the window land
        return collect(client, queries, start, end, step=1.0, time_scale=config.time_scale)
    finally:
        client.close()


def write_outputs(points: list[PointResult], out: Path, title: str, slo_p99: float | None = None,
                  recommendations: list[str] | None = None) -> dict[str, Path]:  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    rows = [p.row for p in points]
    paths = {"csv": out / "envelope.csv", "png": out / "envelope.png", "md": out / "report.md", "json": out / "points.json"}
    write_envelope(paths["csv"], rows)
    knee = find_knee(rows) if len(rows) >= 2 else None
    plot_envelope(rows, knee, paths["png"], title, slo_p99)
    paths["md"].write_text(markdown_report(rows, knee, title, paths["png"].name, points, slo_p99, recommendations))
    paths["json"].write_text(json.dumps([{"summary": p.summary, "keda": {k: {"query": v.query, "instant": v.instant,
                             "mean": v.mean, "max": v.max} for k, v in p.keda.items()}} for p in points], indent=2))  # fmt: skip
    return paths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_load_arguments(parser, sweep=True)
    parser.add_argument("--concurrency", default="1,5,10,20,40", help="comma-separated concurrency levels")
    parser.add_argument("--no-stream", action="store_true", help="non-streaming requests (no TTFT column)")
    parser.add_argument("--prometheus", default=None, help="also read the KEDA signals from this Prometheus")
    parser.add_argument("--sample-interval", type=float, default=1.0, help="wall seconds between /metrics samples")
    parser.add_argument("--out", type=Path, default=Path("out/sweep"))
    parser.add_argument("--slo-p99", type=float, default=None, help="add threshold recommendations to the report")
    parser.add_argument("--slo-ttft-p95", type=float, default=None)
    parser.add_argument("--stack", default="dev", help="stack for the recommended commands")


def run(args: argparse.Namespace) -> int:
    from capacity.recommend import commands, current_values, recommend, report_lines

    levels = parse_levels(args.concurrency)
    args.stream = not args.no_stream
    base = config_from_args(args, concurrency=levels[0])

    def show(point: PointResult) -> None:
        r = point.row
        print(f"concurrency {r.concurrency:4d}: {r.successful_rps:7.2f} req/s  p99 {r.p99_latency_s:7.2f}s"
              + (f"  waiting {r.avg_waiting:5.2f}" if r.avg_waiting is not None else ""), flush=True)  # fmt: skip

    options = SweepOptions(levels, args.sample_interval, args.prometheus)
    with progress_bar(not args.no_progress, "sweep") as update:
        points = asyncio.run(run_sweep(base, options, show, update))
    recs = None
    if args.slo_p99:
        rec = recommend([p.row for p in points], args.slo_p99, args.slo_ttft_p95)
        current, _ = current_values(args.stack, args.model or "default")
        recs = [*report_lines(rec, args.slo_p99), *commands(rec, args.stack, args.model, current)]
        print("\n".join(recs))
    paths = write_outputs(points, args.out, f"Capacity envelope of {', '.join(args.url)}", args.slo_p99, recs)
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
