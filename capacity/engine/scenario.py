"""Predict a published vLLM benchmark from its setup: a scenario file in, vLLM's metrics out.

A scenario (YAML) names what a benchmark ran and how it was driven:

    name: lambda-h100-llama3-8b            # free text
    source: "repo path (commit)"           # where the measurement comes from
    gpu: h100                              # a data/gpus.yaml name, or datasheet fields:
    #  {name, memory_mib, bandwidth_gb_s, fp16_tflops, memory_class: gddr|hbm,
    #   sustained_fp16_tflops (optional), int8_tops, fp8_tflops, memory_gb}
    model: meta-llama/Meta-Llama-3-8B-Instruct   # a data/models.yaml checkpoint, or config.json fields:
    #  {model_type: llama|mistral|qwen2|qwen3|gemma|gemma2|mixtral, hidden_size, intermediate_size,
    #   num_hidden_layers, num_attention_heads, vocab_size, and any other field of that model's
    #   config.json (capacity/engine/architecture.py: transformers' defaults for what is left out)}
    quantization: bf16                     # fp16 | bf16 | awq-int4 (default: the checkpoint's)
    vllm_version: 0.5.4                    # picks the scheduler: V0 before 0.7, V1 after
    engine:                                # vLLM flags (defaults: vLLM's for that version)
      max_model_len: 2048
      max_num_seqs: 256
      max_num_batched_tokens: 2048
      gpu_memory_utilization: 0.9
      # tensor_parallel_size: 4            # GPUs per replica (default 1); then also:
    # interconnect: g6e                    # an instance family of data/interconnects.yaml, or
    #                                      #   {kind: pcie|nvlink, bus_bandwidth_gb_s}
    arrival:                               # exactly one of:
      offline: 1000                        #   LLM.generate of N prompts (no API server)
      # burst: 1280                        #   N requests at t=0 (benchmark_serving --request-rate inf)
      # concurrency: 4                     #   closed loop (--max-concurrency C), with requests: N
      # poisson: 1.0                       #   req/s (--request-rate R), with requests: N, seeds: S
    lengths:                               # fixed, per-request lists, or a file:
      input: 545                           #   an int, or a list (one per request)
      output: 225
      # file: path.json                    #   {"input_lens": [...], "output_lens": [...]}
      # first: 100                         #   take the first N requests of the file
      # skip_empty: true                   #   drop requests with 0 output tokens (failed)
      # scale_to: {input: 22805, output: 17981}   # rescale to reported totals
      # max_total: 2048                    #   trim each request to prompt + output <= this
    measured:                              # optional: metric -> published value
      benchmark_duration_s: 30.6

Paths are relative to the scenario file. Metrics are vLLM benchmark_serving's: TTFT; TPOT =
(e2e - TTFT) / (output tokens - 1) over requests with more than one output token; ITL = gaps
between a request's tokens (each step's gap, weighted by the tokens it produced); e2e latency;
output and total tokens/s and requests/s over the benchmark duration (first send to last
completion). Bad input raises ScenarioError naming the key.
"""

from __future__ import annotations

import heapq
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from capacity.engine.architecture import ArchitectureError, from_config
from capacity.engine.hardware import (
    LINK_KINDS,
    Checkpoint,
    Gpu,
    Interconnect,
    architectures,
    checkpoints,
    family_interconnects,
    gpu_from_fields,
    gpus,
    quantizations,
    sustained_ratio,
)
from capacity.engine.profile import EngineProfile
from capacity.engine.profiles import CALIBRATED, derive
from capacity.engine.replica import ReplicaEngine, Request
from capacity.engine.roofline import Calibration, scheduler_of

ARRIVALS = ("offline", "burst", "concurrency", "poisson")
ENGINE_KEYS = (
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "tensor_parallel_size",
)
V1_DEFAULT_BATCHED_TOKENS = 8192  # vLLM V1 EngineArgs default for the LLM class and the server (>= 0.8)
V0_MIN_BATCHED_TOKENS = 2048  # V0 without chunked prefill: max(max_model_len, 2048) (SchedulerConfig)


class ScenarioError(ValueError):
    """A scenario file that cannot be run; the message names the key."""


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str
    gpu: Gpu
    checkpoint: Checkpoint
    vllm_version: str
    engine: dict[str, Any]
    arrival: str
    arrival_value: float
    requests: int
    seeds: int
    lengths: list[tuple[int, int]]
    measured: dict[str, float] = field(default_factory=dict)
    path: str = ""
    interconnect: Interconnect | None = None

    @property
    def scheduler(self) -> str:
        return scheduler_of(self.vllm_version)

    @property
    def tensor_parallel_size(self) -> int:
        return int(self.engine.get("tensor_parallel_size", 1))

    def profile(self, calibration: Calibration = CALIBRATED) -> EngineProfile:
        flags = dict(self.engine)
        max_model_len = int(flags.get("max_model_len", max(i + o for i, o in self.lengths)))
        default_budget = (
            max(max_model_len, V0_MIN_BATCHED_TOKENS) if self.scheduler == "v0" else V1_DEFAULT_BATCHED_TOKENS
        )
        profile = derive(
            self.name,
            self.checkpoint,
            self.gpu,
            max_model_len=max_model_len,
            max_num_seqs=int(flags.get("max_num_seqs", 256)),
            max_num_batched_tokens=int(flags.get("max_num_batched_tokens", default_budget)),
            gpu_memory_utilization=float(flags.get("gpu_memory_utilization", 0.90)),
            calibration=calibration,
            vllm_version=self.vllm_version,
            tensor_parallel_size=self.tensor_parallel_size,
            interconnect=self.interconnect,
        )
        if self.arrival == "offline":  # LLM.generate: no API server in front of the engine
            from dataclasses import replace

            profile = replace(profile, server_s=0.0)
        return profile


@dataclass(frozen=True)
class Metrics:
    """One run's metrics, as vLLM's benchmark_serving reports them (times in ms)."""

    completed: int
    duration_s: float
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    mean_ttft_ms: float
    median_ttft_ms: float
    p99_ttft_ms: float
    mean_tpot_ms: float
    median_tpot_ms: float
    p99_tpot_ms: float
    mean_itl_ms: float
    median_itl_ms: float
    p99_itl_ms: float
    mean_e2el_ms: float
    median_e2el_ms: float
    p99_e2el_ms: float
    preemptions: int = 0

    def metric(self, name: str) -> float:
        """A metric by its benchmark_serving name or a published alias."""
        aliases = {
            "benchmark_duration_s": self.duration_s,
            "batch_latency_p50_ms": self.duration_s * 1e3,  # one LLM.generate call's wall time
            "output_tok_s": self.output_throughput,
            "generation_tok_s": self.output_throughput,
            "total_tok_s": self.total_token_throughput,
            "request_throughput": self.request_throughput,
            "successful_rps": self.request_throughput,
            "ttft_p50_ms": self.median_ttft_ms,
            "tpot_p50_ms": self.median_tpot_ms,
            "itl_p50_ms": self.median_itl_ms,
        }
        if name in aliases:
            return aliases[name]
        value = getattr(self, name, None)
        if not isinstance(value, float):
            raise ScenarioError(
                f"measured.{name}: unknown metric; known: {', '.join(sorted([*aliases, *METRIC_NAMES]))}"
            )
        return value


METRIC_NAMES = (
    *(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p99")),
    "output_throughput",
    "total_token_throughput",
)


def _need(raw: dict, key: str, where: str = "") -> Any:
    if key not in raw:
        raise ScenarioError(f"{where}{key}: required")
    return raw[key]


def _gpu(raw: Any) -> Gpu:
    if isinstance(raw, str):
        if raw not in gpus():
            raise ScenarioError(f"gpu: unknown GPU {raw!r}; known: {', '.join(sorted(gpus()))}, or datasheet fields")
        return gpus()[raw]
    if not isinstance(raw, dict):
        raise ScenarioError("gpu: a known GPU name or a mapping of datasheet fields")
    fields = dict(raw)
    fields.setdefault("int8_tops", None)
    fields.setdefault("fp8_tflops", None)
    fields.setdefault("memory_gb", round(float(_need(fields, "memory_mib", "gpu.")) / 1024))
    for key in ("memory_mib", "bandwidth_gb_s", "fp16_tflops", "memory_class"):
        _need(fields, key, "gpu.")
    known = set(Gpu.__dataclass_fields__) - {"description", "derived_sustained_ratio"}
    extra = set(fields) - known
    if extra:
        raise ScenarioError(f"gpu.{sorted(extra)[0]}: unknown GPU field; known: {', '.join(sorted(known))}")
    try:
        return gpu_from_fields(str(fields.pop("name", "custom-gpu")), fields, sustained_ratio(list(gpus().values())))
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"gpu: {exc}") from None


def _checkpoint(raw: Any, quant: str | None) -> Checkpoint:
    if quant is not None and quant not in quantizations():
        raise ScenarioError(f"quantization: unknown {quant!r}; known: {', '.join(sorted(quantizations()))}")
    if isinstance(raw, str):
        if raw not in checkpoints():
            raise ScenarioError(
                f"model: unknown checkpoint {raw!r}; known: {', '.join(sorted(checkpoints()))}, or config.json fields"
            )
        base = checkpoints()[raw]
        return Checkpoint(
            base.repo, base.short, base.architecture, quantizations()[quant] if quant else base.quantization
        )
    if not isinstance(raw, dict):
        raise ScenarioError("model: a known checkpoint name or a mapping of config.json fields")
    if "architecture" in raw and raw["architecture"] in architectures():
        arch = architectures()[raw["architecture"]]
    else:
        fields = {k: v for k, v in raw.items() if k != "name"}
        try:
            arch = from_config(fields, str(raw.get("name", "custom")))
        except ArchitectureError as exc:
            raise ScenarioError("; ".join(f"model.{problem}" for problem in str(exc).split("; "))) from None
    return Checkpoint(
        str(raw.get("name", "custom")), str(raw.get("name", "custom")), arch, quantizations()[quant or "bf16"]
    )


def _interconnect(raw: Any, tp: int) -> Interconnect | None:
    """The GPUs' link: an instance family of data/interconnects.yaml, or {kind, bus_bandwidth_gb_s}."""
    if raw is None:
        if tp > 1:
            raise ScenarioError(
                "interconnect: required with engine.tensor_parallel_size > 1 (an instance family: "
                f"{', '.join(sorted(family_interconnects()))}; or {{kind: pcie|nvlink, bus_bandwidth_gb_s}})"
            )
        return None
    if isinstance(raw, str):
        if raw not in family_interconnects():
            raise ScenarioError(
                f"interconnect: unknown instance family {raw!r}; known: {', '.join(sorted(family_interconnects()))}"
            )
        return family_interconnects()[raw]
    if not isinstance(raw, dict) or set(raw) - {"name", "kind", "bus_bandwidth_gb_s", "source"}:
        raise ScenarioError(f"interconnect: an instance family or {{kind: {'|'.join(LINK_KINDS)}, bus_bandwidth_gb_s}}")
    try:
        return Interconnect(
            name=str(raw.get("name", "custom")),
            kind=str(_need(raw, "kind", "interconnect.")),
            bus_bandwidth_gb_s=float(_need(raw, "bus_bandwidth_gb_s", "interconnect.")),
        )
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ScenarioError):
            raise
        raise ScenarioError(f"interconnect: {exc}") from None


def _ints(value: Any, key: str) -> list[int]:
    if isinstance(value, int) and value > 0:
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, int) and v >= 0 for v in value):
        return value
    raise ScenarioError(f"lengths.{key}: a positive int or a list of non-negative ints")


def _lengths(raw: Any, base: Path, count: int | None) -> list[tuple[int, int]]:
    if not isinstance(raw, dict):
        raise ScenarioError("lengths: a mapping with input/output, or file")
    if "file" in raw:
        path = (base / str(raw["file"])).resolve()
        try:
            data = json.loads(path.read_text())
            ins, outs = data["input_lens"], data["output_lens"]
        except (OSError, ValueError, KeyError) as exc:
            raise ScenarioError(f"lengths.file: {path}: {exc}") from None
        pairs = list(zip(ins, outs))
        if raw.get("skip_empty"):
            pairs = [(i, o) for i, o in pairs if o > 0]
        if "first" in raw:
            pairs = pairs[: int(raw["first"])]
    else:
        ins, outs = _ints(_need(raw, "input", "lengths."), "input"), _ints(_need(raw, "output", "lengths."), "output")
        n = max(len(ins), len(outs), count or 1)
        if len(ins) not in (1, n) or len(outs) not in (1, n):
            raise ScenarioError("lengths: input and output lists must have the same length")
        pairs = [(ins[i % len(ins)], outs[i % len(outs)]) for i in range(n)]
    if "scale_to" in raw:
        target = raw["scale_to"]
        si = float(_need(target, "input", "lengths.scale_to.")) / max(sum(i for i, _ in pairs), 1)
        so = float(_need(target, "output", "lengths.scale_to.")) / max(sum(o for _, o in pairs), 1)
        pairs = [(max(1, round(i * si)), max(1, round(o * so))) for i, o in pairs]
    if "max_total" in raw:  # an approximation that must respect the run's max_model_len
        cap = int(raw["max_total"])
        pairs = [(min(i, cap - 1), min(o, cap - min(i, cap - 1))) for i, o in pairs]
    pairs = [(max(1, i), o) for i, o in pairs if o > 0]
    if not pairs:
        raise ScenarioError("lengths: no request with an output token")
    return pairs


def parse(raw: Any, base: Path = Path("."), path: str = "") -> Scenario:
    if not isinstance(raw, dict):
        raise ScenarioError("scenario: a YAML mapping")
    known = {"name", "source", "gpu", "model", "quantization", "vllm_version", "engine", "arrival", "lengths"}
    known |= {"measured", "notes", "interconnect"}
    extra = set(raw) - known
    if extra:
        raise ScenarioError(f"{sorted(extra)[0]}: unknown key; known: {', '.join(sorted(known))}")
    device = _gpu(_need(raw, "gpu"))
    model = _checkpoint(_need(raw, "model"), raw.get("quantization"))
    version = str(_need(raw, "vllm_version"))
    try:
        scheduler_of(version)
    except ValueError as exc:
        raise ScenarioError(f"vllm_version: {exc}") from None
    engine = raw.get("engine") or {}
    if not isinstance(engine, dict) or set(engine) - set(ENGINE_KEYS):
        bad = sorted(set(engine) - set(ENGINE_KEYS))[0] if isinstance(engine, dict) else ""
        raise ScenarioError(f"engine.{bad}: unknown flag; known: {', '.join(ENGINE_KEYS)}")
    tp = engine.get("tensor_parallel_size", 1)
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ScenarioError(f"engine.tensor_parallel_size: a positive integer, got {tp!r}")
    link = _interconnect(raw.get("interconnect"), tp)
    if tp > 1:
        try:
            model.split(tp)
        except ValueError as exc:
            raise ScenarioError(f"engine.tensor_parallel_size: {exc}") from None
    arrival = _need(raw, "arrival")
    kinds = [k for k in ARRIVALS if isinstance(arrival, dict) and k in arrival]
    if len(kinds) != 1:
        raise ScenarioError(f"arrival: exactly one of {', '.join(ARRIVALS)}")
    kind = kinds[0]
    value = float(arrival[kind])
    if value <= 0:
        raise ScenarioError(f"arrival.{kind}: must be > 0")
    count = int(value) if kind in ("offline", "burst") else arrival.get("requests")
    lengths = _lengths(_need(raw, "lengths"), base, int(count) if count else None)
    requests = int(count) if count else len(lengths)
    measured = raw.get("measured") or {}
    if not isinstance(measured, dict) or not all(isinstance(v, (int, float)) for v in measured.values()):
        raise ScenarioError("measured: a mapping of metric name -> number")
    return Scenario(
        name=str(raw.get("name", Path(path).stem)),
        source=str(raw.get("source", "")),
        gpu=device,
        checkpoint=model,
        vllm_version=version,
        engine=dict(engine),
        arrival=kind,
        arrival_value=value,
        requests=requests,
        seeds=int(arrival.get("seeds", 1)),
        lengths=lengths,
        measured={k: float(v) for k, v in measured.items()},
        path=path,
        interconnect=link,
    )


def load(path: Path) -> Scenario:
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    return parse(raw, path.parent, str(path))


def _requests(s: Scenario, rng: random.Random) -> list[tuple[float, int, int]]:
    """(arrival, prompt, output) of every request an open-loop scenario sends."""
    n = s.requests
    pairs = [s.lengths[i % len(s.lengths)] for i in range(n)]
    if s.arrival in ("offline", "burst"):
        return [(0.0, i, o) for i, o in pairs]
    t, out = 0.0, []
    for i, o in pairs:  # benchmark_serving: exponential gaps at --request-rate
        out.append((t, i, o))
        t += rng.expovariate(s.arrival_value)
    return out


def simulate(s: Scenario, profile: EngineProfile, seed: int = 0) -> Metrics:
    """One run of the scenario through the engine model."""
    rng = random.Random(seed)
    engine = ReplicaEngine(profile, record_stats=True)
    for i, o in s.lengths:
        if i + o > profile.max_model_len:
            raise ScenarioError(f"lengths: a request of {i}+{o} tokens exceeds max_model_len {profile.max_model_len}")
    finished = []
    itl: list[tuple[float, int]] = []
    if s.arrival == "concurrency":
        c = int(s.arrival_value)
        pairs = [s.lengths[i % len(s.lengths)] for i in range(s.requests)]
        nxt = 0
        for k in range(min(c, len(pairs))):
            engine.submit(Request(k, 0.0, *pairs[k]), 0.0)
        nxt = min(c, len(pairs))
        while engine.outstanding:
            t = engine.next_event_time()
            assert t is not None
            for f in engine.advance(t):
                finished.append(f)
                if nxt < len(pairs):
                    engine.submit(Request(nxt, f.finish_time, *pairs[nxt]), f.finish_time)
                    nxt += 1
            itl += engine.drain_stats().inter_token_latencies
    else:
        arrivals = _requests(s, rng)
        pending = [(a, k, i, o) for k, (a, i, o) in enumerate(arrivals)]
        heapq.heapify(pending)
        while pending or engine.outstanding:
            ne = engine.next_event_time()
            t = min(ne if ne is not None else float("inf"), pending[0][0] if pending else float("inf"))
            finished += engine.advance(t)
            while pending and pending[0][0] <= t:
                a, k, i, o = heapq.heappop(pending)
                engine.submit(Request(k, a, i, o), t)
            itl += engine.drain_stats().inter_token_latencies
    return _metrics(finished, itl, engine.total_preemptions)


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else 0.0


def _weighted(pairs: list[tuple[float, int]]) -> tuple[float, float, float]:
    if not pairs:
        return 0.0, 0.0, 0.0
    gaps = np.array([g for g, _ in pairs])
    weights = np.array([n for _, n in pairs], dtype=float)
    order = np.argsort(gaps)
    gaps, weights = gaps[order], weights[order]
    cum = np.cumsum(weights) / weights.sum()
    mean = float((gaps * weights).sum() / weights.sum())
    return mean, float(gaps[np.searchsorted(cum, 0.5)]), float(gaps[min(np.searchsorted(cum, 0.99), len(gaps) - 1)])


def _metrics(finished: list, itl: list[tuple[float, int]], preemptions: int) -> Metrics:
    start = min(f.request.arrival for f in finished)
    duration = max(f.finish_time for f in finished) - start
    ttft = np.array([f.ttft for f in finished]) * 1e3
    e2e = np.array([f.latency for f in finished]) * 1e3
    tpot = (
        np.array(
            [(f.latency - f.ttft) / (f.request.output_tokens - 1) for f in finished if f.request.output_tokens > 1]
        )
        * 1e3
    )
    out_tokens = sum(f.request.output_tokens for f in finished)
    in_tokens = sum(f.request.prompt_tokens for f in finished)
    mi, di, pi = _weighted(itl)
    return Metrics(
        completed=len(finished),
        duration_s=duration,
        request_throughput=len(finished) / duration,
        output_throughput=out_tokens / duration,
        total_token_throughput=(out_tokens + in_tokens) / duration,
        mean_ttft_ms=float(ttft.mean()),
        median_ttft_ms=_pct(ttft, 50),
        p99_ttft_ms=_pct(ttft, 99),
        mean_tpot_ms=float(tpot.mean()) if len(tpot) else 0.0,
        median_tpot_ms=_pct(tpot, 50),
        p99_tpot_ms=_pct(tpot, 99),
        mean_itl_ms=mi * 1e3,
        median_itl_ms=di * 1e3,
        p99_itl_ms=pi * 1e3,
        mean_e2el_ms=float(e2e.mean()),
        median_e2el_ms=_pct(e2e, 50),
        p99_e2el_ms=_pct(e2e, 99),
        preemptions=preemptions,
    )


def run(s: Scenario, calibration: Calibration = CALIBRATED) -> Metrics:
    """The scenario's metrics; a Poisson scenario with `seeds` > 1 averages its seeds' runs."""
    try:
        profile = s.profile(calibration)
    except ValueError as exc:
        raise ScenarioError(f"engine: {exc}") from None
    runs = [simulate(s, profile, seed) for seed in range(max(1, s.seeds))]
    if len(runs) == 1:
        return runs[0]
    fields = {k: float(np.mean([getattr(r, k) for r in runs])) for k in Metrics.__dataclass_fields__}
    fields["completed"] = runs[0].completed
    fields["preemptions"] = int(sum(r.preemptions for r in runs))
    return Metrics(**fields)  # type: ignore[arg-type]  # float fields averaged, counts restored
