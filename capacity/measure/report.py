"""A sweep's report: the envelope plot (throughput and p99 vs concurrency, the knee and the
planning point the thresholds were read at marked), the
Markdown report with what the autoscaler would have seen, and the files they are written to."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from capacity.measure.collector import Reading
from capacity.measure.envelope import EnvelopeRow, Knee, find_knee, write_envelope
from capacity.measure.sweep import PointResult
from capacity.tables import cell
from contract.settings.autoscaling import ModelAutoscaling
from contract.triggers import TRIGGERS, Trigger


def plot_envelope(
    rows: list[EnvelopeRow],
    knee: Knee | None,
    path: Path,
    title: str,
    slo_p99: float | None = None,
    planning: EnvelopeRow | None = None,
) -> None:
    """Throughput (left axis) and p99 latency (right axis) of one replica against concurrency,
    the knee and the planning point (`recommend`'s: the capacity the thresholds were read at,
    within the SLO) marked; the legend sits below the axes so it never covers a curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = [r.concurrency for r in rows]
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    ax.plot(c, [r.successful_rps for r in rows], "o-", color="tab:blue", label="throughput per replica (req/s)")
    ax.set_xlabel("concurrency per replica (requests in flight)")
    ax.set_ylabel("successful requests/s per replica", color="tab:blue")
    ax.set_xscale("log", base=2)  # concurrency >= 1: no 0 on this axis
    ax.set_xticks(c, [str(x) for x in c])
    ax.minorticks_off()
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    right = ax.twinx()
    right.plot(c, [r.p99_latency_s for r in rows], "s--", color="tab:red", label="p99 end-to-end latency (s)")
    right.set_ylabel("p99 end-to-end latency (s)", color="tab:red")
    right.set_ylim(bottom=0)
    if slo_p99:
        right.axhline(slo_p99, color="tab:red", alpha=0.6, linestyle=":", label=f"p99 SLO {slo_p99:g} s")
    if knee and knee.saturated:
        k = rows[knee.index]
        ax.axvline(
            knee.concurrency,
            color="black",
            alpha=0.5,
            label=f"knee: {k.concurrency} in flight, {k.successful_rps:.2f} req/s",
        )
    if planning is not None:
        ax.plot(
            planning.concurrency,
            planning.successful_rps,
            "*",
            color="tab:green",
            markersize=16,
            zorder=5,
            label=f"planning point: {planning.concurrency} in flight, {planning.successful_rps:.2f} req/s",
        )
    handles, labels = ax.get_legend_handles_labels()
    more_handles, more_labels = right.get_legend_handles_labels()
    fig.legend(handles + more_handles, labels + more_labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def envelope_table(rows: list[EnvelopeRow], knee: Knee | None = None) -> list[str]:
    lines = [
        "| concurrency | req/s | tokens/s | p95 (s) | p99 (s) | TTFT p95 (s) | avg waiting | max waiting | avg KV |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(rows):
        mark = " **(knee)**" if knee and knee.saturated and i == knee.index else ""
        lines.append(
            f"| {r.concurrency}{mark} | {r.successful_rps:.2f} | {r.total_tokens_per_s:.0f} | {r.p95_latency_s:.2f} "
            f"| {r.p99_latency_s:.2f} | {cell(r.ttft_p95_s, '.2f')} | {cell(r.avg_waiting, '.2f')} "
            f"| {cell(r.max_waiting, '.0f')} | {cell(r.avg_kv_usage, '.0%')} |"
        )
    return lines


def _column(trigger: Trigger, reading: Reading) -> str:
    unit = " (s)" if trigger.unit == "s" else ""
    return f"{trigger.label}{unit}" + (" / replica" if reading.additive else "")


def _seen(reading: Reading, replicas: int) -> float | None:
    """A KEDA reading as its target reads it: an additive one (AverageValue) per replica."""
    if reading.instant is None or not reading.additive:
        return reading.instant
    return reading.instant / replicas


def _autoscaler_table(
    points: Sequence[PointResult], triggers: Sequence[Trigger], policy: ModelAutoscaling | None = None
) -> list[str]:
    """The triggers' readings at the end of each level's window, in the units of their thresholds,
    under a first row of the policy's targets (when given)."""
    read = [t for t in triggers if t.key in points[0].keda]
    replicas, scale = points[0].replicas, points[0].time_scale
    clock = (
        f"The replicas ran on a {scale:g}x clock; every number here is in real (model) time, as a real "
        f"replica would show it: each query's window is the policy's window / {scale:g} of wall time, and "
        f"rates counted per wall second are divided by {scale:g}. "
        if scale != 1
        else ""
    )
    lines = [
        "## What the autoscaler would have seen (KEDA queries, end of each window)",
        "",
        f"{clock}Additive signals (AverageValue triggers: the queue, KV and token rates) are shown per replica, "
        f"their fleet sum over the {replicas} replica(s) divided as KEDA divides it, so each compares with its "
        "per-replica target; latency quantiles (Value triggers) are the fleet's.",
        "",
        "| concurrency / replica | " + " | ".join(_column(t, points[0].keda[t.key]) for t in read) + " |",
        "|---:|" + "---:|" * len(read),
    ]
    if policy is not None:
        targets = [f"{t.target(policy):g}" + ("" if t.enabled(policy) else " (off)") for t in read]
        lines.append("| target | " + " | ".join(targets) + " |")
    for p in points:
        lines.append(
            f"| {p.row.concurrency} | " + " | ".join(cell(_seen(p.keda[t.key], p.replicas), ".2f") for t in read) + " |"
        )
    return lines


def markdown_report(
    rows: list[EnvelopeRow],
    knee: Knee | None,
    title: str,
    png_name: str,
    points: Sequence[PointResult],
    slo_p99: float | None = None,
    recommendations: list[str] | None = None,
    triggers: Sequence[Trigger] = TRIGGERS,
    policy: ModelAutoscaling | None = None,
) -> str:
    lines = [f"# {title}", "", f"![envelope]({png_name})", "", *envelope_table(rows, knee), ""]
    if knee:
        found = f"**Knee:** concurrency {knee.concurrency}: " if knee.saturated else "**No knee yet:** "
        lines += [f"{found}{knee.reason}.", ""]
    judged = [p for p in points if p.summary.get("slo_attainment") is not None]
    if judged:
        lines += [
            "## SLO attained per level (the stack's per-request TTFT and TPOT targets)",
            "",
            "| concurrency | SLO attained |",
            "|---:|---:|",
            *(f"| {p.row.concurrency} | {p.summary['slo_attainment']:.1%} |" for p in judged),
            "",
        ]
    keda_points = [p for p in points if p.keda]
    if keda_points:
        lines += _autoscaler_table(keda_points, triggers, policy)
        queries = keda_points[0].keda
        lines += ["", "Queries:", "", *(f"- `{name}`: `{r.query}`" for name, r in queries.items()), ""]
    if recommendations:
        slo = f" (p99 SLO {slo_p99:g}s)" if slo_p99 is not None else ""
        lines += [f"## Recommended thresholds{slo}", "", "```sh", *recommendations, "```", ""]
    return "\n".join(lines)


def write_report(
    points: list[PointResult],
    out: Path,
    title: str,
    slo_p99: float | None = None,
    recommendations: list[str] | None = None,
    policy: ModelAutoscaling | None = None,
    planning: EnvelopeRow | None = None,
) -> dict[str, Path]:
    """envelope.csv, envelope.png, report.md and points.json (summaries and KEDA readings) in `out`;
    `planning`: the point the recommended thresholds were read at, marked on the plot."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [p.row for p in points]
    paths = {
        "csv": out / "envelope.csv",
        "png": out / "envelope.png",
        "md": out / "report.md",
        "json": out / "points.json",
    }
    write_envelope(paths["csv"], rows)
    knee = find_knee(rows) if len(rows) >= 2 else None
    plot_envelope(rows, knee, paths["png"], title, slo_p99, planning)
    paths["md"].write_text(
        markdown_report(rows, knee, title, paths["png"].name, points, slo_p99, recommendations, policy=policy)
    )
    paths["json"].write_text(
        json.dumps(
            [
                {
                    "summary": p.summary,
                    "replicas": p.replicas,
                    "time_scale": p.time_scale,
                    "keda": {
                        k: {"query": v.query, "instant": v.instant, "mean": v.mean, "max": v.max}
                        for k, v in p.keda.items()
                    },
                }
                for p in points
            ],
            indent=2,
        )
    )
    return paths
