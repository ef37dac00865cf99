"""A real S3 API (moto_server) on loopback, and small local models standing in for the hub."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from modelsync_testkit import AWS_ENV, MODEL_ID, PART, REVISION, TINY_MODEL, write_model  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, **AWS_ENV}
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise RuntimeError("moto_server did not start on 127.0.0.1") from None
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=10)


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in AWS_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def s3(s3_endpoint: str) -> Any:
    from modelsync.cli import s3_client

    return s3_client(s3_endpoint, "us-east-1", 4)


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"models-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return write_model(tmp_path / "model", TINY_MODEL)


@pytest.fixture
def make_config(bucket: str, model_dir: Path) -> Callable[..., Any]:
    from modelsync.sync import SyncConfig

    def make(**overrides: Any) -> SyncConfig:
        values: dict[str, Any] = dict(
            model_id=MODEL_ID,
            revision=REVISION,
            bucket=bucket,
            prefix=f"{MODEL_ID}/{REVISION}",
            source=str(model_dir),
            concurrency=4,
            multipart_threshold=PART,
            part_size=PART,
        )
        values.update(overrides)
        return SyncConfig(**values)

    return make


@pytest.fixture
def cli_args(s3_endpoint: str, bucket: str, model_dir: Path) -> list[str]:
    return [
        "sync",
        "--model-id",
        MODEL_ID,
        "--revision",
        REVISION,
        "--bucket",
        bucket,
        "--prefix",
        f"{MODEL_ID}/{REVISION}",
        "--source",
        str(model_dir),
        "--endpoint-url",
        s3_endpoint,
        "--region",
        "us-east-1",
        "--multipart-threshold",
        str(PART),
        "--part-size",
        str(PART),
    ]
