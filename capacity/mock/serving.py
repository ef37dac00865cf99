"""Hosting mock replicas: each replica's app on its own port, started and stopped together, and
the long-running entry point of `capacity serve`."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiohttp import web

from capacity.engine import EngineProfile
from capacity.mock.app import create_app
from capacity.mock.replica import MockReplica
from capacity.runtime import quiet_gc


@dataclass
class RunningReplica:
    replica: MockReplica
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def try_listen(host: str, port: int) -> None:
    """Bind (host, port) as a replica will and let it go: OSError when a replica could not listen there."""
    _bind(host, port).close()


@asynccontextmanager
async def serve_replicas(
    profile: EngineProfile,
    count: int = 1,
    *,
    host: str = "127.0.0.1",
    ports: list[int] | None = None,
    api_key: str | None = None,
    **replica_options: object,
) -> AsyncIterator[list[RunningReplica]]:
    """Run `count` replicas on loopback (free ports unless given); stop them on exit.
    `replica_options` go to each MockReplica; `api_key` guards each replica's /v1."""
    ports = ports or [0] * count
    runners: list[web.AppRunner] = []
    running: list[RunningReplica] = []
    try:
        for port in ports:
            replica = MockReplica(profile, **replica_options)  # type: ignore[arg-type]  # options are MockReplica's/serve_replicas' keywords, passed through
            # handler_cancellation: a client that disconnects cancels its handler (-> engine abort)
            runner = web.AppRunner(
                create_app(replica, api_key=api_key),
                access_log=None,
                handle_signals=False,
                handler_cancellation=True,
                shutdown_timeout=1.0,
            )
            await runner.setup()
            runners.append(runner)
            sock = _bind(host, port)
            await web.SockSite(runner, sock).start()
            running.append(RunningReplica(replica, sock.getsockname()[1]))
        yield running
    finally:
        for runner in runners:
            await runner.cleanup()


async def serve_until_cancelled(
    profile: EngineProfile,
    *,
    on_ready: Callable[[list[RunningReplica]], None],
    **options: object,
) -> None:
    """Serve replicas (`serve_replicas` options) until the task is cancelled (Ctrl-C, a stopped
    process); `on_ready` is told once they listen."""
    async with serve_replicas(profile, **options) as replicas:  # type: ignore[arg-type]  # options are MockReplica's/serve_replicas' keywords, passed through
        with quiet_gc():  # the startup heap frozen, fewer collection pauses under load
            on_ready(replicas)
            await asyncio.Event().wait()
