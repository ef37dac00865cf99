"""Serve mock vLLM replicas (OpenAI API + vLLM metrics) on loopback, timed by an engine profile."""

from __future__ import annotations

import argparse
import contextlib
import socket

from capacity.cli.stack_args import add_profiles_dir_argument, profile_help
from capacity.engine import DEFAULT_PROFILE, get_profile
from capacity.mock.faults import GRAMMAR, Faults
from capacity.mock.serving import RunningReplica, serve_until_cancelled, try_listen
from capacity.runtime import run_main


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8000, help="first port; replica i listens on PORT+i")
    parser.add_argument("--replicas", type=int, default=1, help="how many replicas, one port each")
    parser.add_argument(
        "--ports", default=None, help="comma-separated ports, one replica each (default: --port and --replicas)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help=profile_help())
    parser.add_argument("--speedup", type=float, default=1.0, help="model seconds per wall second, > 0")
    parser.add_argument(
        "--served-model-name", default=None, help="the model name clients send (default: the profile's)"
    )
    parser.add_argument(
        "--api-key", default=None, help="require 'Authorization: Bearer KEY' on /v1, like vLLM (default: no key)"
    )
    parser.add_argument(
        "--stream-interval",
        type=int,
        default=1,
        help="tokens per SSE chunk, as vLLM's --stream-interval, >= 1 (1: one chunk per token; "
        "tokens are coalesced only when a client reads slower than they are generated)",
    )
    parser.add_argument(
        "--fault",
        default=None,
        help=f"inject errors: {GRAMMAR}. mid-stream-error: generation fails after a random number "
        'of tokens, reported as vLLM does (a stream: HTTP 200, then data: {"error": ...} and '
        "data: [DONE]; otherwise HTTP 500), e.g. --fault mid-stream-error:0.05 (default: none)",
    )
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the random draws of --fault")
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer.json (or its folder) to count prompt tokens with (default: whitespace words)",
    )
    add_profiles_dir_argument(parser)


def _ports(args: argparse.Namespace) -> list[int]:
    if args.replicas < 1:
        raise ValueError(f"--replicas must be >= 1, got {args.replicas}")
    ports = [args.port + i for i in range(args.replicas)]
    flag = "--port" if args.replicas == 1 else f"--port {args.port} with --replicas {args.replicas}"
    if args.ports:
        flag = "--ports"
        try:
            ports = [int(p) for p in args.ports.split(",")]
        except ValueError:
            raise ValueError(f"--ports must be comma-separated integers, got {args.ports!r}") from None
    bad = [p for p in ports if not 1 <= p <= 65535]
    if bad:
        raise ValueError(f"{flag}: port {bad[0]} is not in 1..65535")
    return ports


def _check_listenable(host: str, ports: list[int]) -> None:
    """Fail before serving, naming the host or the port, when a replica could not listen."""
    try:
        socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise ValueError(f"--host {host}: cannot resolve it to an IPv4 address ({error.strerror})") from None
    for port in ports:
        try:
            try_listen(host, port)
        except OSError as error:
            raise ValueError(f"cannot listen on {host}:{port}: {error.strerror}") from None


def run(args: argparse.Namespace) -> int:
    ports = _ports(args)
    if args.speedup <= 0:
        raise ValueError(f"--speedup must be > 0, got {args.speedup}")
    if args.stream_interval < 1:
        raise ValueError(f"--stream-interval must be >= 1 token, got {args.stream_interval}")
    profile = get_profile(args.profile)
    faults = Faults.parse(args.fault) if args.fault else Faults()
    _check_listenable(args.host, ports)

    def say_listening(replicas: list[RunningReplica]) -> None:
        for r in replicas:
            print(
                f"mock vLLM '{r.replica.model_name}' ({profile.name}, speedup {args.speedup:g}) on {args.host}:{r.port}",
                flush=True,
            )
        print(f"counting prompt tokens with {replicas[0].replica.tokens.counting}", flush=True)

    async def main() -> None:
        await serve_until_cancelled(
            profile,
            on_ready=say_listening,
            host=args.host,
            ports=ports,
            speedup=args.speedup,
            served_model_name=args.served_model_name,
            api_key=args.api_key,
            stream_interval=args.stream_interval,
            faults=faults,
            tokenizer=args.tokenizer,
            seed=args.fault_seed,
        )

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a user stops the replicas
        run_main(main)
    return 0
