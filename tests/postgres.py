"""A throwaway PostgreSQL server for tests (the planner's Optuna RDB storage): `initdb` in a fresh
temporary folder, `postgres` listening on 127.0.0.1 at a free port and on no Unix socket, one
database, a SQLAlchemy URL for psycopg 3; stopped and removed afterwards.

The server binaries come from Debian's `postgresql` (`make system-packages` installs it without a
cluster of the system's own). PostgreSQL refuses to run as root ("root" execution of the PostgreSQL
server is not permitted), so as root the server runs as the `postgres` OS user the package creates.
Each pytest-xdist worker starts its own server: nothing is shared between processes but the binaries.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

BIN_GLOB = "/usr/lib/postgresql/*/bin"
DATABASE = "optuna"
SUPERUSER = "postgres"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


def find_bin_dir() -> Path | None:
    """The newest installed major version's bin folder holding `initdb` and `postgres`."""
    found = [p for p in Path("/").glob(BIN_GLOB.lstrip("/")) if (p / "initdb").is_file() and (p / "postgres").is_file()]
    return max(found, key=lambda p: tuple(int(part) for part in p.parent.name.split(".")), default=None)


def missing_binaries_message() -> str:
    return (
        f"PostgreSQL server binaries not found in {BIN_GLOB} (Debian package 'postgresql'): run `make system-packages`"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user() -> tuple[list[str], int | None]:
    """The command prefix that drops root to the `postgres` user (setpriv execs in place, so the
    child's pid is the server's own and a signal reaches it), and that user's uid; nothing when not root."""
    if os.geteuid() != 0:
        return [], None
    user = pwd.getpwnam(SUPERUSER)
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups", "--"], user.pw_uid


def _wait_until_ready(bin_dir: Path, port: int, server: subprocess.Popen[bytes], log: Path) -> None:
    """Poll `pg_isready` over TCP until the server accepts connections (bounded by START_TIMEOUT_S)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(
                f"postgres exited with {server.returncode} on 127.0.0.1:{port}: {log.read_text()[-2000:]}"
            )
        ready = subprocess.run(
            [str(bin_dir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port), "-t", "2"], timeout=10, check=False
        )
        if ready.returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(
        f"postgres on 127.0.0.1:{port} not ready after {START_TIMEOUT_S:.0f} s: {log.read_text()[-2000:]}"
    )


def _stop(server: subprocess.Popen[bytes]) -> None:
    """SIGINT is PostgreSQL's "Fast Shutdown" (docs: server-shutdown); SIGKILL only if it hangs."""
    if server.poll() is None:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=STOP_TIMEOUT_S)


@contextlib.contextmanager
def run_postgres(bin_dir: Path) -> Iterator[str]:
    """Start a server, create DATABASE and yield its `postgresql+psycopg://` URL (password auth)."""
    prefix, uid = _as_server_user()
    base = Path(tempfile.mkdtemp(prefix="pytest-postgres-"))
    server: subprocess.Popen[bytes] | None = None
    try:
        if uid is not None:
            os.chown(base, uid, -1)
        password = secrets.token_hex(16)
        pwfile = base / "pwfile"
        pwfile.write_text(password + "\n")
        if uid is not None:
            os.chown(pwfile, uid, -1)
        data = base / "data"
        subprocess.run(
            [
                *prefix,
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                SUPERUSER,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",  # a throwaway database: durability is not needed
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        port = free_port()
        log = base / "postgres.log"
        with log.open("wb") as log_file:
            server = subprocess.Popen(
                [
                    *prefix,
                    str(bin_dir / "postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "unix_socket_directories=",  # no socket in /var/run/postgresql or anywhere else
                    "-c",
                    "fsync=off",
                ],
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        _wait_until_ready(bin_dir, port, server, log)
        subprocess.run(
            [str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", SUPERUSER, DATABASE],
            env={**os.environ, "PGPASSWORD": password},
            check=True,
            capture_output=True,
            timeout=60,
        )
        yield f"postgresql+psycopg://{SUPERUSER}:{password}@127.0.0.1:{port}/{DATABASE}"
    finally:
        if server is not None:
            _stop(server)
        shutil.rmtree(base, ignore_errors=True)
