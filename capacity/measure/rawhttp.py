"""A lean HTTP/1.1 client for plain http:// URLs: responses parsed in the socket's read
callback, each read stamped with the kernel's receive time (Linux)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import sys
import time
from collections.abc import Callable

# Linux's SO_TIMESTAMPNS (asm-generic; Python does not name it): each TCP read then carries the
# kernel's receive time of its last segment as a CLOCK_REALTIME timespec. The first socket on a
# machine to ask turns stamping on through a deferred work item (net/core/dev.c
# net_enable_timestamp): a segment that lands before it ran is stamped when read, i.e. on dispatch.
_SO_TIMESTAMPNS = 35 if sys.platform == "linux" else None
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY_SPACE = socket.CMSG_SPACE(_TIMESPEC.size) if _SO_TIMESTAMPNS else 0


def _realtime_minus_monotonic() -> float:
    """The offset between the two clocks, read so that a preemption between the reads (which
    would shift every arrival by its length) is caught: bracket, and keep the narrowest of up to
    16 brackets (a busy machine can preempt several reads in a row)."""
    best_width, best = float("inf"), 0.0
    for _ in range(16):
        before = time.time()
        monotonic = time.monotonic()
        after = time.time()
        if after - before < best_width:
            best_width, best = after - before, (before + after) / 2 - monotonic
        if best_width < 20e-6:
            break
    return best


def _arrival(ancillary: list[tuple[int, int, bytes]]) -> float:
    """A read's arrival on the monotonic clock: the kernel's receive stamp when there is one."""
    now = time.monotonic()
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(payload)
            return min(now, seconds + nanoseconds * 1e-9 - _realtime_minus_monotonic())
    return now


class RawConnection:
    """One keep-alive HTTP/1.1 client connection that parses its response in the read callback.

    The lean path for many streams: a non-blocking socket read by a loop reader, each body piece
    handed to `on_body` as it arrives, without a stream reader or a task wake-up per chunk (the
    awaiting task wakes once, when the response is complete). Each read is stamped with the
    kernel's receive time (SO_TIMESTAMPNS, Linux), not the time the event loop got round to it:
    when an engine step sends a token to hundreds of streams at once, the last of their reads is
    dispatched milliseconds after it arrived, and that queueing is the load generator's, not the
    server's. Elsewhere the dispatch time is used. Understands what OpenAI-compatible servers
    send: Content-Length or chunked bodies."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._loop = asyncio.get_running_loop()
        self.closed = False
        self.last_read = 0.0
        self._future: asyncio.Future[tuple[int, dict[str, str], bytes]] | None = None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request is one write: no Nagle
        if _SO_TIMESTAMPNS is not None:
            with contextlib.suppress(OSError):  # a kernel without it: reads are stamped on dispatch
                sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        self._loop.add_reader(sock.fileno(), self._on_readable)

    @classmethod
    async def open(cls, host: str, port: int) -> RawConnection:
        loop = asyncio.get_running_loop()
        family, kind, proto, _, address = (await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM))[0]
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
        except BaseException:
            sock.close()
            raise
        return cls(sock)

    @property
    def usable(self) -> bool:
        return not self.closed

    async def request(self, data: bytes, on_body: Callable[[bytes, float], bool] | None):
        """Send one request; returns once it is on the socket, with a future that gives (status,
        lower-cased headers, body not given to on_body)."""
        self._on_body = on_body
        self._buffer = b""
        self._status = 0
        self._headers: dict[str, str] | None = None
        self._chunked = False
        self._remaining: int | None = None  # body bytes left (Content-Length); None: until close
        self._body: list[bytes] = []
        self._future = future = self._loop.create_future()
        await self._loop.sock_sendall(self._sock, data)  # one send() unless the socket buffer is full
        return future

    def _on_readable(self) -> None:
        try:
            data, ancillary, _, _ = self._sock.recvmsg(262_144, _ANCILLARY_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(error)
            return
        if not data:
            self._lost(None)
            return
        self._data_received(data, _arrival(ancillary))

    def _data_received(self, data: bytes, now: float) -> None:
        self.last_read = now
        if self._future is None or self._future.done():
            return  # nothing asked for (a late byte after a cancelled request)
        buffer = self._buffer + data if self._buffer else data
        try:
            if self._headers is None:
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    self._buffer = buffer
                    return
                self._head(buffer[:end])
                buffer = buffer[end + 4 :]
            self._buffer = self._chunks(buffer, now) if self._chunked else self._plain(buffer, now)
        except ValueError as error:  # a malformed response: fail the request, drop the connection
            self._future.set_exception(error)
            self._close()

    def _head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        self._status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        self._headers = headers
        self._chunked = "chunked" in headers.get("transfer-encoding", "")
        if not self._chunked and "content-length" in headers:
            self._remaining = int(headers["content-length"])

    def _chunks(self, buffer: bytes, now: float) -> bytes:
        while (eol := buffer.find(b"\r\n")) >= 0:
            size = int(buffer[:eol].split(b";", 1)[0], 16)
            if size == 0:  # the last chunk; our servers send no trailers
                if len(buffer) < eol + 4:
                    return buffer
                self._complete()
                return b""
            end = eol + 2 + size
            if len(buffer) < end + 2:
                return buffer
            self._deliver(buffer[eol + 2 : end], now)
            buffer = buffer[end + 2 :]
        return buffer

    def _plain(self, buffer: bytes, now: float) -> bytes:
        if self._remaining is None:  # delimited by the connection's close
            self._deliver(buffer, now)
            return b""
        piece = buffer[: self._remaining]
        self._remaining -= len(piece)
        if piece:
            self._deliver(piece, now)
        if self._remaining == 0:
            self._complete()
        return b""

    def _deliver(self, piece: bytes, now: float) -> None:
        if self._on_body is not None and self._status == 200:
            self._on_body(piece, now)
        else:
            self._body.append(piece)

    def _complete(self) -> None:
        future = self._future
        if future is not None and not future.done():
            future.set_result((self._status, self._headers or {}, b"".join(self._body)))

    def drop(self) -> None:
        """Close, abandoning any response in progress (nobody awaits it any more)."""
        if self._future is not None and not self._future.done():
            self._future.cancel()
        self._close()

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()

    def _lost(self, error: OSError | None) -> None:
        """The server closed the connection (or it broke)."""
        self._close()
        if self._future is not None and not self._future.done():
            if error is None and self._headers is not None and not self._chunked and self._remaining is None:
                self._complete()  # a body delimited by the connection's close
            else:
                self._future.set_exception(
                    error or ConnectionResetError("the server closed the connection mid-response")
                )


class RawPool:
    """Idle keep-alive connections per base URL (a closed loop reuses one per stream)."""

    def __init__(self) -> None:
        self._idle: dict[str, list[RawConnection]] = {}

    async def get(self, authority: str) -> RawConnection:
        idle = self._idle.get(authority)
        while idle:
            connection = idle.pop()
            if connection.usable:
                return connection
        host, _, port = authority.rpartition(":")
        if not host or not port.isdigit():  # no port given
            host, port = authority, "80"
        return await RawConnection.open(host.strip("[]"), int(port))

    def put(self, authority: str, connection: RawConnection, reusable: bool) -> None:
        if reusable and connection.usable:
            self._idle.setdefault(authority, []).append(connection)
        else:
            connection.drop()

    def close(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.drop()
        self._idle.clear()


def split_url(url: str) -> tuple[str, str]:
    """http://host:port/prefix -> ("host:port", "/prefix")."""
    authority, slash, prefix = url.removeprefix("http://").partition("/")
    return authority, (slash + prefix).rstrip("/")
