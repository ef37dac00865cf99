"""Benchmark: load generator + mock vLLM on this machine (a script, not a test).

Goal (issue 7): on 2 cores, at least 500 requests/s and 500 concurrent streams with a
client-side overhead under 5 ms p99. The mock runs in its own process with a benchmark engine
profile (fixed --step-ms steps, 100 ms by default, no slot or KV limit) so the engine is never the
bottleneck; it streams one SSE chunk per token, as vLLM does. The load generator streams, closed
loop (or Poisson open loop with --rate), in --workers processes.

What is measured, per successful request (wall ms):

- client overhead = send lag + receive lag, the load generator's own share of a latency:
  - send lag = the request's start (its scheduled time in the open loop) -> its last byte on the
    socket: body building, connection pool and, in the open loop, a late dispatch;
  - receive lag = the mock's last write (its `: server-timing=` stamp) -> the arrival the load
    generator records for those bytes. The raw client records the kernel's receive time
    (SO_TIMESTAMPNS), aiohttp the moment its event loop dispatches the read. One CLOCK_MONOTONIC
    for both processes.
- mock queue = request written -> mock handler entry (the mock's own backlog: server side).
- round trip = client latency - mock handling time (overhead + mock queue).
- engine overhead = client latency - the engine model's latency (adds the mock's own delays).
- loop lag = how late the load generator's event loop wakes a 50 ms sleeper.

    .venv/bin/python benchmarks/capacity_loadgen.py [--concurrency 500] [--duration 15] [--workers 2] [--rate R] [--step-ms 100]
    .venv/bin/python benchmarks/capacity_loadgen.py --compare --repeat 2 --duration 15 [--rate 560]   # variants side by side

Measured on the 2-core machine (shared), `--compare --repeat 2 --duration 15`, medians of 2
interleaved rounds, overhead p99 (p50) in ms:

    closed loop, 500 streams, 533-539 req/s      open loop, Poisson 560/s (~480 streams), 556-562 req/s
    asyncio + aiohttp, 1 process   63.8 (27.6)    31.3 (3.3)
    2 aiohttp processes            50.2 (19.6)    12.0 (2.0)
    raw client                      0.1 (0.0)      8.1 (0.7)
    raw + uvloop, 1 process         0.1 (0.0)      6.9 (0.4)
    raw + uvloop, 2 processes       0.2 (0.0)      3.8 (0.4)   <- the default here

Each 100 ms engine step releases a token to every stream at once; the last reads of that burst
are dispatched 5-10 ms after they arrive (loop lag p99 5-11 ms), which aiohttp counts as latency
and the raw client does not. In the open loop a request falling due during a burst still waits
for the loop (send lag): two processes halve the burst each loop sees.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capacity.engine import EngineProfile
from capacity.engine.roofline import StepCost
from capacity.measure.config import LoadConfig
from capacity.measure.workers import run_load_processes
from capacity.runtime import loop_factory


def bench_profile(step_s: float) -> EngineProfile:
    """Fixed-length steps and no slot or KV limit: the engine is never the bottleneck."""
    return EngineProfile(
        name="bench",
        description=f"benchmark: fixed {step_s * 1000:g} ms steps, no slot/KV limit",
        served_model_name="bench",
        max_num_seqs=100_000,
        max_num_batched_tokens=10_000_000,
        kv_cache_tokens=1_000_000_000,
        max_model_len=100_000,
        cost=StepCost(step_s=step_s),
    )


@dataclass(frozen=True)
class Variant:
    name: str
    workers: int = 1
    uvloop: bool = False  # the load generator's event loop
    server_uvloop: bool = False  # the mock's event loop
    client: str = "aiohttp"  # the load generator's HTTP client: aiohttp or raw (LoadConfig.client)


# Each candidate alone, then combined; the first is the load generator as it was.
VARIANTS = (
    Variant("asyncio, 1 process (before)"),
    Variant("uvloop client", uvloop=True),
    Variant("2 client processes", workers=2),
    Variant("uvloop mock", server_uvloop=True),
    Variant("raw client", client="raw"),
    Variant("raw + uvloop both", client="raw", uvloop=True, server_uvloop=True),
    Variant("raw + uvloop both, 2 procs", client="raw", workers=2, uvloop=True, server_uvloop=True),
)


def _serve(port: int, step_s: float, stream_interval: int, use_uvloop: bool, ready) -> None:
    from capacity.mock.serving import serve_until_cancelled

    with asyncio.Runner(loop_factory=loop_factory(use_uvloop)) as runner:
        runner.run(
            serve_until_cancelled(
                bench_profile(step_s),
                on_ready=lambda _replicas: ready.set(),
                ports=[port],
                stream_interval=stream_interval,
            )
        )


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(args: argparse.Namespace, variant: Variant) -> dict:
    """One run against a fresh mock process: the load generator's summary plus both sides' CPU."""
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    server = ctx.Process(
        target=_serve,
        args=(args.port, args.step_ms / 1000, args.stream_interval, variant.server_uvloop, ready),
        daemon=True,
    )
    server.start()
    try:
        if not ready.wait(30):
            raise SystemExit("mock server did not start")
        mode = {"rate": args.rate} if args.rate else {"concurrency": args.concurrency}
        config = LoadConfig(
            urls=(f"http://127.0.0.1:{args.port}",),
            **mode,
            warmup_s=args.warmup,
            duration_s=args.duration,
            stream=not args.no_stream,
            prompt_tokens=args.prompt_tokens,
            output_tokens=args.output_tokens,
            client=variant.client,
        )
        cpu_server, wall = _cpu_seconds(server.pid), time.monotonic()
        result = run_load_processes(config, variant.workers, use_uvloop=variant.uvloop)
        wall = time.monotonic() - wall
        cpu_server = _cpu_seconds(server.pid) - cpu_server
    finally:
        server.terminate()
        server.join(5)
    return result.summary | {
        "cpu_client": result.cpu_s / wall,
        "cpu_server": cpu_server / wall,
        "cpu_wait_client": result.cpu_wait_s / wall,
    }


def report(args: argparse.Namespace, s: dict) -> None:
    lat, lag = s["latency_s"], s["loop_lag_ms"]
    kind = "streams" if not args.no_stream else "requests"
    shape = f"{args.prompt_tokens}+{args.output_tokens} tokens, {args.duration:g}s measured"
    if args.rate:
        in_flight = s["successful_rps"] * lat["mean"]
        print(f"open loop: Poisson {args.rate:g}/s, about {in_flight:.0f} concurrent {kind} (Little), {shape}")
    else:
        print(f"closed loop: {args.concurrency} concurrent {kind}, {shape}")
    print(f"throughput: {s['successful_rps']:.0f} req/s successful, errors {s['errors']}")
    print(
        f"latency: p50 {lat['p50'] * 1000:.1f} ms  p99 {lat['p99'] * 1000:.1f} ms (engine alone ~{(args.output_tokens + 0.5) * args.step_ms:.0f} ms)"
    )
    for key, label in (
        ("client_overhead_ms", "client overhead (send + receive lag)"),
        ("send_ms", "  send (start -> request written)"),
        ("receive_lag_ms", "  receive lag (mock's last write -> recorded arrival)"),
        ("server_queue_ms", "mock queue (written -> mock handler entry)"),
        ("round_trip_overhead_ms", "round trip (latency - mock handling)"),
        ("engine_overhead_ms", "engine overhead (latency - engine, before)"),
    ):
        print(f"{label}: p50 {s[key]['p50']:.2f} ms  p99 {s[key]['p99']:.2f} ms")
    print(f"load generator loop lag: p50 {lag['p50']:.2f} ms  p99 {lag['p99']:.2f} ms")
    print(
        f"cpu: load generator {s['cpu_client']:.0%} of a core, mock {s['cpu_server']:.0%} of a core; "
        f"load generator runnable without a core {s['cpu_wait_client']:.1%} of the time"
    )


COLUMNS = (
    ("req/s", lambda s: s["successful_rps"]),
    ("overhead p50", lambda s: s["client_overhead_ms"]["p50"]),
    ("overhead p99", lambda s: s["client_overhead_ms"]["p99"]),
    ("send p99", lambda s: s["send_ms"]["p99"]),
    ("recv p99", lambda s: s["receive_lag_ms"]["p99"]),
    ("mockq p99", lambda s: s["server_queue_ms"]["p99"]),
    ("rtt-ovh p99", lambda s: s["round_trip_overhead_ms"]["p99"]),
    ("engine-ovh p99", lambda s: s["engine_overhead_ms"]["p99"]),
    ("loop lag p99", lambda s: s["loop_lag_ms"]["p99"]),
    ("cpu client", lambda s: s["cpu_client"] * 100),
    ("cpu mock", lambda s: s["cpu_server"] * 100),
    ("cpu wait client", lambda s: s["cpu_wait_client"] * 100),
)


def compare(args: argparse.Namespace) -> None:
    """Every variant once per round, rounds repeated, medians reported: on a shared, noisy machine
    only runs interleaved in time compare fairly."""
    runs: dict[str, list[dict]] = {v.name: [] for v in VARIANTS}
    for round_ in range(args.repeat):
        for variant in VARIANTS:
            s = measure(args, variant)
            runs[variant.name].append(s)
            print(f"round {round_ + 1} {variant.name}: " + "  ".join(f"{c} {f(s):.1f}" for c, f in COLUMNS), flush=True)
    print(
        f"\nmedians of {args.repeat} rounds (ms unless named; cpu in % of a core; "
        f"load average {os.getloadavg()[0]:.1f} at the end):"
    )
    width = max(len(v.name) for v in VARIANTS)
    print(" " * width + "".join(f"{c:>16}" for c, _ in COLUMNS))
    base = runs[VARIANTS[0].name]
    for variant in VARIANTS:
        med = [statistics.median(f(s) for s in runs[variant.name]) for _, f in COLUMNS]
        print(f"{variant.name:<{width}}" + "".join(f"{m:>16.1f}" for m in med))
    print("\noverhead p99 relative to the first row:")
    first = statistics.median(s["client_overhead_ms"]["p99"] for s in base)
    for variant in VARIANTS:
        med = statistics.median(s["client_overhead_ms"]["p99"] for s in runs[variant.name])
        print(f"  {variant.name:<{width}} {med / first:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=500, help="closed loop: streams in flight")
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="open loop instead: Poisson arrivals per second (~rate x 0.9 s streams in flight)",
    )
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=8)
    parser.add_argument("--step-ms", type=float, default=100.0, help="the mock's engine step (one token per stream)")
    parser.add_argument("--stream-interval", type=int, default=1, help="the mock's tokens per SSE chunk (vLLM's)")
    parser.add_argument("--no-stream", action="store_true")
    parser.add_argument("--port", type=int, default=18999)
    # defaults: the fastest measured combination (see --compare); the load generator as it was is
    # --workers 1 --no-uvloop --no-server-uvloop --client aiohttp
    parser.add_argument("--workers", type=int, default=2, help="load generator processes, each its own event loop")
    parser.add_argument(
        "--uvloop",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="uvloop for the load generator (if installed)",
    )
    parser.add_argument(
        "--server-uvloop",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="uvloop for the mock (if installed)",
    )
    parser.add_argument("--client", choices=("aiohttp", "raw"), default="raw", help="the load generator's HTTP client")
    parser.add_argument("--compare", action="store_true", help="run every variant in VARIANTS, interleaved")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of --compare")
    args = parser.parse_args()
    if args.compare:
        compare(args)
        return
    s = measure(args, Variant("cli", args.workers, args.uvloop, args.server_uvloop, args.client))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    print(
        f"load generator: {args.client} client, {args.workers} process(es), {'uvloop' if args.uvloop else 'asyncio'} loop; "
        f"mock: {'uvloop' if args.server_uvloop else 'asyncio'} loop"
    )
    report(args, s)


if __name__ == "__main__":
    main()
