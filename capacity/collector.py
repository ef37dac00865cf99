"""Read what the autoscaler would have seen: the KEDA trigger queries from `contract.signals`,
evaluated by Prometheus's HTTP API (instant and range) over a measurement window."""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass

import httpx

from contract import signals


@dataclass(frozen=True)
class Signal:
    name: str
    query: str
    rate: bool = False  # a per-second rate (scaled back to model time for a sped-up mock)


@dataclass(frozen=True)
class SignalReading:
    name: str
    query: str
    instant: float | None  # at the end of the window
    mean: float | None  # over the range query's samples
    max: float | None
    samples: list[tuple[float, float]]


def keda_signals(
    scope: signals.Scope,
    *,
    queue_window_s: int = 60,
    latency_window_s: int = 120,
    e2e_quantile: float = 0.99,
    ttft_quantile: float = 0.95,
) -> list[Signal]:
    """The queries KEDA's triggers run (same builders, same windows as the stack's triggers),
    plus the load that explains them."""
    return [
        Signal("queue_depth", signals.queue_depth(scope, queue_window_s)),
        Signal("kv_cache_usage", signals.kv_cache_usage(scope)),
        Signal("e2e_latency_quantile", signals.e2e_latency_quantile(scope, e2e_quantile, latency_window_s)),
        Signal("ttft_quantile", signals.ttft_quantile(scope, ttft_quantile, latency_window_s)),
        Signal("requests_running", signals.requests_running(scope)),
        Signal("requests_waiting", signals.requests_waiting(scope)),
        Signal("requests_per_second", signals.requests_per_second(scope, queue_window_s), rate=True),
        Signal("generation_tokens_per_second", signals.generation_tokens_per_second(scope, queue_window_s), rate=True),
    ]


def stack_signals(scope: signals.Scope, policy: object) -> list[Signal]:
    """keda_signals with the windows and quantiles of a stack's merged autoscaling policy
    (contract.settings ModelAutoscaling), so the numbers are the ones KEDA evaluates."""
    t = policy.triggers  # type: ignore[attr-defined]
    return keda_signals(
        scope,
        queue_window_s=t.queue_depth.window_seconds,
        latency_window_s=t.e2e_latency.window_seconds,
        e2e_quantile=t.e2e_latency.quantile,
        ttft_quantile=t.ttft.quantile,
    )


class PrometheusClient:
    def __init__(self, base_url: str, timeout_s: float = 10.0, transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._http.close()

    def _get(self, path: str, params: dict) -> dict:
        response = self._http.get(f"{self.base_url}{path}", params=params)
        try:
            payload = response.json()
        except ValueError:
            raise ValueError(f"Prometheus {path} answered HTTP {response.status_code}: {response.text[:200]}") from None
        if payload.get("status") != "success":
            raise ValueError(f"Prometheus rejected {params.get('query')!r}: {payload.get('error', payload)}")
        return payload["data"]

    def ready(self) -> bool:
        try:
            return self._http.get(f"{self.base_url}/-/ready").status_code == 200
        except httpx.HTTPError:
            return False

    def query(self, promql: str, at: float | None = None) -> float | None:
        """An instant query that must return at most one series (as KEDA requires)."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self._get("/api/v1/query", params)
        result = data["result"]
        if data["resultType"] == "scalar":
            return _value(result[1])
        if len(result) > 1:
            raise ValueError(f"query returned {len(result)} series, KEDA needs exactly one: {promql}")
        return _value(result[0]["value"][1]) if result else None

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[tuple[float, float]]:
        data = self._get("/api/v1/query_range",
                         {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"})  # fmt: skip
        result = data["result"]
        if len(result) > 1:
            raise ValueError(f"query returned {len(result)} series, KEDA needs exactly one: {promql}")
        if not result:
            return []
        return [(float(t), v) for t, raw in result[0]["values"] if (v := _value(raw)) is not None]


def _value(raw: str) -> float | None:
    value = float(raw)
    return None if math.isnan(value) else value


def collect(
    client: PrometheusClient,
    queries: list[Signal],
    start: float,
    end: float,
    step: float = 1.0,
    time_scale: float = 1.0,
) -> dict[str, SignalReading]:
    """Every signal over [start, end] (unix seconds): instant value at `end`, range mean and max."""
    if end <= start:
        raise ValueError(f"window end ({end}) must be after its start ({start})")
    out = {}
    for s in queries:
        scale = 1 / time_scale if s.rate else 1.0
        samples = [(t, v * scale) for t, v in client.query_range(s.query, start, end, step)]
        instant = client.query(s.query, end)
        values = [v for _, v in samples]
        out[s.name] = SignalReading(
            name=s.name,
            query=s.query,
            instant=None if instant is None else instant * scale,
            mean=sum(values) / len(values) if values else None,
            max=max(values) if values else None,
            samples=samples,
        )
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prometheus", required=True, help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    parser.add_argument("--model", required=True, help="served model name (the model_name label)")
    parser.add_argument("--namespace", default=None, help="namespace label inside a cluster")
    parser.add_argument("--last", type=float, default=300.0, help="window: the last N seconds")
    parser.add_argument("--step", type=float, default=15.0, help="range step, seconds (KEDA polls every 15 s)")
    parser.add_argument("--queue-window", type=int, default=60)
    parser.add_argument("--latency-window", type=int, default=120)
    parser.add_argument("--stack", default=None,
                        help="take windows and quantiles from this stack's autoscaling policy for --model")  # fmt: skip
    parser.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    client = PrometheusClient(args.prometheus)
    end = time.time()
    scope = signals.Scope(args.model, args.namespace)
    queries = keda_signals(scope, queue_window_s=args.queue_window, latency_window_s=args.latency_window)
    if args.stack:
        from capacity.recommend import current_values

        policy, why_not = current_values(args.stack, args.model)
        if policy is None:
            raise ValueError(f"--stack {args.stack}: {why_not}")
        queries = stack_signals(scope, policy)
    try:
        readings = collect(client, queries, end - args.last, end, args.step)
    finally:
        client.close()
    if args.json:
        print(json.dumps({k: asdict(v) for k, v in readings.items()}, indent=2))
        return 0
    for r in readings.values():
        fmt = lambda v: "-" if v is None else f"{v:.3g}"  # noqa: E731
        print(f"{r.name:30s} now {fmt(r.instant):>8s}  mean {fmt(r.mean):>8s}  max {fmt(r.max):>8s}   {r.query}")
    return 0
