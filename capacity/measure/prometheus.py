"""A small client of Prometheus's HTTP API (instant and range queries) that holds every query to
KEDA's rule: at most one series."""

from __future__ import annotations

import math

import httpx


class PrometheusClient:
    def __init__(self, base_url: str, timeout_s: float = 10.0, transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._http.close()

    def _get(self, path: str, params: dict) -> dict:
        try:
            response = self._http.get(f"{self.base_url}{path}", params=params)
        except httpx.HTTPError as error:
            raise ValueError(f"Prometheus {self.base_url} unreachable: {error}") from None
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
        except (httpx.HTTPError, httpx.InvalidURL):
            return False

    def require_ready(self) -> None:
        """Fail, naming the URL, unless Prometheus answers: before a measurement, not after it."""
        if not self.ready():
            raise ValueError(f"Prometheus {self.base_url} unreachable (GET /-/ready did not answer 200)")

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

    def vector(self, promql: str, at: float) -> list[tuple[dict[str, str], float]]:
        """An instant query's series (any number: not a KEDA signal), each with its labels."""
        data = self._get("/api/v1/query", {"query": promql, "time": f"{at:.3f}"})
        if data["resultType"] != "vector":
            raise ValueError(f"expected an instant vector, got a {data['resultType']}: {promql}")
        return [(r["metric"], v) for r in data["result"] if (v := _value(r["value"][1])) is not None]

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[tuple[float, float]]:
        data = self._get(
            "/api/v1/query_range", {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        )
        result = data["result"]
        if len(result) > 1:
            raise ValueError(f"query returned {len(result)} series, KEDA needs exactly one: {promql}")
        if not result:
            return []
        return [(float(t), v) for t, raw in result[0]["values"] if (v := _value(raw)) is not None]


def _value(raw: str) -> float | None:
    value = float(raw)
    return None if math.isnan(value) else value
