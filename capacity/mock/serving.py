"""Hosting mock replicas: each replica's app on its own port, started and stopped together."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiohttp import web

from capacity.engine import EngineProfile
from capacity.mock.app import create_app
from capacity.mock.replica import MockReplica


@dataclass
class RunningReplica:
    replica: MockReplica
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


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
            replica = MockReplica(profile, **replica_options)  # type: ignore[arg-type]
            # handler_cancellation: a client that disconnects cancels its handler (-> engine abort)
            runner = web.AppRunner(create_app(replica, api_key=api_key), access_log=None, handle_signals=False,
                                   handler_cancellation=True, shutdown_timeout=1.0)  # fmt: skip
            await runner.setup()
            runners.append(runner)
            sock = _bind(host, port)
            await web.SockSite(runner, sock).start()
            running.append(RunningReplica(replica, sock.getsockname()[1]))
        yield running
    finally:
        for runner in runners:
            await runner.cleanup()

