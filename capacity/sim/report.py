"""Human output of the simulator: the comparison table and the timeline PNG."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from capacity.sim.simulator import SimResult
from capacity.tables import cell

COLUMNS = (
    ("SLO attained", "slo_attainment", ".1%"),
    ("GPU-h", "gpu_hours", ".2f"),
    ("x oracle", "oracle_ratio", ".2f"),
    ("cost $", "cost_usd", ".2f"),
    ("scale events", "scale_events", ""),
    ("max replicas", "max_replicas_used", ""),
    ("TTFT p95 s", "ttft_p95_s", ".2f"),
    ("TPOT p95 s", "tpot_p95_s", ".3f"),
    ("e2e p99 s", "e2e_p99_s", ".1f"),
    ("failed", "failed_requests", ""),
    ("infeasible", "infeasible_requests", ""),
    ("oracle infeasible intervals", "oracle_infeasible_intervals", ""),
)
CAPTION = (
    "SLO attained: share of feasible requests whose TTFT and TPOT meet slo.ttftP95Seconds and "
    "slo.tpotP95Seconds (a failed request misses). infeasible: requests no fleet serves within the SLO "
    "(refused by vLLM, or missing it alone on an idle replica), left out of attainment and of the oracle. "
    "oracle infeasible intervals: intervals whose feasible requests miss the objective even on the oracle's "
    "replica cap, billed at the cap."
)


def summary_table(rows: Sequence[tuple[str, dict[str, Any]]], title: str) -> Table:
    table = Table(title=title, caption=CAPTION)
    table.add_column("policy", no_wrap=True)
    for header, _, _ in COLUMNS:
        table.add_column(header, justify="right")
    for name, summary in rows:
        table.add_row(name, *(cell(summary.get(key), fmt) for _, key, fmt in COLUMNS))
    return table


def print_table(rows: Sequence[tuple[str, dict[str, Any]]], title: str, console: Console | None = None) -> None:
    console = console or Console()
    if not console.is_terminal:  # piped: do not squeeze the table into 80 columns
        console = Console(width=160)
    console.print(summary_table(rows, title))


def plot_timeline(result: SimResult, path: Path, title: str, slo: dict[str, float | None]) -> Path:
    """Five stacked panels: load, signals / targets, desired and ready replicas, TTFT and
    end-to-end latency, TPOT; each latency against its SLO target (e2e only when one is set)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    tl = result.timeline
    minutes = [t / 60 for t in tl.t]
    fig, axes = plt.subplots(5, 1, figsize=(11, 13), sharex=True)
    axes[0].plot(minutes, tl.arrivals_per_s, color="tab:gray")
    axes[0].set_ylabel("arrivals / s")
    highest = 1.0
    for trigger in result.triggers:
        values, target = tl.signals.get(trigger.name, []), trigger.target
        # Each signal divided by its target: AverageValue ones per ready replica, so 1.0 is the line.
        if trigger.metric_type == "AverageValue":
            ratio = [v / target / max(r, 1) for v, r in zip(values, tl.ready)]
        else:
            ratio = [v / target for v in values]
        axes[1].plot(minutes, ratio, label=trigger.name)
        highest = max([highest, *(r for r in ratio if r == r)])
    axes[1].axhline(1.0, color="black", linestyle="--", linewidth=0.8)
    # A backlog can push a signal to 100x its target; the interesting range is around 1.
    axes[1].set_ylim(0, min(highest * 1.05, 4.0))
    axes[1].set_ylabel("signal / target")
    axes[1].legend(loc="upper right", fontsize=8)
    axes[2].step(minutes, tl.desired, where="post", label="desired")
    axes[2].step(minutes, tl.ready, where="post", label="ready")
    axes[2].set_ylabel("replicas")
    axes[2].yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[2].legend(loc="upper right", fontsize=8)
    axes[3].plot(minutes, tl.ttft_p95_s, label="TTFT p95 (per sync)")
    axes[3].plot(minutes, tl.e2e_p99_s, label="e2e p99 (per sync)")
    axes[3].axhline(slo["ttft_p95_s"], color="tab:blue", linestyle=":", linewidth=0.8)
    if slo.get("e2e_p99_s") is not None:
        axes[3].axhline(slo["e2e_p99_s"], color="tab:orange", linestyle=":", linewidth=0.8)
    axes[3].set_yscale("symlog", linthresh=1.0)
    axes[3].set_ylim(bottom=0)
    axes[3].set_ylabel("seconds")
    axes[3].legend(loc="upper right", fontsize=8)
    axes[4].plot(minutes, tl.tpot_p95_s, color="tab:green", label="TPOT p95 (per sync)")
    axes[4].axhline(slo["tpot_p95_s"], color="tab:green", linestyle=":", linewidth=0.8)
    axes[4].set_ylim(bottom=0)
    axes[4].set_ylabel("seconds per token")
    axes[4].set_xlabel("minutes")
    axes[4].legend(loc="upper right", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
