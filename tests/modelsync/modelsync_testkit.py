"""Shared test data and helpers for the modelsync tests (a plain module, so tests can import it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REVISION = "0123456789abcdef0123456789abcdef01234567"
MODEL_ID = "acme/tiny-model"
# Small parts keep the tests fast while still exercising multipart (moto enforces the minimum part size).
PART = 64 * 1024
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_DEFAULT_REGION": "us-east-1"}


def write_model(root: Path, files: dict[str, int], seed: int = 0) -> Path:
    """Files of the given sizes whose contents differ per name and seed."""
    for index, (name, size) in enumerate(sorted(files.items())):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        block = (f"{seed}-{index}-{name}|".encode() * (size // 8 + 1))[:size]
        path.write_bytes(block)
    return root


TINY_MODEL = {"config.json": 300, "tokenizer.json": 5_000, "model-00001-of-00002.safetensors": 3 * PART + 123,
              "model-00002-of-00002.safetensors": 2 * PART, "nested/extra.bin": 10}


def record_operations(client: Any) -> list[str]:
    """Every S3 operation the client sends, in order."""
    seen: list[str] = []
    client.meta.events.register("before-call.s3.*", lambda model, **_: seen.append(model.name))
    return seen
