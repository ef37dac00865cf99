"""Spread one load over several processes, each with its own event loop, and merge the results."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from capacity.measure.config import LoadConfig
from capacity.measure.generator import LoadGenerator, LoadStopped
from capacity.measure.results import LoadResult, summarize
from capacity.runtime import loop_factory, run_main


def run_load_sync(config: LoadConfig, *, use_uvloop: bool = False, start_at: float | None = None) -> LoadResult:
    """Run the load in this process on a fresh event loop (uvloop's if asked for and installed)."""
    return run_main(LoadGenerator(config, start_at=start_at).run, loop_factory(use_uvloop))


def split_config(config: LoadConfig, workers: int) -> list[LoadConfig]:
    """One share of the load per worker process: concurrency or rate divided, distinct prompt seeds
    (so no two workers send the same prompt), the same windows."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if config.trace is not None and workers > 1:
        raise ValueError("trace replay runs in one process (the trace's order would be split)")
    if config.concurrency is not None and config.concurrency < workers:
        raise ValueError(f"concurrency {config.concurrency} is below workers {workers}")
    if config.max_requests is not None and config.max_requests < workers:
        raise ValueError(f"max_requests {config.max_requests} is below workers {workers}")
    shares = []
    for i in range(workers):
        changes: dict = {"seed": config.seed + i}
        if config.concurrency is not None:
            changes["concurrency"] = config.concurrency // workers + (i < config.concurrency % workers)
        if config.rate is not None:
            changes["rate"] = config.rate / workers
        if config.max_requests is not None:
            changes["max_requests"] = config.max_requests // workers + (i < config.max_requests % workers)
        shares.append(replace(config, **changes))
    return shares


def run_load_processes(
    config: LoadConfig, workers: int, *, use_uvloop: bool = False, start_timeout_s: float = 60.0
) -> LoadResult:
    """Spread the load over `workers` processes, each with its own event loop, and merge the results.

    One Python event loop is one core at most, and a burst of streams is served one callback at a
    time: more processes serve a burst in parallel. The workers start on one shared instant, so
    their windows coincide and the merged throughput is the sum."""
    shares = split_config(config, workers)
    if workers == 1:
        return run_load_sync(config, use_uvloop=use_uvloop)
    ctx = multiprocessing.get_context("spawn")  # no fork of a parent's loop or threads
    # two barriers: every worker has imported (ready), then the start instant is set and read (go)
    ready, go = ctx.Barrier(workers + 1, timeout=start_timeout_s), ctx.Barrier(workers + 1, timeout=start_timeout_s)
    start = ctx.Value("d", 0.0)
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(i, share, use_uvloop, (ready, go), start, queue), daemon=True)
        for i, share in enumerate(shares)
    ]
    for proc in procs:
        proc.start()
    try:
        ready.wait()
        start.value = time.monotonic() + 0.3  # time for every worker to open its session
        go.wait()
        deadline = config.warmup_s + config.duration_s
        timeout = start_timeout_s + deadline / config.time_scale + 30
        parts: dict[int, LoadResult | LoadStopped | str] = dict(queue.get(timeout=timeout) for _ in procs)
    finally:
        for proc in procs:
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
    for part in parts.values():
        if isinstance(part, LoadStopped):
            raise part
    errors = [part for part in parts.values() if isinstance(part, str)]
    if errors:
        raise RuntimeError("load worker failed: " + errors[0])
    return merge_results(config, [parts[i] for i in range(workers)])  # type: ignore[misc]  # every error part raised above: the rest are results


def _worker(i: int, config: LoadConfig, use_uvloop: bool, barriers, start, queue) -> None:
    try:
        for barrier in barriers:
            barrier.wait()
        result = run_load_sync(config, use_uvloop=use_uvloop, start_at=start.value)
        result.summary = {}
        queue.put((i, result))
    except LoadStopped as stopped:  # the server refused the requests: the parent says why
        queue.put((i, stopped))
    except BaseException as error:
        queue.put((i, f"worker {i}: {type(error).__name__}: {error}"))


def merge_results(config: LoadConfig, parts: Sequence[LoadResult]) -> LoadResult:
    """One result from the workers' shares: worker i's request k becomes request k*workers + i."""
    n = len(parts)
    records = []
    for i, part in enumerate(parts):
        for record in part.records:
            record.index = record.index * n + i
            records.append(record)
    records.sort(key=lambda r: r.start_s)
    result = LoadResult(
        config=config,
        records=records,
        window=(parts[0].window[0], max(p.window[1] for p in parts)),  # until the last worker ended
        itl_samples=np.concatenate([p.itl_samples for p in parts]),
        loop_lag_ms=np.concatenate([p.loop_lag_ms for p in parts]),
        dropped=sum(p.dropped for p in parts),
        skipped_over_context=sum(p.skipped_over_context for p in parts),
        cpu_s=sum(p.cpu_s for p in parts),
        cpu_wait_s=sum(p.cpu_wait_s for p in parts),
        token_counting=parts[0].token_counting,
    )
    result.summary = summarize(result)
    return result
