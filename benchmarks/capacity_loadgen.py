"""Benchmark: load generator + mock vLLM on this machine (a script, not a test).

Goal (issue 7): on 2 cores, at least 500 requests/s and 500 concurrent streams with a
client-side overhead under 5 ms p99. The mock runs in its own process with a benchmark engine
profile (fixed 100 ms steps, no slot or KV limit) so the engine is never the bottleneck; the load
generator runs closed loop, streaming, in this process.

Overhead = client-measured latency minus the latency the mock's engine produced (the mock
reports it in a final SSE comment): everything the harness adds, on both sides of the socket.
Loop lag = how late the load generator's event loop wakes a 50 ms sleeper (client only).

    .venv/bin/python benchmarks/capacity_loadgen.py [--concurrency 500] [--duration 20]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capacity.engine import EngineProfile  # noqa: E402
from capacity.loadgen import LoadConfig, run_load  # noqa: E402

BENCH = EngineProfile(
    name="bench", description="benchmark: fixed 100 ms steps, no slot/KV limit", served_model_name="bench",
    max_num_seqs=100_000, max_num_batched_tokens=10_000_000, kv_cache_tokens=1_000_000_000, max_model_len=100_000,
    step_base_s=0.1, step_per_seq_s=0.0, step_per_kv_token_s=0.0, prefill_token_s=0.0,
)  # fmt: skip


def _serve(port: int, stream_interval: float, ready) -> None:  # noqa: ANN001
    from capacity.mock.server import serve_replicas

    async def main() -> None:
        async with serve_replicas(BENCH, ports=[port], stream_interval_s=stream_interval):
            gc.collect()
            gc.freeze()
            gc.set_threshold(50_000, 50, 1000)  # as `python -m capacity serve` does
            ready.set()
            await asyncio.Event().wait()

    asyncio.run(main())


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=500, help="closed loop: streams in flight")
    parser.add_argument("--rate", type=float, default=None,
                        help="open loop instead: Poisson arrivals per second (~rate x 0.9 s streams in flight)")  # fmt: skip
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=8)
    parser.add_argument("--stream-interval", type=float, default=0.1)
    parser.add_argument("--no-stream", action="store_true")
    parser.add_argument("--port", type=int, default=18999)
    args = parser.parse_args()

    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    server = ctx.Process(target=_serve, args=(args.port, args.stream_interval, ready), daemon=True)
    server.start()
    try:
        if not ready.wait(30):
            raise SystemExit("mock server did not start")
        mode = {"rate": args.rate} if args.rate else {"concurrency": args.concurrency}
        config = LoadConfig(urls=(f"http://127.0.0.1:{args.port}",), **mode,
                            warmup_s=args.warmup, duration_s=args.duration, stream=not args.no_stream,
                            prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens)  # fmt: skip
        cpu_client, cpu_server, wall = time.process_time(), _cpu_seconds(server.pid), time.monotonic()
        result = asyncio.run(run_load(config))
        wall = time.monotonic() - wall
        cpu_client = time.process_time() - cpu_client
        cpu_server = _cpu_seconds(server.pid) - cpu_server
    finally:
        server.terminate()
        server.join(5)
    s = result.summary
    lat, over, lag = s["latency_s"], s["client_overhead_ms"], s["loop_lag_ms"]
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    kind = "streams" if not args.no_stream else "requests"
    shape = f"{args.prompt_tokens}+{args.output_tokens} tokens, {args.duration:g}s measured"
    if args.rate:
        in_flight = s["successful_rps"] * lat["mean"]
        print(f"open loop: Poisson {args.rate:g}/s, about {in_flight:.0f} concurrent {kind} (Little), {shape}")
    else:
        print(f"closed loop: {args.concurrency} concurrent {kind}, {shape}")
    print(f"throughput: {s['successful_rps']:.0f} req/s successful, errors {s['errors']}")
    print(f"latency: p50 {lat['p50'] * 1000:.1f} ms  p99 {lat['p99'] * 1000:.1f} ms (engine alone ~{(args.output_tokens + 0.5) * 100:.0f} ms)")
    print(f"harness overhead (client - engine): p50 {over['p50']:.2f} ms  p99 {over['p99']:.2f} ms")
    print(f"load generator loop lag: p50 {lag['p50']:.2f} ms  p99 {lag['p99']:.2f} ms")
    print(f"cpu: load generator {cpu_client / wall:.0%} of a core, mock {cpu_server / wall:.0%} of a core")


if __name__ == "__main__":
    main()
