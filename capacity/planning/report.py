"""Human output of the simulator: the comparison table and the timeline PNG."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from capacity.planning.html_report import HtmlTable
from capacity.sim.simulator import SimResult
from capacity.tables import cell, console, keep_numbers_whole

# (header, summary key, format, shown by default): the default columns fit 100 terminal columns,
# `--wide` adds the rest.
COLUMNS = (
    ("SLO %", "slo_attainment", ".1%", True),
    ("GPU-h", "gpu_hours", ".2f", True),
    ("x orc", "oracle_ratio", ".2f", True),
    ("cost $", "cost_usd", ".2f", True),
    ("scale ev", "scale_events", "", True),
    ("max rep", "max_replicas_used", "", True),
    ("TTFT p95 s", "ttft_p95_s", ".2f", True),
    ("TPOT p95 s", "tpot_p95_s", ".3f", True),
    ("hit %", "prefix_cache_hit_rate", ".1%", True),
    ("e2e p99 s", "e2e_p99_s", ".1f", False),
    ("failed", "failed_requests", "", False),
    ("infeasible", "infeasible_requests", "", False),
    ("orc infeasible int", "oracle_infeasible_intervals", "", False),
)
CAPTION = (
    "SLO %: share of feasible requests whose TTFT and TPOT meet slo.ttftP95Seconds and "
    "slo.tpotP95Seconds (a failed request misses). x orc: GPU-h over the oracle's. max rep: most "
    "serving replicas at once (a draining one and its replacement count once). infeasible: requests no "
    "fleet serves within the SLO (refused by vLLM, or missing it alone on an idle replica), left out of "
    "attainment and of the oracle. orc infeasible int: intervals whose feasible requests miss the objective "
    "even on the oracle's replica cap, billed at the cap."
)
HIT_CAPTION = (
    " hit %: prompt tokens found in the replicas' prefix caches over those looked up, fleet-wide "
    "(shown when the trace has block ids)."
)
NARROW_NOTE = " --wide adds e2e p99 s, failed, infeasible and orc infeasible int."


def _has_hits(rows: Sequence[tuple[str, Mapping[str, Any]]]) -> bool:
    return any(summary.get("prefix_cache_hit_rate") is not None for _, summary in rows)


def _columns(wide: bool, hits: bool = False) -> list[tuple[str, str, str]]:
    return [
        (header, key, fmt)
        for header, key, fmt, default in COLUMNS
        if (wide or default) and (hits or key != "prefix_cache_hit_rate")
    ]


def _cells(name: str, summary: Mapping[str, Any], wide: bool = True, hits: bool = False) -> list[str]:
    return [name, *(cell(summary.get(key), fmt) for _, key, fmt in _columns(wide, hits))]


def replica_hits(rows: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """One line per row whose replicas kept a prefix cache: each replica's hit rate."""
    lines = []
    for name, summary in rows:
        replicas = summary.get("prefix_cache_replicas") or ()
        if replicas:
            rates = ", ".join(f"{r['pod']}: {cell(r['hit_rate'], '.0%')}" for r in replicas)
            lines.append(f"{name}: hit % per replica (pod: rate) {rates}")
    return lines


def summary_table(rows: Sequence[tuple[str, Mapping[str, Any]]], title: str, wide: bool = False) -> Table:
    hits = _has_hits(rows)
    table = Table(title=title, caption=CAPTION + (HIT_CAPTION if hits else "") + ("" if wide else NARROW_NOTE))
    table.add_column("policy")
    for header, _, _ in _columns(wide, hits):
        table.add_column(header, justify="right")
    for name, summary in rows:
        table.add_row(*_cells(name, summary, wide, hits))
    return keep_numbers_whole(table)


def summary_html_table(rows: Sequence[tuple[str, Mapping[str, Any]]], title: str) -> HtmlTable:
    """The same table for the HTML report."""
    hits = _has_hits(rows)
    headers = ["policy", *(header for header, _, _ in _columns(True, hits))]
    caption = CAPTION + (HIT_CAPTION if hits else "")
    return HtmlTable(title, headers, [_cells(name, summary, True, hits) for name, summary in rows], caption)


def print_table(
    rows: Sequence[tuple[str, Mapping[str, Any]]], title: str, out: Console | None = None, wide: bool = False
) -> None:
    shown = out or console(wide)
    shown.print(summary_table(rows, title, wide))
    for line in replica_hits(rows):
        shown.print(line)


def _save(
    fig: Any, path: Path, caption: str, footer: str, height_in: float, width: int = 190, fontsize: int = 7
) -> Path:
    """Write `caption` and `footer` (how the run was made) along the figure's bottom, their lines
    wrapped at `width` characters, leave them room (their inches over the figure's `height_in`),
    save the PNG at `path` and close."""
    import matplotlib.pyplot as plt

    text = "\n".join(part for part in (caption, footer) if part)
    lines = [wrapped for line in text.splitlines() for wrapped in textwrap.wrap(line, width)]
    if lines:
        fig.text(0.01, 0.005, "\n".join(lines), fontsize=fontsize, color="#444", va="bottom")
    fig.tight_layout(rect=(0, min(0.3, (0.13 * len(lines) + 0.1) / height_in) if lines else 0, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


COMPARISON_CAPTION = (
    "Left: share of feasible requests meeting the TTFT and TPOT targets, against the objective. "
    "Right: GPU-hours billed over the trace; the oracle's is the least any policy could pay."
)


def plot_comparison(
    rows: Sequence[tuple[str, Mapping[str, Any]]],
    path: Path,
    title: str,
    objective: float,
    oracle_objective: float | None = None,
    footer: str = "",
) -> Path:
    """Each policy's SLO attainment and GPU-hours as bars side by side, one row per policy; the
    SLO's objective drawn, and the oracle's when it was sized for another share; `footer` (how
    the run was made) along the bottom."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for name, _ in rows]
    y = list(range(len(rows)))
    height = 1.6 + 0.45 * len(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, height), sharey=True)
    attained = [s.get("slo_attainment") for _, s in rows]
    judged = [(i, a * 100) for i, a in zip(y, attained) if a is not None]
    bars = left.barh([i for i, _ in judged], [a for _, a in judged], color="tab:blue")
    left.bar_label(bars, fmt="%.1f%%", padding=3, fontsize=8)
    for i, a in zip(y, attained):
        if a is None:  # the oracle sizes intervals; it does not replay requests
            left.text(1, i, "not replayed", va="center", fontsize=8, color="gray")
    left.axvline(objective * 100, color="tab:red", linestyle=":", label=f"SLO objective {objective:.0%}")
    if oracle_objective is not None and oracle_objective != objective:
        left.axvline(
            oracle_objective * 100,
            color="tab:purple",
            linestyle="--",
            label=f"oracle sized for {oracle_objective * 100:g}%",
        )
    left.set_xlim(0, 112)  # room for the labels right of a full bar
    left.set_xlabel("SLO attained (% of feasible requests)")
    left.set_yticks(y, names)
    left.invert_yaxis()
    left.legend(loc="lower left", bbox_to_anchor=(0, 1.0), fontsize=8, frameon=False)
    gpu_hours = right.barh(y, [s.get("gpu_hours") or 0.0 for _, s in rows], color="tab:gray")
    right.bar_label(gpu_hours, fmt="%.2f", padding=3, fontsize=8)
    right.margins(x=0.12)
    right.set_xlabel("GPU-hours")
    for ax in (left, right):
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path, "", footer, height)


SPOT_NOTICE_S = 120.0  # EC2's two-minute spot interruption notice, shaded after each reclaim


def timeline_caption(result: SimResult) -> str:
    """What the timeline's terms mean, for the PNG's footer and the HTML report."""
    t = result.timeline.t
    sync = f"{t[1] - t[0]:g} s" if len(t) > 1 else "one"
    return (
        f"Latency panels: percentiles over the requests that finished within each {sync} HPA sync "
        f"(gaps: none finished). signal / target: each KEDA trigger's value over its threshold "
        f"(AverageValue ones per ready replica); above 1 the HPA scales out. Shaded: Prometheus outages "
        f"(every trigger query fails, KEDA applies its fallback) and spot reclaim notices "
        f"(the pod drains for {SPOT_NOTICE_S:g} s)."
    )


def _shade_events(ax: Any, result: SimResult, label: bool) -> None:
    tl = result.timeline
    for i, (start, end) in enumerate(tl.metrics_outages):
        ax.axvspan(
            start / 60,
            end / 60,
            color="tab:purple",
            alpha=0.15,
            linewidth=0,
            label="Prometheus outage" if label and i == 0 else None,
        )
    for i, t in enumerate(tl.spot_reclaims):
        ax.axvspan(
            t / 60,
            (t + SPOT_NOTICE_S) / 60,
            color="tab:orange",
            alpha=0.25,
            linewidth=0,
            label="spot reclaim notice" if label and i == 0 else None,
        )


def _log_floor(values: Sequence[float], *floors: float | None) -> float:
    positive = [v for v in [*values, *floors] if v is not None and v == v and v > 0]
    return min(positive) / 1.5 if positive else 0.01


def plot_timeline(
    result: SimResult,
    path: Path,
    title: str,
    slo: Mapping[str, float | None],
    footer: str = "",
    bounds: tuple[int, int] | None = None,
) -> Path:
    """Five stacked panels: load, signals / targets, desired and ready replicas (against the
    policy's minReplicas and maxReplicas, `bounds`), TTFT and end-to-end latency, TPOT; each
    latency against its SLO target (e2e only when one is set).
    Legends sit right of the panels, off the curves; outages and spot reclaims are shaded; the
    caption and `footer` (how the run was made) along the bottom."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    tl = result.timeline
    minutes = [t / 60 for t in tl.t]
    fig, axes = plt.subplots(5, 1, figsize=(13, 14), sharex=True)
    axes[0].plot(minutes, tl.arrivals_per_s, color="tab:gray", label="arrivals")
    axes[0].set_ylabel("requests / s")
    axes[0].set_ylim(bottom=0)
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
    axes[1].axhline(1.0, color="black", linestyle="--", linewidth=0.8, label="target (scale out above)")
    # A backlog can push a signal to 100x its target; the interesting range is around 1.
    axes[1].set_ylim(0, min(highest * 1.05, 4.0))
    axes[1].set_ylabel("signal / target")
    # ready under desired: where the fleet has caught up, the two lines coincide and desired stays seen
    axes[2].step(minutes, tl.ready, where="post", label="ready", color="tab:orange", linewidth=2.5)
    axes[2].step(minutes, tl.desired, where="post", label="desired", color="tab:blue", linewidth=1.2)
    top = max([0, *tl.desired, *tl.ready])
    if bounds is not None:
        axes[2].axhline(bounds[0], color="tab:gray", linestyle="--", linewidth=0.8, label=f"minReplicas {bounds[0]}")
        axes[2].axhline(bounds[1], color="tab:red", linestyle=":", linewidth=1.2, label=f"maxReplicas {bounds[1]}")
        top = max(top, bounds[1])
    axes[2].set_ylabel("replicas")
    axes[2].set_ylim(0, top * 1.08 + 1)  # headroom: a line at the top is never drawn on the frame
    axes[2].yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[3].plot(minutes, tl.ttft_p95_s, color="tab:blue", label="TTFT p95")
    axes[3].plot(minutes, tl.e2e_p99_s, color="tab:orange", label="e2e p99")
    axes[3].axhline(slo["ttft_p95_s"], color="tab:blue", linestyle=":", label=f"TTFT SLO {slo['ttft_p95_s']:g} s")
    if slo.get("e2e_p99_s") is not None:
        axes[3].axhline(slo["e2e_p99_s"], color="tab:orange", linestyle=":", label=f"e2e SLO {slo['e2e_p99_s']:g} s")
    # log: a second and a minute both readable; the floor keeps 0 (no tick on a log axis) out
    axes[3].set_yscale("log")
    axes[3].set_ylim(bottom=_log_floor(tl.ttft_p95_s, slo["ttft_p95_s"]))
    axes[3].set_ylabel("seconds (log)")
    axes[4].plot(minutes, tl.tpot_p95_s, color="tab:green", label="TPOT p95")
    axes[4].axhline(slo["tpot_p95_s"], color="tab:green", linestyle=":", label=f"TPOT SLO {slo['tpot_p95_s']:g} s")
    axes[4].set_ylim(bottom=0)
    axes[4].set_ylabel("seconds per output token")
    axes[4].set_xlabel("minutes since the trace's start")
    for i, ax in enumerate(axes):
        _shade_events(ax, result, label=i == 0)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.suptitle(title)
    return _save(fig, path, timeline_caption(result), footer, 14, fontsize=8)


SENSITIVITY_CAPTION = (
    "Each threshold at half (<) and double (>) its value, a boolean flipped (<), on the held-out traffic: "
    "left the SLO attainment, right the cost; the dotted line is the committed policy. A variant the "
    "program refuses, or one not simulated, has no marker (the table says why)."
)


def plot_sensitivity(
    rows: Sequence[tuple[str, Sequence[tuple[str, float, float]]]],
    committed: tuple[float, float],
    path: Path,
    title: str,
    footer: str = "",
) -> Path:
    """One row per threshold: each simulated variant's (label, SLO attainment, cost USD) against the
    committed policy's (attainment, cost), attainment left and cost right, so the thresholds that
    move the result stand out from those that do not."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    y = list(range(len(rows)))
    height = 1.8 + 0.32 * len(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, height), sharey=True)
    shown = [a * 100 for _, variants in rows for _, a, _ in variants if a == a] + [committed[0] * 100]
    low = min(shown) - 1.5  # room for the labels on the left
    near_top = 100 - 0.08 * (100 - low)  # a label right of a point here would run past 100%
    markers = ("<", ">")
    for i, (_, variants) in enumerate(rows):
        for marker, side, (label, attained, cost) in zip(markers, (-1, 1), variants):
            if attained == attained:  # NaN: not simulated
                x = attained * 100
                left.plot(x, i, marker, color="tab:blue", clip_on=False)  # a marker at 100% drawn whole
                # near 100% a right-hand label goes left of its marker, below the other one
                flip = side > 0 and x >= near_top
                left.annotate(
                    label,
                    (x, i),
                    xytext=(-5 if side < 0 or flip else 5, -4 if flip else 0),
                    textcoords="offset points",
                    ha="left" if side > 0 and not flip else "right",
                    va="top" if flip else "center",
                    fontsize=7,
                )
                right.plot(cost, i, marker, color="tab:gray")
    left.axvline(committed[0] * 100, color="black", linestyle=":", linewidth=1, label="committed")
    right.axvline(committed[1], color="black", linestyle=":", linewidth=1)
    left.set_xlim(low, 100)  # attainment is a share: nothing lies above 100%
    left.set_xlabel("SLO attained (% of feasible requests)")
    right.set_xlabel("cost USD on the held-out traffic")
    # a threshold with no variant simulated says so in its own label, where nothing else is drawn
    names = [name if any(a == a for _, a, _ in variants) else f"{name} (not simulated)" for name, variants in rows]
    left.set_yticks(y, names, fontsize=8)
    left.invert_yaxis()
    left.legend(loc="lower left", bbox_to_anchor=(0, 1.0), fontsize=8, frameon=False)
    for ax in (left, right):
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path, SENSITIVITY_CAPTION, footer, height)


DAILY_NEED_CAPTION = (
    "The oracle's replicas per time of day (UTC): the median over the days the window was derived "
    "on. The window (shaded) holds desiredReplicas warm from its start to its end; outside it the "
    "reactive policy scales from minReplicas."
)


def plot_daily_need(
    need: Sequence[float],
    interval_s: float,
    bounds: tuple[int, int],
    window: tuple[float, float, int] | None,
    path: Path,
    title: str,
    footer: str = "",
) -> Path:
    """The daily need as steps against minReplicas and maxReplicas (`bounds`), and the cron
    window (start hour, end hour, desiredReplicas; UTC, an end before the start wraps midnight)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    hours = [i * interval_s / 3600 for i in range(len(need) + 1)]
    fig, ax = plt.subplots(figsize=(12, 4.8))
    ax.stairs(need, hours, color="tab:blue", label="oracle's need (median per time of day)")
    ax.axhline(bounds[0], color="tab:gray", linestyle="--", label=f"minReplicas {bounds[0]}")
    ax.axhline(bounds[1], color="tab:red", linestyle=":", label=f"maxReplicas {bounds[1]}")
    if window is not None:
        start, end, desired = window
        spans = [(start, end)] if start < end else [(start, 24.0), (0.0, end)]
        for i, (a, b) in enumerate(spans):
            ax.axvspan(a, b, color="tab:green", alpha=0.15, linewidth=0, label="cron window" if i == 0 else None)
            ax.hlines(desired, a, b, color="tab:green", label=f"desiredReplicas {desired}" if i == 0 else None)
    ax.set_xlim(0, 24)
    ax.set_xticks(range(0, 25, 2))
    ax.set_xlabel("hour of day (UTC)")
    ax.set_ylabel("replicas")
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path, DAILY_NEED_CAPTION, footer, 4.8, width=170)
