"""Serve mock vLLM replicas (OpenAI API + vLLM metrics) on loopback, timed by an engine profile."""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from capacity.engine import DEFAULT_PROFILE, PROFILES, get_profile
from capacity.mock.faults import GRAMMAR, Faults
from capacity.mock.server import serve_replicas
from capacity.runtime import quiet_gc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8000, help="first port; replica i listens on PORT+i")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--ports", default=None, help="comma-separated ports, one replica each (overrides --port/--replicas)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help=f"one of: {', '.join(sorted(PROFILES))}")
    parser.add_argument("--speedup", type=float, default=1.0, help="model seconds per wall second")
    parser.add_argument("--served-model-name", default=None, help="the model name clients send (default: the profile's)")
    parser.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' on /v1 (like vLLM)")
    parser.add_argument("--stream-interval", type=int, default=1,
                        help="tokens per SSE chunk, as vLLM's --stream-interval (default 1: one chunk per token; "
                             "tokens are coalesced only when a client reads slower than they are generated)")
    parser.add_argument("--fault", default=None,
                        help=f"inject errors: {GRAMMAR}. mid-stream-error: generation fails after a random number "
                             "of tokens, reported as vLLM does (a stream: HTTP 200, then data: {\"error\": ...} and "
                             "data: [DONE]; otherwise HTTP 500), e.g. --fault mid-stream-error:0.05")
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the random draws of --fault")
    parser.add_argument("--tokenizer", default=None,
                        help="tokenizer.json (or its folder) to count prompt tokens with; default: whitespace words")


def run(args: argparse.Namespace) -> int:
    if args.replicas < 1:
        raise ValueError(f"--replicas must be >= 1, got {args.replicas}")
    profile = get_profile(args.profile)
    faults = Faults.parse(args.fault) if args.fault else Faults()
    ports = [args.port + i for i in range(args.replicas)]
    if args.ports:
        try:
            ports = [int(p) for p in args.ports.split(",")]
        except ValueError:
            raise ValueError(f"--ports must be comma-separated integers, got {args.ports!r}") from None

    async def main() -> None:
        async with serve_replicas(
            profile,
            host=args.host,
            ports=ports,
            speedup=args.speedup,
            served_model_name=args.served_model_name,
            api_key=args.api_key,
            stream_interval=args.stream_interval,
            faults=faults,
            tokenizer=args.tokenizer,
            seed=args.fault_seed,
        ) as replicas:
            for r in replicas:
                print(f"mock vLLM '{r.replica.model_name}' ({profile.name}, speedup {args.speedup:g}) on {args.host}:{r.port}",
                      flush=True)  # fmt: skip
            print(f"counting prompt tokens with {replicas[0].replica.tokens.counting}", flush=True)
            with quiet_gc():  # the startup heap frozen, fewer collection pauses under load
                await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a user stops the replicas
        asyncio.run(main())
    return 0
