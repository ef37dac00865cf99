"""Explain a model's thresholds: what each is for, its evidence, what half and double would do.

For every committed threshold of each model (the merged autoscaling policy's scalar leaves and
the engine flags): what it is for, where it is set, the evidence comment above it in the stack
file, and the simulated SLO attainment, cost and GPU-hours with the value halved and doubled (a
boolean flipped) on the traffic the evidence command's plan held out: the last days of a trace
of days (`--holdout-days`), else the rest of the trace after its search fraction. Each part is
scored as `plan` validated it (worst part's attainment, summed cost); the plan's extra
`--validate-trace` traffic is not replayed. A value the
program would refuse shows its one-line reason instead. A retune starts from these facts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from capacity.cli.progress import counted
from capacity.cli.record import made_by, run_record
from capacity.cli.stack_args import add_stack_arguments, stack_file
from capacity.planning import sensitivity
from capacity.planning.days import Part
from capacity.planning.evidence import Evidence, Traffic, evidence, evidence_traffic, for_key, key_of
from capacity.planning.html_report import HtmlFigure, HtmlTable, write_html
from capacity.planning.plan import SEARCH_FRACTION
from capacity.planning.report import SENSITIVITY_CAPTION, plot_sensitivity
from capacity.planning.run import CombinedSummary, validation_options
from capacity.planning.stack import StackModel, load_stack_model
from capacity.tables import cell, keep_numbers_whole
from capacity.tables import console as table_console
from contract.settings.autoscaling import ModelAutoscaling

METRICS = ("slo_attainment", "cost_usd", "gpu_hours")
HEADERS = ("threshold", "value", "set in", "what it is for", "evidence", "half, or flipped", "double")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_stack_arguments(parser)
    parser.add_argument("--model", help="served model name (default: every model of the stack)")
    parser.add_argument(
        "--trace", help="trace to simulate (default: the evidence command's --trace, relative to the project root)"
    )
    parser.add_argument(
        "--rate-scale",
        type=float,
        help="x times the requests over the same duration (default: the evidence command's, else 1)",
    )
    parser.add_argument(
        "--search-fraction",
        type=float,
        help="the trace's first fraction the planner searched on; the rest is simulated "
        f"(default: the evidence command's, else {SEARCH_FRACTION})",
    )
    parser.add_argument(
        "--seed", type=int, help="seed of the simulation's random draws (default: the evidence command's, else 0)"
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="parallel simulations")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--wide", action="store_true", help="also the 'set in' and 'what it is for' columns")
    parser.add_argument(
        "--html",
        type=Path,
        help="self-contained HTML report (every column, the evidence, one chart per model), in an existing "
        "directory (default: out/explain-<stack>[-<model>].html; each chart beside it as <name>[-<model>].png)",
    )


def traffic(args: argparse.Namespace, sm: StackModel, blocks: dict[str, Evidence]) -> Traffic:
    """The flags, else the model's evidence command (see `evidence.evidence_traffic`)."""
    return evidence_traffic(sm, blocks, args.trace, args.rate_scale, args.search_fraction, args.seed)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _metrics(summary: CombinedSummary | None) -> dict[str, Any] | None:
    return None if summary is None else {k: getattr(summary, k) for k in METRICS}


def unchanged_note(policy: ModelAutoscaling, result: sensitivity.Explanation) -> str | None:
    """How many simulated variants give exactly the committed result, and why when the fleet says
    it: pinned at its ceiling, or never scaled off its floor (so a threshold that only decides when
    to scale cannot move it on this traffic)."""
    ran = [o for _, outcomes in result.rows for o in outcomes if o.summary is not None]
    same = [o for o in ran if _metrics(o.summary) == _metrics(result.baseline)]
    if not same:
        return None
    b = result.baseline
    if b.max_replicas_used >= policy.max_replicas:
        why = f"the committed fleet is pinned at its ceiling, maxReplicas {policy.max_replicas}"
    elif b.scale_events == 0:
        why = f"the committed fleet never scaled: {b.max_replicas_used} replicas (minReplicas {policy.min_replicas})"
    else:
        return f"{len(same)} of {len(ran)} simulated variants give exactly the committed result"
    return (
        f"{len(same)} of {len(ran)} simulated variants give exactly the committed result: {why} all along on "
        "this traffic, so a threshold that only decides when to scale changes nothing here"
    )


def payload(
    sm: StackModel,
    used: Traffic,
    held: list[Part],
    result: sensitivity.Explanation,
    blocks: dict[str, Evidence],
) -> dict[str, Any]:
    """One model's explanation as the JSON output contract."""
    cited: dict[str, Evidence] = {}
    rows = []
    for threshold, outcomes in result.rows:
        key = key_of(blocks, for_key(blocks, threshold.set_in) if threshold.set_in else None)
        if key is not None:
            cited[key] = blocks[key]
        rows.append(
            {
                "name": threshold.name,
                "path": threshold.path,
                "value": threshold.value,
                "set_in": threshold.set_in,
                "purpose": threshold.purpose,
                "evidence": key,
                "variants": [
                    {
                        "label": o.variant.label,
                        "value": o.variant.value,
                        "result": _metrics(o.summary),
                        "reason": o.reason,
                    }
                    for o in outcomes
                ],
            }
        )
    notes = [] if result.engine_refusal is None else [f"engine flags not varied: {result.engine_refusal}"]
    if (unchanged := unchanged_note(sm.policy, result)) is not None:
        notes.append(unchanged)
    profiles = {e.profile for e in cited.values() if e.profile}
    if profiles and sm.profile.name not in profiles:
        notes.append(
            f"the evidence names engine profile {', '.join(sorted(profiles))}; the stack simulates {sm.profile.name}"
        )
    return {
        "model": sm.model.name,
        "profile": sm.profile.name,
        "trace": used.spec,
        "rate_scale": used.rate_scale,
        "search_fraction": used.search_fraction,
        "holdout_days": used.holdout_days,
        "seed": used.seed,
        "traffic_from_evidence_of": used.source,
        "held_out": [p.label for p in held],
        "held_out_requests": sum(len(p.scored.arrivals) for p in held),
        "committed": _metrics(result.baseline),
        "thresholds": rows,
        "evidence": {
            k: {"text": e.text, "command": e.command, "date": e.date, "profile": e.profile} for k, e in cited.items()
        },
        "notes": notes,
    }


def run(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if args.html is not None and not args.html.parent.is_dir():
        raise ValueError(f"--html {args.html}: directory {args.html.parent} does not exist")
    first = load_stack_model(stack_file(args), args.model)
    names = [args.model] if args.model else [m.name for m in first.source.settings().models]
    blocks = evidence(first.source.path)
    out = []
    for name in names:
        sm = first if name == first.model.name else load_stack_model(first.source.path, name, source=first.source)
        used = traffic(args, sm, blocks)
        _, held = used.parts()
        options = validation_options(sm, used.seed)  # as `plan` validated the evidence's numbers
        with counted(f"explain {sm.model.name}", not args.json, "simulations") as progress:
            result = sensitivity.explain(sm, held, options, args.workers, progress)
        out.append(payload(sm, used, held, result, blocks))
    # the traffic may come from each model's evidence command, not the flags
    record = run_record(
        args,
        traces=sorted({m["trace"] for m in out}),
        seed=out[0]["seed"] if len({m["seed"] for m in out}) == 1 else [m["seed"] for m in out],
    )
    html = args.html or Path("out") / f"explain-{first.stack}{'-' + args.model if args.model else ''}.html"
    pngs = [html.with_suffix(".png") if len(out) == 1 else html.with_name(f"{html.stem}-{m['model']}.png") for m in out]
    for model, png in zip(out, pngs):
        model["png"] = str(plot_sensitivity(*_chart(model), png, _title(first.stack, model), made_by(record)))
    write_html(html, f"explain {first.stack}", [made_by(record)], *_html_parts(first.stack, out, pngs))
    if args.json:
        json.dump({"stack": first.stack, "models": out, "run": record, "html_report": str(html)}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    out_console = table_console(args.wide)
    for model in out:
        _print(out_console, first.stack, model, args.wide)
    out_console.print(f"{made_by(record)}\nreport: {html}", highlight=False, markup=False)
    return 0


def held_out_words(model: dict[str, Any]) -> str:
    """The parts explained, as the plan labels them ("<trace> day 5 of 5", "<trace> last 30%")."""
    return ", ".join(model["held_out"])


def _title(stack: str, model: dict[str, Any]) -> str:
    return f"explain {stack}/{model['model']} ({model['profile']}): {model['held_out_requests']} held-out requests"


def _chart(model: dict[str, Any]) -> tuple[list[tuple[str, list[tuple[str, float, float]]]], tuple[float, float]]:
    """The sensitivity chart's rows (threshold, [(variant value, attainment, cost)]; NaN: not
    simulated) and the committed (attainment, cost)."""
    nan = float("nan")
    rows = [
        (
            row["name"],
            [
                (
                    _show(v["value"]),
                    *((v["result"]["slo_attainment"], v["result"]["cost_usd"]) if v["result"] else (nan, nan)),
                )
                for v in row["variants"]
            ],
        )
        for row in model["thresholds"]
    ]
    return rows, (model["committed"]["slo_attainment"], model["committed"]["cost_usd"])


def _html_parts(stack: str, out: list[dict[str, Any]], pngs: list[Path]) -> tuple[list[HtmlTable], list[HtmlFigure]]:
    """Every column of each model's table (its notes and evidence in the caption) and its chart."""
    tables, figures = [], []
    for model, png in zip(out, pngs):
        footnotes = {key: i + 1 for i, key in enumerate(model["evidence"])}
        rows = _rows(model, footnotes)
        c = model["committed"]
        cited = [f"[{n}] above {key}: {model['evidence'][key]['text']}" for key, n in footnotes.items()]
        caption = " ".join(
            [
                f"committed: SLO attained {cell(c['slo_attainment'], '.1%')}, ${cell(c['cost_usd'], '.2f')}, "
                f"{cell(c['gpu_hours'], '.2f')} GPU-h held out ({held_out_words(model)}).",
                *model["notes"],
                *cited,
            ]
        )
        tables.append(HtmlTable(_title(stack, model), HEADERS, rows, caption))
        figures.append(HtmlFigure(png, SENSITIVITY_CAPTION))
    return tables, figures


def _rows(model: dict[str, Any], footnotes: dict[str, int]) -> list[list[str]]:
    """Each threshold's cells under HEADERS: the terminal table shows some of them, the report all."""
    engine_note = any(n.startswith("engine flags not varied") for n in model["notes"])
    rows = []
    for row in model["thresholds"]:
        variants = [_variant_cell(v, engine_note) for v in row["variants"]]
        rows.append(
            [
                row["name"],
                _show(row["value"]),
                row["set_in"].removesuffix("." + row["name"]) if row["set_in"] else "built-in default",
                row["purpose"],
                f"[{footnotes[row['evidence']]}]" if row["evidence"] else "-",
                *variants,
                *[""] * (2 - len(variants)),
            ]
        )
    return rows


def _variant_cell(variant: dict[str, Any], engine_note: bool) -> str:
    value = _show(variant["value"])
    if variant["result"] is not None:
        r = variant["result"]
        return f"{value}: {cell(r['slo_attainment'], '.1%')}, ${cell(r['cost_usd'], '.2f')}, {cell(r['gpu_hours'], '.2f')} GPU-h"
    reason = (
        "not varied (see the note below)"
        if engine_note and variant["reason"].startswith("engine profile")
        else variant["reason"]
    )
    return f"{value}: {reason}"


def _print(console: Console, stack: str, model: dict[str, Any], wide: bool = False) -> None:
    c = model["committed"]
    rate = f" x{model['rate_scale']:g} the rate," if model["rate_scale"] != 1.0 else ""
    whose = (
        f"; traffic from the evidence of {model['traffic_from_evidence_of']}"
        if model["traffic_from_evidence_of"]
        else ""
    )
    title = (
        f"explain {stack}/{model['model']} ({model['profile']}): held out {held_out_words(model)},{rate} "
        f"{model['held_out_requests']} requests{whose}\n"
        f"committed: SLO attained {cell(c['slo_attainment'], '.1%')}, ${cell(c['cost_usd'], '.2f')}, "
        f"{cell(c['gpu_hours'], '.2f')} GPU-h"
    )
    footnotes = {key: i + 1 for i, key in enumerate(model["evidence"])}
    table = Table(
        title=title,
        caption="each variant: value: SLO attained (share of feasible requests within TTFT and "
        "TPOT), cost USD, GPU-hours on the held-out traffic; or why it was not simulated"
        + ("" if wide else "; --wide adds where each is set and what it is for"),
    )
    shown = [i for i, h in enumerate(HEADERS) if wide or h not in ("set in", "what it is for")]
    for i in shown:
        table.add_column(HEADERS[i], overflow="fold")
    for cells in _rows(model, footnotes):
        table.add_row(*(Text(cells[i]) for i in shown))
    # the value stays whole, the rest folds
    keep_numbers_whole(table, text_columns=(0, *range(2, len(shown))))
    if wide:  # room for a trigger's key path on one line
        table.columns[0].min_width = min(36, max(len(row["name"]) for row in model["thresholds"]))
    console.print(table)
    for key, number in footnotes.items():
        console.print(
            f"[{number}] above {key}:\n"
            + "\n".join("    " + line for line in model["evidence"][key]["text"].splitlines()),
            highlight=False,
            markup=False,
        )
    for note in model["notes"]:
        console.print(note, style="yellow", highlight=False, markup=False)
