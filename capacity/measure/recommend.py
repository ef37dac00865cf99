"""Recommend scaling thresholds from a capacity envelope, as `pulumi config set` commands.

From the knee of the envelope and the SLO it derives the per-replica planning capacity and:
queue depth and KV targets per replica (between the planning point and the overloaded point
past the knee, so KEDA scales exactly when load goes past planning capacity), the latency
guardrails (above the SLO, as the stack's settings require), and maxReplicas for a peak load.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from capacity.measure.envelope import EnvelopeRow, Knee, find_knee, validate
from contract.settings.autoscaling import ModelAutoscaling
from contract.settings.config_path import holds
from contract.settings.stack_file import find_stack_file, load_stack
from contract.signals import Vllm
from contract.triggers import TRIGGERS, Trigger


@dataclass(frozen=True)
class Setting:
    path: str  # under autoscaling.<model>.
    value: float | int | bool
    rationale: str
    current: Callable[[ModelAutoscaling], object] | None = None  # the value in force, from a merged policy


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


def trigger_for(metric: str, triggers: Sequence[Trigger] = TRIGGERS) -> Trigger:
    """The trigger whose signal reads `metric` (the envelope measured the same vLLM series)."""
    defaults = ModelAutoscaling()
    for trigger in triggers:
        if (query := trigger.signal(defaults)) is not None and query.metric == metric:
            return trigger
    raise ValueError(f"no trigger reads {metric}")


def _meets(row: EnvelopeRow, slo_p99: float | None, slo_ttft: float | None) -> bool:
    if slo_p99 is not None and row.p99_latency_s > slo_p99:
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
    """Above the SLO (a guardrail, not the main trigger), below what the overloaded replica shows,
    to two significant digits of the SLO's scale and always strictly above it (the stack's own
    rule: a guardrail at the SLO is refused)."""
    if overloaded is not None and overloaded > slo:
        value = (slo + overloaded) / 2
    else:
        value = slo * 1.2
    value = min(max(value, slo * 1.05), slo * 1.5)
    step = 10 ** math.floor(math.log10(slo)) / 10
    rounded = round(round(value / step) * step, 10)
    return rounded if rounded > slo else round(slo + step, 10)


def _guardrail_reason(
    slo_name: str, reading: str, slo: float, threshold: float, overloaded: float | None, past: str
) -> str:
    """Why a guardrail sits where it does, stating how it compares with the overloaded reading as it
    does: the margin above the SLO can put it above an overload that barely passes the SLO."""
    reason = f"guardrail above the {slo:g}s {slo_name}"
    if overloaded is None or overloaded <= slo:
        return reason
    if threshold < overloaded:
        return reason + f", below the {overloaded:.3g}s {reading} of the overloaded {past}"
    return reason + f", at or above the {overloaded:.3g}s {reading} of the overloaded {past} (kept 5% over the SLO)"


def recommend(
    rows: list[EnvelopeRow],
    slo_p99: float | None,
    slo_ttft_p95: float | None = None,
    peak_rps: float | None = None,
    triggers: Sequence[Trigger] = TRIGGERS,
) -> Recommendation:
    if slo_p99 is None and slo_ttft_p95 is None:
        raise ValueError(
            "no SLO to read the envelope against: set slo.ttftP95Seconds or slo.e2eP99Seconds, "
            "or pass --slo-ttft-p95 / --slo-p99"
        )
    if slo_p99 is not None and slo_p99 <= 0:
        raise ValueError(f"--slo-p99 must be > 0 seconds, got {slo_p99}")
    if slo_ttft_p95 is not None and slo_ttft_p95 <= 0:
        raise ValueError(f"--slo-ttft-p95 must be > 0 seconds, got {slo_ttft_p95}")
    if peak_rps is not None and peak_rps <= 0:
        raise ValueError(f"--peak-rps must be > 0, got {peak_rps}")
    rows = validate(list(rows))
    knee = find_knee(rows)
    if not knee.saturated:  # no plateau, no knee: thresholds from it would be guesses
        raise ValueError(f"{knee.reason}; no thresholds recommended from an envelope without a plateau")
    candidates = [r for r in rows[: knee.index + 1] if _meets(r, slo_p99, slo_ttft_p95)]
    if not candidates:
        raise ValueError(
            f"no measured concurrency up to the knee ({knee.concurrency}) meets "
            + " and ".join(
                ([f"p99 <= {slo_p99}s"] if slo_p99 is not None else [])
                + ([f"TTFT p95 <= {slo_ttft_p95}s"] if slo_ttft_p95 is not None else [])
            )
            + ": this replica cannot serve this request shape within the SLO"
        )
    planning = max(candidates, key=lambda r: r.successful_rps)
    index = rows.index(planning)
    beyond = rows[index + 1] if index + 1 < len(rows) else None
    notes: list[str] = []
    settings: list[Setting] = []
    at = f"concurrency {planning.concurrency}"
    past = f"concurrency {beyond.concurrency}" if beyond else "no point past it"

    queue = trigger_for(Vllm.REQUESTS_WAITING, triggers)
    if planning.avg_waiting is not None:
        # tenths: KEDA hands the metric over with 3 decimals and falls back through any target
        target = round(max(_between(planning.avg_waiting, beyond.avg_waiting if beyond else None, 1.25), 1.0), 1)
        settings.append(
            Setting(
                queue.target_path(),
                target,
                "waiting per replica: "
                + _span(planning.avg_waiting, beyond.avg_waiting if beyond else None, at, past, "{:.2f}"),
                queue.target,
            )
        )
    else:
        notes.append(f"{queue.key}: the envelope has no avg_waiting column; keep the current target")

    kv_cache = trigger_for(Vllm.KV_CACHE_USAGE, triggers)
    if planning.avg_kv_usage is not None:
        kv = _between(planning.avg_kv_usage, beyond.avg_kv_usage if beyond else None, 1.2)
        kv = round(min(max(kv, 0.05), 0.95), 2)
        settings.append(
            Setting(
                kv_cache.target_path(),
                kv,
                "KV usage per replica: "
                + _span(planning.avg_kv_usage, beyond.avg_kv_usage if beyond else None, at, past, "{:.0%}"),
                kv_cache.target,
            )
        )
    else:
        notes.append(
            f"{kv_cache.key}: the envelope has no avg_kv_usage column (sweep with metrics to measure it); "
            "keep the current target"
        )

    if slo_p99 is not None:
        settings.append(
            Setting(
                "slo.e2eP99Seconds",
                _num(slo_p99),
                "the latency SLO this envelope was read against",
                lambda policy: policy.slo.e2e_p99_seconds,
            )
        )
        e2e_latency = trigger_for(Vllm.E2E_LATENCY, triggers)
        e2e = _guardrail(slo_p99, beyond.p99_latency_s if beyond else None)
        settings.append(
            Setting(
                e2e_latency.target_path(),
                _num(e2e),
                _guardrail_reason("SLO", "p99", slo_p99, e2e, beyond.p99_latency_s if beyond else None, past),
                e2e_latency.target,
            )
        )
    else:
        notes.append("no end-to-end SLO: the e2e guardrail keeps its current threshold")
    if slo_ttft_p95 is not None:
        ttft = trigger_for(Vllm.TTFT, triggers)
        beyond_ttft = beyond.ttft_p95_s if beyond else None
        settings.append(
            Setting(
                "slo.ttftP95Seconds", _num(slo_ttft_p95), "the TTFT SLO", lambda policy: policy.slo.ttft_p95_seconds
            )
        )
        settings.append(Setting(f"triggers.{ttft.key}.enabled", True, "a TTFT SLO was given: watch it", ttft.enabled))
        threshold = _guardrail(slo_ttft_p95, beyond_ttft)
        settings.append(
            Setting(
                ttft.target_path(),
                _num(threshold),
                _guardrail_reason("TTFT SLO", "TTFT p95", slo_ttft_p95, threshold, beyond_ttft, past),
                ttft.target,
            )
        )
    if peak_rps is not None:
        replicas = max(1, math.ceil(peak_rps / planning.successful_rps - 1e-9))
        settings.append(
            Setting(
                "maxReplicas",
                replicas,
                f"peak {peak_rps:g} req/s / {planning.successful_rps:.2f} req/s planning capacity per replica",
                lambda policy: policy.max_replicas,
            )
        )
    else:
        notes.append("maxReplicas: pass --peak-rps to size it (peak load / planning capacity)")
    return Recommendation(knee, planning, beyond, settings, notes)


def _num(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _render(value: float | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def current_values(
    stack: str | Path, model: str, stack_dir: Path | None = None
) -> tuple[ModelAutoscaling | None, str | None]:
    """The stack's merged autoscaling policy for `model`, or (None, why not)."""
    try:
        return load_stack(find_stack_file(stack, stack_dir)).autoscaling_for(model), None
    except (ValueError, OSError, yaml.YAMLError) as error:  # a missing or invalid stack file: say why
        return None, str(error)


def slo_to_defend(
    policy: ModelAutoscaling | None, why_not: str | None, stack: str, slo_p99: float | None, slo_ttft_p95: float | None
) -> tuple[float | None, float | None]:
    """The SLO (e2e p99, TTFT p95) an envelope is read against: each flag where given, else the
    stack's `autoscaling.<model>.slo` (`current_values`' policy), so a recommendation defends the
    SLO the stack deploys."""
    if policy is None:
        if slo_p99 is None and slo_ttft_p95 is None:
            raise ValueError(f"no --slo-p99 or --slo-ttft-p95 given and stack {stack}'s SLO cannot be read: {why_not}")
        return slo_p99, slo_ttft_p95
    return (
        slo_p99 if slo_p99 is not None else policy.slo.e2e_p99_seconds,
        slo_ttft_p95 if slo_ttft_p95 is not None else policy.slo.ttft_p95_seconds,
    )


def commands(
    rec: Recommendation,
    stack: str,
    model: str | None,
    current: ModelAutoscaling | None = None,
    settings: Sequence[Setting] | None = None,
    planned: bool = False,
) -> list[str]:
    """The settings (default: all recommended) as commands; the caller validates them first.
    `planned`: the model's values were planned (an evidence block), so the value in force shows as `plan:`."""
    key = model or "default"
    # Pulumi's --path syntax: a key with a dot must be quoted, e.g. autoscaling["qwen2.5-7b"]
    prefix = f'autoscaling["{key}"]' if "." in key else f"autoscaling.{key}"
    lines = []
    shadowed = overriding_models(stack) if model is None else {}
    for s in rec.settings if settings is None else settings:
        comment = s.rationale
        if current is not None and s.current is not None:
            value = s.current(current)
            shown = "not set" if value is None else _render(value)  # never `(plan: None)`
            comment += f" ({'plan' if planned else 'current'}: {shown})"
        models = [m for m, block in shadowed.items() if holds(block, s.path)]
        if models:  # a default a model's own block overrides changes nothing for that model
            comment += f"; autoscaling.{{{','.join(models)}}} set it themselves: pass --model to retune them"
        lines.append(f"pulumi config set --path '{prefix}.{s.path}' {_render(s.value)} -s {stack}   # {comment}")
    return lines


def overriding_models(stack: str | Path) -> dict[str, dict]:
    """Each model's own `autoscaling.<model>` block in the stack file as written (empty if unreadable)."""
    try:
        raw = (yaml.safe_load(find_stack_file(stack).read_text()) or {}).get("config", {}).get(
            "inference-platform:autoscaling"
        ) or {}
    except (OSError, ValueError, yaml.YAMLError):
        return {}
    return {name: block for name, block in raw.items() if name != "default" and isinstance(block, dict)}


def report_lines(rec: Recommendation, slo_p99: float | None, slo_ttft_p95: float | None = None) -> list[str]:
    p = rec.planning
    within = [f"p99 {p.p99_latency_s:.3g}s <= SLO {slo_p99:g}s"] if slo_p99 is not None else []
    if slo_ttft_p95 is not None and p.ttft_p95_s is not None:
        within.append(f"TTFT p95 {p.ttft_p95_s:.3g}s <= SLO {slo_ttft_p95:g}s")
    return [
        f"# knee: concurrency {rec.knee.concurrency} ({rec.knee.reason})",
        f"# planning capacity: {p.successful_rps:.2f} req/s per replica at concurrency {p.concurrency}"
        + (f" ({', '.join(within)})" if within else ""),
        *(f"# note: {n}" for n in rec.notes),
    ]
