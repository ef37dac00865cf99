"""Recommend scaling thresholds from a capacity envelope, as `pulumi config set` commands.

From the knee of the envelope and the SLO it derives the per-replica planning capacity and:
queue depth and KV targets per replica (between the planning point and the overloaded point
past the knee, so KEDA scales exactly when load goes past planning capacity), the latency
guardrails (above the SLO, as the stack's settings require), and maxReplicas for a peak load.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from capacity.envelope import EnvelopeRow, Knee, find_knee, read_envelope, validate
from contract.settings.stack_file import load_stack


@dataclass(frozen=True)
class Setting:
    path: str  # under autoscaling.<model>.
    value: float | int | bool
    rationale: str
    current_attr: str | None = None  # dotted attribute of ModelAutoscaling, for "current" values


@dataclass(frozen=True)
class Recommendation:
    knee: Knee
    planning: EnvelopeRow
    beyond: EnvelopeRow | None  # the first measured point past the knee (overloaded)
    settings: list[Setting]
    notes: list[str]

    @property
    def planning_rps(self) -> float:
        return self.planning.successful_rps


def _meets(row: EnvelopeRow, slo_p99: float, slo_ttft: float | None) -> bool:
    if row.p99_latency_s > slo_p99:
        return False
    return slo_ttft is None or row.ttft_p95_s is None or row.ttft_p95_s <= slo_ttft


def _between(low: float, high: float | None, fallback_factor: float) -> float:
    """A target that a replica at `low` stays under and one at `high` exceeds."""
    return (low + high) / 2 if high is not None and high > low else low * fallback_factor


def _span(low: float, high: float | None, at: str, past: str, fmt: str) -> str:
    if high is not None and high > low:
        return f"{fmt.format(low)} at planning {at}, {fmt.format(high)} at {past}; scale out between the two"
    return f"{fmt.format(low)} at planning {at}, no higher point measured past it; scale out a little above it"


def _guardrail(slo: float, overloaded: float | None) -> float:
    """Above the SLO (a guardrail, not the main trigger), below what the overloaded replica shows."""
    if overloaded is not None and overloaded > slo:
        value = (slo + overloaded) / 2
    else:
        value = slo * 1.2
    return round(min(max(value, slo * 1.05), slo * 1.5) * 2) / 2  # half-second steps


def recommend(
    rows: list[EnvelopeRow],
    slo_p99: float,
    slo_ttft_p95: float | None = None,
    peak_rps: float | None = None,
) -> Recommendation:
    if slo_p99 <= 0:
        raise ValueError(f"--slo-p99 must be > 0 seconds, got {slo_p99}")
    if slo_ttft_p95 is not None and slo_ttft_p95 <= 0:
        raise ValueError(f"--slo-ttft-p95 must be > 0 seconds, got {slo_ttft_p95}")
    if peak_rps is not None and peak_rps <= 0:
        raise ValueError(f"--peak-rps must be > 0, got {peak_rps}")
    rows = validate(list(rows))
    knee = find_knee(rows)
    candidates = [r for r in rows[: knee.index + 1] if _meets(r, slo_p99, slo_ttft_p95)]
    if not candidates:
        raise ValueError(
            f"no measured concurrency up to the knee ({knee.concurrency}) meets p99 <= {slo_p99}s"
            + (f" and TTFT p95 <= {slo_ttft_p95}s" if slo_ttft_p95 else "")
            + ": this replica cannot serve this request shape within the SLO"
        )
    planning = max(candidates, key=lambda r: r.successful_rps)
    index = rows.index(planning)
    beyond = rows[index + 1] if index + 1 < len(rows) else None
    notes: list[str] = []
    settings: list[Setting] = []
    at = f"concurrency {planning.concurrency}"
    past = f"concurrency {beyond.concurrency}" if beyond else "no point past it"

    if planning.avg_waiting is not None:
        # a whole count: KEDA's fallback truncates the target (settings rule on fallbackReplicas)
        target = max(1, round(_between(planning.avg_waiting, beyond.avg_waiting if beyond else None, 1.25)))
        settings.append(Setting(
            "triggers.queueDepth.targetPerReplica", target,
            "waiting per replica: " + _span(planning.avg_waiting, beyond.avg_waiting if beyond else None, at, past, "{:.2f}"),
            "triggers.queue_depth.target_per_replica",
        ))  # fmt: skip
    else:
        notes.append("queueDepth: the envelope has no avg_waiting column; keep the current target")

    if planning.avg_kv_usage is not None:
        kv = _between(planning.avg_kv_usage, beyond.avg_kv_usage if beyond else None, 1.2)
        kv = round(min(max(kv, 0.05), 0.95), 2)
        settings.append(Setting(
            "triggers.kvCache.targetPerReplica", kv,
            "KV usage per replica: " + _span(planning.avg_kv_usage, beyond.avg_kv_usage if beyond else None, at, past, "{:.0%}"),
            "triggers.kv_cache.target_per_replica",
        ))  # fmt: skip
    else:
        notes.append("kvCache: the envelope has no avg_kv_usage column (sweep with metrics to measure it); "
                     "keep the current target")  # fmt: skip

    settings.append(Setting("slo.e2eP99Seconds", _num(slo_p99), "the latency SLO this envelope was read against",
                            "slo.e2e_p99_seconds"))  # fmt: skip
    e2e = _guardrail(slo_p99, beyond.p99_latency_s if beyond else None)
    settings.append(Setting(
        "triggers.e2eLatency.thresholdSeconds", _num(e2e),
        f"guardrail above the {slo_p99:g}s SLO"
        + (f", below the {beyond.p99_latency_s:.3g}s p99 of the overloaded {past}" if beyond and beyond.p99_latency_s > slo_p99 else ""),
        "triggers.e2e_latency.threshold_seconds",
    ))  # fmt: skip
    if slo_ttft_p95 is not None:
        beyond_ttft = beyond.ttft_p95_s if beyond else None
        settings.append(Setting("slo.ttftP95Seconds", _num(slo_ttft_p95), "the TTFT SLO", "slo.ttft_p95_seconds"))
        settings.append(Setting("triggers.ttft.enabled", True, "a TTFT SLO was given: watch it", "triggers.ttft.enabled"))
        settings.append(Setting(
            "triggers.ttft.thresholdSeconds", _num(_guardrail(slo_ttft_p95, beyond_ttft)),
            f"guardrail above the {slo_ttft_p95:g}s TTFT SLO"
            + (f", below the {beyond_ttft:.3g}s TTFT p95 of the overloaded {past}" if beyond_ttft and beyond_ttft > slo_ttft_p95 else ""),
            "triggers.ttft.threshold_seconds",
        ))  # fmt: skip
    if peak_rps is not None:
        replicas = max(1, math.ceil(peak_rps / planning.successful_rps - 1e-9))
        settings.append(Setting(
            "maxReplicas", replicas,
            f"peak {peak_rps:g} req/s / {planning.successful_rps:.2f} req/s planning capacity per replica",
            "max_replicas",
        ))  # fmt: skip
    else:
        notes.append("maxReplicas: pass --peak-rps to size it (peak load / planning capacity)")
    if not knee.saturated:
        notes.append(knee.reason)
    return Recommendation(knee, planning, beyond, settings, notes)


def _num(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _render(value: float | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def current_values(stack: str, model: str, stack_file: Path | None = None) -> tuple[object | None, str | None]:
    """The stack's merged autoscaling policy for `model`, or (None, why not)."""
    path = stack_file or Path(f"Pulumi.{stack}.yaml")
    if not path.is_file():
        path = Path(__file__).resolve().parents[1] / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        return None, f"no Pulumi.{stack}.yaml found"
    try:
        return load_stack(path).autoscaling_for(model), None
    except (ValueError, OSError, yaml.YAMLError) as error:  # an invalid stack file: show recommendations anyway
        return None, f"{path} could not be read: {error}"


def _attr(obj: object, dotted: str) -> object:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def commands(rec: Recommendation, stack: str, model: str | None, current: object | None = None) -> list[str]:
    key = model or "default"
    # Pulumi's --path syntax: a key with a dot must be quoted, e.g. autoscaling["qwen2.5-7b"]
    prefix = f'autoscaling["{key}"]' if "." in key else f"autoscaling.{key}"
    lines = []
    for s in rec.settings:
        comment = s.rationale
        if current is not None and s.current_attr:
            comment += f" (current: {_render(_attr(current, s.current_attr))})"
        lines.append(f"pulumi config set --path '{prefix}.{s.path}' {_render(s.value)} -s {stack}   # {comment}")
    return lines


def report_lines(rec: Recommendation, slo_p99: float) -> list[str]:
    p = rec.planning
    return [
        f"# knee: concurrency {rec.knee.concurrency} ({rec.knee.reason})",
        f"# planning capacity: {p.successful_rps:.2f} req/s per replica at concurrency {p.concurrency} "
        f"(p99 {p.p99_latency_s:.3g}s <= SLO {slo_p99:g}s)",
        *(f"# note: {n}" for n in rec.notes),
    ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--envelope", type=Path, required=True, help="envelope CSV (sweep output or calibration file)")
    parser.add_argument("--slo-p99", type=float, required=True, help="end-to-end p99 latency SLO, seconds")
    parser.add_argument("--slo-ttft-p95", type=float, default=None, help="TTFT p95 SLO, seconds")
    parser.add_argument("--stack", required=True, help="Pulumi stack the commands target (-s)")
    parser.add_argument("--model", default=None, help="served model name (default: the 'default' block)")
    parser.add_argument("--peak-rps", type=float, default=None, help="peak load to size maxReplicas for, req/s")
    parser.add_argument("--stack-file", type=Path, default=None, help="Pulumi.<stack>.yaml (default: ./ or repo root)")


def run(args: argparse.Namespace) -> int:
    rows = read_envelope(args.envelope)
    rec = recommend(rows, args.slo_p99, args.slo_ttft_p95, args.peak_rps)
    current, why_not = current_values(args.stack, args.model or "default", args.stack_file)
    print("\n".join(report_lines(rec, args.slo_p99)))
    if why_not:
        print(f"# current values not shown: {why_not}")
    print("\n".join(commands(rec, args.stack, args.model, current)))
    return 0
