"""What one load run does: `LoadConfig`, validated when it is built."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True)
class LoadConfig:
    urls: tuple[str, ...]  # base URLs, e.g. http://127.0.0.1:8000 (several: round-robin)
    model: str | None = None  # None: the first model the first URL lists
    api: Literal["completions", "chat"] = "completions"
    stream: bool = False
    api_key: str | None = None
    prompt_tokens: int = 1024
    output_tokens: int = 128
    concurrency: int | None = None  # closed loop
    rate: float | None = None  # open loop, requests per (model) second
    trace: Path | None = None  # replay (any trace `capacity.workload.traces.load` reads)
    trace_speed: float = 1.0
    # Replay the trace's shared prefixes: prompts built from its prefix block ids (Mooncake hash_ids),
    # the same text for the same block. Off: every prompt starts with its own fingerprint.
    prefix_reuse: bool = False
    warmup_s: float = 30.0
    duration_s: float = 120.0
    max_requests: int | None = None  # requests sent, in every mode
    max_consecutive_4xx: int = 10  # a run of client errors this long stops the load (LoadStopped)
    timeout_s: float = 600.0
    tokenizer: str | None = None
    seed: int = 0
    time_scale: float = 1.0
    max_outstanding: int = 10_000  # open loop: arrivals beyond this many in flight are dropped
    # "aiohttp": the general client (https, proxies, any server). "raw": a lean HTTP/1.1 client for
    # http:// URLs that parses responses in the socket's read callback and stamps each read with
    # the kernel's receive time (see `capacity.measure.rawhttp`)
    client: Literal["aiohttp", "raw"] = "aiohttp"

    def __post_init__(self) -> None:
        modes = [m for m in ("concurrency", "rate", "trace") if getattr(self, m) is not None]
        if len(modes) != 1:
            raise ValueError(f"exactly one of concurrency, rate, trace must be set (got {modes or 'none'})")
        if not self.urls:
            raise ValueError("at least one URL is required")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.rate is not None and self.rate <= 0:
            raise ValueError(f"rate must be > 0, got {self.rate}")
        for key in ("prompt_tokens", "output_tokens"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        for key in ("duration_s", "time_scale", "trace_speed", "timeout_s"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if self.prefix_reuse and self.trace is None:
            raise ValueError(
                "prefix_reuse (--prefix-reuse) replays a trace's prefix block ids: it needs a trace (--trace)"
            )
        if self.max_requests is not None and self.max_requests < 1:
            raise ValueError(f"max_requests must be >= 1, got {self.max_requests}")
        if self.max_consecutive_4xx < 1:
            raise ValueError(f"max_consecutive_4xx must be >= 1, got {self.max_consecutive_4xx}")
        if self.warmup_s < 0:
            raise ValueError(f"warmup_s must be >= 0, got {self.warmup_s}")
        if self.client not in ("aiohttp", "raw"):
            raise ValueError(f"client must be 'aiohttp' or 'raw', got {self.client!r}")
        if self.client == "raw" and not all(u.startswith("http://") for u in self.urls):
            raise ValueError("the raw client speaks plain http:// only; use client='aiohttp' for other URLs")

    @property
    def mode(self) -> str:
        return "closed" if self.concurrency is not None else "poisson" if self.rate is not None else "trace"
