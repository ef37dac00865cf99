"""Envelope plot (throughput and p99 vs concurrency, knee marked) and Markdown report."""

from __future__ import annotations

from pathlib import Path

from capacity.envelope import EnvelopeRow, Knee


def plot_envelope(rows: list[EnvelopeRow], knee: Knee | None, path: Path, title: str,
                  slo_p99: float | None = None) -> None:  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = [r.concurrency for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ax.plot(c, [r.successful_rps for r in rows], "o-", color="tab:blue", label="throughput (req/s)")
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("successful requests/s", color="tab:blue")
    ax.set_xscale("log", base=2)
    ax.set_xticks(c, [str(x) for x in c])
    ax.set_ylim(bottom=0)
    right = ax.twinx()
    right.plot(c, [r.p99_latency_s for r in rows], "s--", color="tab:red", label="p99 latency (s)")
    right.set_ylabel("p99 end-to-end latency (s)", color="tab:red")
    right.set_ylim(bottom=0)
    if slo_p99:
        right.axhline(slo_p99, color="tab:red", alpha=0.4, linestyle=":", label=f"p99 SLO {slo_p99:g}s")
    if knee:
        ax.axvline(knee.concurrency, color="black", alpha=0.5)
        k = rows[knee.index]
        ax.annotate(f"knee: {k.concurrency}\n{k.successful_rps:.2f} req/s", (k.concurrency, k.successful_rps),
                    textcoords="offset points", xytext=(-70, -30), arrowprops={"arrowstyle": "->"})  # fmt: skip
    handles = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    ax.legend(handles[0] + more[0], handles[1] + more[1], loc="lower right", fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def envelope_table(rows: list[EnvelopeRow], knee: Knee | None = None) -> list[str]:
    lines = [
        "| concurrency | req/s | tokens/s | p95 (s) | p99 (s) | TTFT p95 (s) | avg waiting | max waiting | avg KV |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(rows):
        mark = " **(knee)**" if knee and i == knee.index else ""
        lines.append(
            f"| {r.concurrency}{mark} | {r.successful_rps:.2f} | {r.total_tokens_per_s:.0f} | {r.p95_latency_s:.2f} "
            f"| {r.p99_latency_s:.2f} | {_cell(r.ttft_p95_s, '.2f')} | {_cell(r.avg_waiting, '.2f')} "
            f"| {_cell(r.max_waiting, '.0f')} | {_cell(r.avg_kv_usage, '.0%')} |"
        )
    return lines


def markdown_report(rows: list[EnvelopeRow], knee: Knee | None, title: str, png_name: str, points: list,
                    slo_p99: float | None = None, recommendations: list[str] | None = None) -> str:  # fmt: skip
    lines = [f"# {title}", "", f"![envelope]({png_name})", "", *envelope_table(rows, knee), ""]
    if knee:
        lines += [f"**Knee:** concurrency {knee.concurrency}: {knee.reason}.", ""]
    keda_points = [p for p in points if getattr(p, "keda", None)]
    if keda_points:
        lines += ["## What the autoscaler would have seen (KEDA queries, end of each window)", "",
                  "| concurrency | queue depth | KV usage (sum) | e2e p99 (s) | TTFT quantile (s) |", "|---:|---:|---:|---:|---:|"]  # fmt: skip
        for p in keda_points:
            k = p.keda
            lines.append(f"| {p.row.concurrency} | {_cell(k['queue_depth'].instant, '.2f')} "
                         f"| {_cell(k['kv_cache_usage'].instant, '.2f')} | {_cell(k['e2e_latency_quantile'].instant, '.2f')} "
                         f"| {_cell(k['ttft_quantile'].instant, '.2f')} |")  # fmt: skip
        queries = keda_points[0].keda
        lines += ["", "Queries:", "", *(f"- `{name}`: `{r.query}`" for name, r in queries.items()), ""]
    if recommendations:
        lines += [f"## Recommended thresholds (p99 SLO {slo_p99:g}s)", "", "```sh", *recommendations, "```", ""]
    return "\n".join(lines)
