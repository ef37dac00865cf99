"""Measure a replica's capacity envelope: closed-loop load at each concurrency level.

Each --url is one replica: with several, every level runs that concurrency per replica
(round-robin) and the envelope is reported per replica. A gateway URL with N replicas behind
it measures the whole pool. Queue and KV columns come from the replica's /metrics (sampled
during each measurement window) or, when given, from Prometheus with the KEDA queries
(`capacity.measure.report` writes the envelope out).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import aiohttp

from capacity.measure.collector import Reading, collect, scaling_queries
from capacity.measure.config import LoadConfig
from capacity.measure.envelope import EnvelopeRow
from capacity.measure.generator import discover_model, listed_models, run_load
from capacity.measure.prometheus import PrometheusClient
from capacity.measure.results import slo_attainment
from contract import signals
from contract.settings.autoscaling import ModelAutoscaling


@dataclass
class PointResult:
    row: EnvelopeRow
    summary: dict
    keda: dict[str, Reading] = field(default_factory=dict)  # fleet-wide, in model (real-clock) time
    replicas: int = 1  # the replicas swept together: an additive reading over them is the fleet's sum
    time_scale: float = 1.0  # model seconds per wall second of the swept replicas


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
    # The stack's merged policy: windows and quantiles of the KEDA queries (model seconds; the defaults
    # when None) and the per-request SLO each level is judged against
    policy: ModelAutoscaling | None = None


async def run_sweep(
    base: LoadConfig,
    options: SweepOptions,
    on_point: Callable[[PointResult], None] | None = None,
    progress: Callable[[dict], None] | None = None,
) -> list[PointResult]:
    points: list[PointResult] = []
    if options.prometheus:  # unreachable: say so now, not after the first level's minutes
        client = PrometheusClient(options.prometheus)
        try:
            client.require_ready()
        finally:
            client.close()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        headers = {"Authorization": f"Bearer {base.api_key}"} if base.api_key else {}
        if base.model is None:  # one name for every level and for the KEDA queries' model_name
            base = replace(base, model=await discover_model(session, base.urls[0], headers))
        else:  # a name the server does not serve would only show as a run of 404s after the warm-up
            served = [m.get("id") for m in await listed_models(session, base.urls[0], headers)]
            if served and base.model not in served:
                raise ValueError(
                    f"{base.urls[0]} serves {', '.join(map(str, served))}, not {base.model!r}: request one of them "
                    "(sweep --served-model-name), or serve that name (capacity serve --served-model-name)"
                )
        sampler = MetricsSampler(list(base.urls), options.sample_interval_s)
        sample = await sampler.available(session)
        for index, level in enumerate(options.levels):
            replicas = len(base.urls)
            config = replace(base, concurrency=level * replicas, rate=None, trace=None)
            started = time.time()
            task = asyncio.create_task(sampler.run(session)) if sample else None
            try:
                result = await run_load(config, _within_level(progress, index, options.levels))
            finally:
                if task:
                    task.cancel()
            s = result.summary
            w0 = started + config.warmup_s / config.time_scale
            w1 = started + (config.warmup_s + config.duration_s) / config.time_scale
            window = sampler.window(w0, w1) if sample else []
            keda: dict[str, Reading] = {}
            if options.prometheus:
                keda = _keda(options.prometheus, options, config, w0, w1)
            avg_waiting = max_waiting = kv = None
            if window:
                avg_waiting = sum(x[1] for x in window) / len(window)
                max_waiting = max(x[1] for x in window)
                kv = sum(x[2] for x in window) / len(window)
            elif keda and keda["requests_waiting"].mean is not None:
                avg_waiting = keda["requests_waiting"].mean / replicas
                max_waiting = (keda["requests_waiting"].max or 0) / replicas
                kv = (keda["kvCache"].mean or 0) / replicas
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
            if options.policy is not None:  # the stack's per-request service level, level by level
                s["slo_attainment"] = slo_attainment(result.records, options.policy.slo)
            point = PointResult(row, s, keda, replicas, config.time_scale)
            points.append(point)
            sampler.samples.clear()
            if on_point:
                on_point(point)
    return points


def _within_level(
    progress: Callable[[dict], None] | None, index: int, levels: list[int]
) -> Callable[[dict], None] | None:
    """The load generator's ticks with where the sweep is: `level_index` of `levels`, `concurrency`."""
    if progress is None:
        return None
    return lambda state: progress({**state, "level_index": index, "levels": len(levels), "concurrency": levels[index]})


def _keda(prometheus: str, options: SweepOptions, config: LoadConfig, start: float, end: float) -> dict[str, Reading]:
    client = PrometheusClient(prometheus)
    try:
        # Prometheus windows are wall time: the policy's (model seconds) shrunk by a mock's speedup
        queries = scaling_queries(
            signals.Scope(options.scope_model or config.model or ""), options.policy, time_scale=config.time_scale
        )
        time.sleep(1.5)  # let the last scrape of the window land
        return collect(client, queries, start, end, step=1.0, time_scale=config.time_scale)
    finally:
        client.close()
