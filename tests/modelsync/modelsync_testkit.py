"""Shared test data and helpers for the modelsync tests (a plain module, so tests can import it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REVISION = "0123456789abcdef0123456789abcdef01234567"
MODEL_ID = "acme/tiny-model"
# S3's minimum part size: the smallest parts modelsync accepts, so multipart stays fast to test.
PART = 5 * 1024 * 1024
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def write_model(root: Path, files: dict[str, int], seed: int = 0) -> Path:
    """Files of the given sizes whose contents differ per name and seed."""
    for index, (name, size) in enumerate(sorted(files.items())):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        block = (f"{seed}-{index}-{name}|".encode() * (size // 8 + 1))[:size]
        path.write_bytes(block)
    return root


TINY_MODEL = {
    "config.json": 300,
    "tokenizer.json": 5_000,
    "model-00001-of-00002.safetensors": 3 * PART + 123,
    "model-00002-of-00002.safetensors": 2 * PART,
    "nested/extra.bin": 10,
}


def record_operations(client: Any) -> list[str]:
    """Every S3 operation the client sends, in order."""
    seen: list[str] = []
    client.meta.events.register("before-call.s3.*", lambda model, **_: seen.append(model.name))
    return seen


class FakeHub:
    """The few Hugging Face hub endpoints snapshot_download uses, serving one repo at one commit
    from a local directory, on 127.0.0.1. Unknown repos and revisions get the hub's error codes."""

    def __init__(self, repo_id: str, revision: str, root: Path) -> None:
        import threading
        from http.server import ThreadingHTTPServer

        self.repo_id, self.revision, self.root = repo_id, revision, root
        self.requests: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> Any:
        import hashlib
        import json
        from http.server import BaseHTTPRequestHandler
        from urllib.parse import unquote, urlparse

        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                """Silent: the fake hub would log every download."""

            def _error(self, code: str, status: int = 404) -> None:
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _route(self, head: bool) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append(f"{self.command} {path}")
                tree = f"/api/models/{hub.repo_id}/tree/"
                resolve = f"/{hub.repo_id}/resolve/"
                if path.startswith(tree):
                    revision = path[len(tree) :].split("/")[0]
                    return self._tree() if revision == hub.revision else self._error("RevisionNotFound")
                if path.startswith(resolve):
                    revision, _, name = path[len(resolve) :].partition("/")
                    if revision != hub.revision:
                        return self._error("RevisionNotFound")
                    file = hub.root / name
                    return self._file(file, head) if file.is_file() else self._error("EntryNotFound")
                return self._error("RepoNotFound", 401)

            def _tree(self) -> None:
                entries = [
                    {
                        "type": "file",
                        "oid": hashlib.sha1(p.read_bytes()).hexdigest(),
                        "size": p.stat().st_size,
                        "path": p.relative_to(hub.root).as_posix(),
                    }
                    for p in sorted(hub.root.rglob("*"))
                    if p.is_file()
                ]
                body = json.dumps(entries).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _file(self, file: Path, head: bool) -> None:
                data = file.read_bytes()
                self.send_response(200)
                self.send_header("X-Repo-Commit", hub.revision)
                self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if not head:
                    self.wfile.write(data)

            def do_GET(self) -> None:
                self._route(head=False)

            def do_HEAD(self) -> None:
                self._route(head=True)

        return Handler


class Fault:
    """What the proxy does to the first `times` requests with this method whose path ends with
    `path_suffix` and whose query contains `query`:
    hold (until released, or dropped once the client has gone), corrupt (flip one body byte), or drop."""

    def __init__(self, method: str, path_suffix: str = "", query: str = "", action: str = "hold", times: int = 1):
        assert action in ("hold", "corrupt", "drop")
        self.method, self.path_suffix, self.query, self.action, self.times = method, path_suffix, query, action, times

    def matches(self, method: str, path: str, query: str) -> bool:
        return method == self.method and path.endswith(self.path_suffix) and self.query in query


class FaultProxy:
    """A small HTTP proxy on 127.0.0.1 in front of the S3 API that injects faults.

    `held` is set the moment a held request has been fully received, so a test knows, without
    sleeping, that the client is blocked inside that call. A held request is forwarded only after
    `release`; if its client disconnects first it never reaches S3. Every wait is bounded.
    """

    HOLD_LIMIT_SECONDS = 60.0

    def __init__(self, upstream: str, *faults: Fault) -> None:
        import threading
        from http.server import ThreadingHTTPServer
        from urllib.parse import urlsplit

        upstream_url = urlsplit(upstream)
        self.upstream = (upstream_url.hostname or "127.0.0.1", upstream_url.port or 80)
        self.faults = list(faults)
        self.held, self.release, self.closing = threading.Event(), threading.Event(), threading.Event()
        self.applied: list[str] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()

    def take(self, method: str, path: str, query: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.times > 0 and fault.matches(method, path, query):
                    fault.times -= 1
                    self.applied.append(f"{fault.action} {method} {path}?{query}")
                    return fault
        return None

    def wait_for_release(self, connection: Any) -> bool:
        """True once released; False when the client hung up (or the proxy closes, or the limit passes)."""
        import select
        import socket
        import time

        deadline = time.monotonic() + self.HOLD_LIMIT_SECONDS
        while time.monotonic() < deadline and not self.closing.is_set():
            if self.release.wait(0.02):
                return True
            readable, _, _ = select.select([connection], [], [], 0)
            if readable:
                try:
                    if not connection.recv(1, socket.MSG_PEEK):
                        return False
                except OSError:
                    return False
        return False

    def _handler(self) -> Any:
        import http.client
        from http.server import BaseHTTPRequestHandler
        from urllib.parse import urlsplit

        proxy = self
        hop_by_hop = {"connection", "keep-alive", "transfer-encoding", "expect", "content-length"}

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, and "Expect: 100-continue" as botocore sends it

            def log_message(self, *_: Any) -> None:
                """Silent: the proxy would log every request."""

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                url = urlsplit(self.path)
                fault = proxy.take(self.command, url.path, url.query)
                if fault and fault.action == "drop":
                    self.close_connection = True
                    return
                if fault and fault.action == "hold":
                    proxy.held.set()
                    if not proxy.wait_for_release(self.connection):
                        self.close_connection = True
                        return
                if fault and fault.action == "corrupt" and body:
                    middle = len(body) // 2
                    body = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1 :]
                upstream = http.client.HTTPConnection(*proxy.upstream, timeout=30)
                try:
                    upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                    for name, value in self.headers.items():
                        if name.lower() not in hop_by_hop:
                            upstream.putheader(name, value)
                    upstream.putheader("Content-Length", str(len(body)))
                    upstream.endheaders(body)
                    response = upstream.getresponse()
                    data = response.read()
                finally:
                    upstream.close()
                self.send_response_only(response.status, response.reason)
                for name, value in response.getheaders():
                    if name.lower() not in hop_by_hop:
                        self.send_header(name, value)
                # A HEAD answer carries the object's length and no body.
                head = self.command == "HEAD"
                self.send_header(
                    "Content-Length", response.getheader("Content-Length", "0") if head else str(len(data))
                )
                self.end_headers()
                if not head:
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        return Handler
