"""Plan capacity: the cheapest GPU type, engine flags and scaling policy that meet the SLO on held-out traffic.

Searches with Optuna's TPE sampler (seeded, pruned day by day, --workers processes on a shared
storage) on the first days of each multi-day trace (else its first 70%), validates the winner on
the last --holdout-days (else the last 30%, and any --validate-trace), and prints the Pareto
frontier (table + PNG), each day and the worst, cost per million output tokens per GPU type, and
the winner's `pulumi config set --path` lines, each validated by the program's settings before
printing. With --join it only runs trials in the study a coordinator created in --storage.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from rich.table import Table

from capacity.cli.progress import counted
from capacity.cli.record import made_by, run_record
from capacity.cli.stack_args import add_stack_arguments, stack_file
from capacity.cli.stack_edit import evidence_check, write_stack
from capacity.planning import band as error_band
from capacity.planning import plan
from capacity.planning.days import HOLDOUT_DAYS, Part, plan_parts, short_name
from capacity.planning.evidence import evidence, for_key
from capacity.planning.guardrails import MAX_REPLICAS_RULE, Guardrails
from capacity.planning.html_report import HtmlFigure, HtmlTable, write_html
from capacity.planning.journal import StorageSpec
from capacity.planning.run import CombinedSummary, RunOptions
from capacity.planning.stack import ConfigEdit, StackModel, apply_config_set, config_command, load_stack_model
from capacity.sim.cluster.router import ROUTERS
from capacity.tables import cell, keep_numbers_whole
from capacity.tables import console as table_console
from capacity.workload import traces
from contract.manifests.scaled_object import scaled_object as scaled_object_manifest

# The in-cluster Prometheus KEDA queries (components/observability/objects.py `prometheus_url`;
# tests/capacity/cli/test_plan_cli.py holds the two equal).
PLATFORM_PROMETHEUS = "http://kps-prometheus.{namespace}.svc:9090"
DEFAULT_TRIALS = 300  # --trials; also what an evidence command without --trials ran


def _price(text: str) -> tuple[str, float]:
    family, sep, usd = text.partition("=")
    try:
        value = float(usd)
    except ValueError:
        value = -1.0
    if not sep or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not FAMILY=USD_PER_GPU_HOUR with a positive price")
    return family, value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_stack_arguments(parser)
    parser.add_argument("--model", help="served model name (default: the stack's first model)")
    parser.add_argument(
        "--trace",
        action="append",
        required=True,
        help=f"trace to plan for (repeatable: meet the target on every one): {traces.SOURCES}",
    )
    parser.add_argument(
        "--validate-trace",
        action="append",
        default=[],
        help="extra traffic the winner is replayed on, never searched; repeatable (default: none)",
    )
    parser.add_argument(
        "--slo-attainment",
        type=float,
        help="target share of requests within the SLO (default: the stack's capacityPlanning.attainmentTarget)",
    )
    parser.add_argument(
        "--holdout-days",
        type=int,
        default=HOLDOUT_DAYS,
        help="a trace of two days or more is searched on its first days and validated on this many last days "
        "(each day one run from a warm fleet; days counted from the trace's first request)",
    )
    parser.add_argument(
        "--search-fraction",
        type=float,
        default=plan.SEARCH_FRACTION,
        help="first fraction of the time of a trace shorter than two days to search on (the rest is held out)",
    )
    parser.add_argument(
        "--rate-scale",
        type=float,
        default=1.0,
        help="replay every trace at this many times its requests, same duration (e.g. to size a smaller stack)",
    )
    parser.add_argument(
        "--margin", type=float, default=1.0, help="search against this many times the request rate (robustness)"
    )
    parser.add_argument("--trials", type=int, default=DEFAULT_TRIALS, help="candidates to evaluate")
    parser.add_argument("--seed", type=int, default=0, help="sampler and simulation seed (same seed, same plan)")
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="processes each running Optuna's study.optimize on the shared storage (1: the search reproducible "
        "from its seed; more: faster, the proposals' order not)",
    )
    parser.add_argument(
        "--price",
        type=_price,
        action="append",
        default=[],
        metavar="FAMILY=USD",
        help="on-demand USD per GPU-hour of an instance family; repeatable (default: the cited price list)",
    )
    parser.add_argument(
        "--gpu",
        action="append",
        default=[],
        help="search only this GPU type (e.g. a10g, l4); repeatable (default: every type the pools allow)",
    )
    parser.add_argument(
        "--seed-policy",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="a policy the search tries first, after the committed one: a file in the autoscaling section's "
        "shape laid over the stack's (as simulate --policy), taken at the nearest point of the search space; "
        "repeatable (default: the committed policy and the reference designs only)",
    )
    parser.add_argument(
        "--search-pools",
        action="store_true",
        default=None,
        help="also search the model's pools' consolidateAfter when other models share them "
        "(default: searched only for pools the model has alone)",
    )
    parser.add_argument(
        "--allow-dropping-guardrails",
        action="store_true",
        help="let candidates turn the kvCache and e2eLatency guardrail triggers off and set them below "
        "what healthy traffic reaches, as the search did before it kept them (default: both on, "
        "thresholds above a full replica's KV and an SLO-meeting request's latency)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--journal",
        type=Path,
        help="keep every evaluated candidate in this file (an Optuna journal); the same command run "
        "again with it skips what is already evaluated, e.g. after Ctrl-C (default: none)",
    )
    where.add_argument(
        "--storage",
        help="keep the studies in this Optuna RDB storage (an SQLAlchemy URL: sqlite:///plan.db for one machine, "
        "postgresql+psycopg://USER@HOST/DB for workers on many); resumes like --journal (default: none)",
    )
    parser.add_argument(
        "--join",
        action="store_true",
        help="run trials in the study a coordinator (the same command without --join) created in --storage or "
        "--journal, until it holds --trials, and exit: no validation, nothing written (--write, --emit, --png, "
        "--html are the coordinator's and ignored here)",
    )
    parser.add_argument(
        "--router",
        choices=ROUTERS,
        help="how the gateway spreads requests, fixed (default: serving.routing searched between least-request and "
        "endpoint-picker when every trace has block ids, else the model's own)",
    )
    parser.add_argument("--oracle-interval", type=float, default=300.0, help="seconds per oracle interval")
    parser.add_argument("--png", type=Path, help="frontier PNG path (default: out/plan-<stack>-<model>.png)")
    parser.add_argument(
        "--html",
        type=Path,
        help="self-contained HTML report (tables, commands, frontier) path, in an existing directory "
        "(default: next to the PNG, <png name>.html)",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the JSON output contract instead of tables")
    out.add_argument(
        "--emit",
        choices=("scaledobject",),
        help="print the winner's KEDA ScaledObject YAML instead of tables, to apply without Pulumi "
        "(default: tables); refused unless the winner meets the target on the held-out traffic",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="write the winner's values and its # Evidence block into the stack file, as `pulumi config set "
        "--path` would, comments kept; refused unless it meets the target on the held-out traffic; warns for "
        "each of traces, rate scale and trials that differs from the evidence block it replaces",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="with --write: replace an evidence block whose plan ran more --trials than this one (refused otherwise)",
    )
    parser.add_argument(
        "--prometheus-url",
        help="the Prometheus the emitted ScaledObject queries (default: the platform's in-cluster one, "
        f"{PLATFORM_PROMETHEUS.format(namespace='<observability.namespace>')})",
    )


def _check(args: argparse.Namespace) -> None:
    if args.slo_attainment is not None and not 0 < args.slo_attainment <= 1:
        raise ValueError(f"--slo-attainment must be in (0, 1], got {args.slo_attainment}")
    if not 0 < args.search_fraction < 1:
        raise ValueError(f"--search-fraction must be in (0, 1), got {args.search_fraction}")
    if args.rate_scale <= 0:
        raise ValueError(f"--rate-scale must be > 0, got {args.rate_scale}")
    if args.margin < 1:
        raise ValueError(f"--margin must be >= 1 (a multiple of the request rate), got {args.margin}")
    if args.trials < 1 or args.workers < 1:
        raise ValueError("--trials and --workers must be >= 1")
    if args.holdout_days < 1:
        raise ValueError(f"--holdout-days must be >= 1, got {args.holdout_days}")
    if args.join and not (args.storage or args.journal):
        raise ValueError("--join needs --storage URL (or --journal FILE): the storage holding the coordinator's study")
    if args.html is not None and not args.html.parent.is_dir():
        raise ValueError(f"--html {args.html}: directory {args.html.parent} does not exist")


def config_set_lines(sm: Any, edits: list[ConfigEdit]) -> list[str]:
    """The edits as commands, in order, after the program's settings accept them all (else ValueError)."""
    apply_config_set(sm, edits)
    return [config_command(edit, sm.stack) for edit in edits]


BAND = 0.05  # the attainment axis shows the target minus this up to 100%: where the decision is


def plot_frontier(
    result: plan.PlanResult,
    front: list[plan.Trial],
    path: Path,
    title: str,
    caption: str = "",
    validation: CombinedSummary | None = None,
) -> Path:
    """Every candidate's cost against attainment on the search traffic, zoomed to the decision band
    (candidates below it drawn on its lower edge), the frontier, the target, the winner (with its
    validation in the legend) and the committed policy; `caption` under the axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    best, committed = result.best, result.committed
    marked = [t.summary.slo_attainment for t in (best, committed) if t is not None and t.summary is not None]
    low = max(0.0, min([result.target - BAND, *(a - 0.01 for a in marked if a >= result.target - 3 * BAND)]))
    fig, ax = plt.subplots(figsize=(9, 6.4))
    below = 0
    for name in result.types:
        ran = [t.summary for t in result.trials if t.summary and t.params["gpu"] == name]
        below += sum(1 for r in ran if r.slo_attainment < low)
        ax.scatter([r.cost_usd for r in ran], [max(r.slo_attainment, low) for r in ran], s=12, alpha=0.5, label=name)
    ran_front = [t.summary for t in front if t.summary is not None]  # the frontier holds only candidates that ran
    ax.step(
        [r.cost_usd for r in ran_front],
        [max(r.slo_attainment, low) for r in ran_front],
        where="post",
        color="black",
        label="Pareto frontier",
    )
    ax.axhline(result.target, color="tab:red", linestyle="--", linewidth=0.8, label=f"target {result.target:.1%}")
    if committed is not None and committed.summary is not None:
        c = committed.summary
        ax.scatter(
            [c.cost_usd],
            [max(c.slo_attainment, low)],
            marker="D",
            s=70,
            facecolors="none",
            edgecolors="black",
            label=f"committed: {c.slo_attainment:.2%}, {c.cost_usd:.2f} USD",
        )
    if best is not None and best.summary is not None:
        w = best.summary
        held = (
            f"; validation {validation.slo_attainment:.2%}, {validation.cost_usd:.2f} USD held out"
            if validation
            else ""
        )
        ax.scatter(
            [w.cost_usd],
            [max(w.slo_attainment, low)],
            marker="*",
            s=260,
            color="gold",
            edgecolors="black",
            zorder=5,
            label=("winner" if w.slo_attainment >= result.target else "closest (misses the target)")
            + f": {w.slo_attainment:.2%}, {w.cost_usd:.2f} USD{held}",
        )
    ax.set_ylim(low, 1.0 + (1.0 - low) * 0.03)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("cost on the search traffic, USD")
    ax.set_ylabel("SLO attainment (search)")
    if below:
        ax.annotate(f"{below} candidate(s) below {low:.0%}, drawn on this edge", (0.01, 0.01), xycoords="axes fraction")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    if caption:
        fig.text(0.01, 0.01, caption, fontsize=7, color="#444", wrap=True, parse_math=False)
    fig.tight_layout(rect=(0, 0.06 if caption else 0, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plan_record(args: argparse.Namespace) -> dict[str, Any]:
    """How this plan was made: the command line, its traffic (searched and validation), seed and date."""
    return run_record(args, validate_traces=list(args.validate_trace))


def _caption(record: dict[str, Any]) -> str:
    return f"{record['command']}\nseed {record['seed']}, {record['date']}"


def refused_candidates(result: plan.PlanResult) -> list[dict[str, Any]]:
    """The candidates that would not deploy or start, by reason, most frequent first."""
    counts = Counter(t.refused for t in result.trials if t.refused)
    return [{"reason": reason, "candidates": n} for reason, n in counts.most_common()]


def _committed(
    sm: StackModel,
    result: plan.PlanResult,
    winner_validation: CombinedSummary | None,
    held: list[Part],
    options: RunOptions,
) -> dict[str, Any] | None:
    """The stack's own policy beside the winner: its numbers on the search traffic and on the
    held-out traffic, or why it did not run; None when its GPU type was not searched."""
    committed = result.committed
    if committed is None:
        return None
    broken = list(committed.params.get(plan.RULES_BROKEN, []))
    if committed.summary is None:
        return {
            "gpu": committed.params["gpu"],
            "search": None,
            "validation": None,
            "refused": committed.refused,
            "rules_broken": broken,
        }
    same = committed is result.best and winner_validation is not None
    validation = winner_validation if same else plan.validate(sm, committed, result.types, held, options)
    return {
        "gpu": committed.params["gpu"],
        "search": committed.summary.as_dict() if committed.summary else None,
        "validation": validation.as_dict() if validation else None,
        "refused": None,
        "rules_broken": broken,
    }


def _rules(rules: Guardrails) -> dict[str, Any]:
    """The planner's rules for this search, as `--json` prints them (`capacity.planning.guardrails`)."""
    return {
        "guardrails_kept": rules.kept,
        "max_replicas": rules.max_replicas,
        "max_replicas_rule": MAX_REPLICAS_RULE,
        "e2e_bound_s": rules.e2e_bound_s,
        "tokens_in_flight": rules.tokens_in_flight,
    }


def _scaled(trace: traces.Trace, args: argparse.Namespace) -> traces.Trace:
    return traces.rate_scale(trace, args.rate_scale, seed=args.seed)


def run(args: argparse.Namespace) -> int:
    _check(args)
    sm = load_stack_model(stack_file(args), args.model)
    if args.write:
        _check_evidence(sm, args)
    seed_policies = [
        (path.name, load_stack_model(sm.source.path, sm.model.name, policy_file=path, source=sm.source))
        for path in args.seed_policy
    ]
    if args.slo_attainment is None:
        args.slo_attainment = sm.attainment_target
    loaded = [_scaled(traces.load(t), args) for t in args.trace]
    splits = [plan_parts(t, args.holdout_days, args.search_fraction) for t in loaded]
    searched = plan.with_margin([p for s, _ in splits for p in s], args.margin, args.seed)
    # A multi-day trace's last days held out, a shorter one's rest after the cut; an extra
    # validation trace whole.
    extra = [_scaled(traces.load(t), args) for t in args.validate_trace]
    held = [p for _, h in splits for p in h] + [Part(short_name(t), t) for t in extra]
    empty = [p.label for p in [*searched, *held] if len(p.scored) == 0]
    if empty:
        raise ValueError(
            f"{empty[0]}: a search or validation part of a trace has no requests: lengthen the trace or move "
            "--search-fraction"
        )
    # The oracle sizes for the same attainment target as the search, so their ratio is the price
    # of reacting, not of a weaker bar.
    options = RunOptions(
        router=args.router, seed=args.seed, oracle_interval_s=args.oracle_interval, oracle_objective=args.slo_attainment
    )
    known = all(p.trace.block_ids is not None for p in searched)  # every trace knows its prefixes
    storage = (
        StorageSpec(journal=args.journal) if args.journal else StorageSpec(url=args.storage) if args.storage else None
    )
    with counted(f"plan {sm.stack}/{sm.model.name}", not args.json, "candidates") as count:
        progress = (lambda done: count(done, args.trials)) if count else None
        result = plan.search(
            sm,
            searched,
            args.slo_attainment,
            args.trials,
            args.seed,
            args.workers,
            options,
            dict(args.price),
            progress,
            args.gpu,
            args.search_pools,
            storage,
            keep_guardrails=not args.allow_dropping_guardrails,
            search_routing=args.router is None and known,
            # LMCache needs an image that ships it (settings refuse it on the stock vLLM image)
            search_lmcache=known and plan.lmcache_deploys(sm),
            join=args.join,
            # On an RDB storage other machines join: they may start once the studies exist.
            ready=(lambda where: print(_ready_line(sm, where, args.trials), file=sys.stderr))
            if args.storage and not args.join
            else None,
            seed_policies=seed_policies,
        )
    if args.join:
        print(
            f"plan {sm.stack}/{sm.model.name}: joined the study in {storage.flag if storage else ''}; it holds its "
            f"{args.trials} finished trials, the coordinator validates and writes the winner"
        )
        return 0
    front = plan.frontier(result.trials)
    best = result.best
    meets = best is not None and plan.meets(best, args.slo_attainment)
    validation = plan.validate(sm, best, result.types, held, options) if best else None
    static = (
        plan.static_fleets(
            sm, best, result.types, searched, held, args.slo_attainment, options, validation.oracle_gpu_hours or 0.0
        )
        if meets and best is not None and validation is not None
        else None
    )
    within = error_band.band(sm, result, searched, options, args.workers)
    payload: dict[str, Any] = {
        "gpu": best.params["gpu"] if best else None,
        "search": best.summary.as_dict() if best else None,  # type: ignore[union-attr]  # a winner exists on this path: best is set and ran
        "validation": validation.as_dict() if validation else None,
        "committed": _committed(sm, result, validation, held, options),
        "static": {"ahead": static[0].as_dict(), "hindsight": static[1].as_dict()} if static else None,
        "frontier": [{"gpu": t.params["gpu"], **t.summary.as_dict(), "params": dict(t.params)} for t in front],  # type: ignore[union-attr]  # a winner exists on this path: best is set and ran
        "gpu_types": [row.as_dict() for row in plan.per_gpu_type(result)],
        "config_set": [],
        "binding_limit": None,
        "rules": _rules(result.rules),
        "target": args.slo_attainment,
        "trials": len(result.trials) + result.pruned,
        "pruned_trials": result.pruned,
        "refused_trials": sum(1 for t in result.trials if t.refused),
        "refused": refused_candidates(result),
        "validation_meets_target": None if validation is None else validation.slo_attainment >= args.slo_attainment,
        "band": within.as_dict() if within else None,
        "run": plan_record(args),
        "written": None,  # the stack file --write wrote the winner into
        "resumed_trials": result.resumed,
        "notes": [],
    }
    if static:
        payload["notes"] += plan.static_notes(payload["static"], payload["validation"], args.slo_attainment)
    if within:
        payload["notes"].append(band_note(payload["band"], within.trust.basis, args.slo_attainment))
    unservable = plan.unservable_note(sm, best, args.slo_attainment) if best else None
    if unservable:
        payload["notes"].append(unservable)
    if result.resumed:
        payload["notes"].append(
            f"resumed {result.resumed} of {payload['trials']} candidates from {storage.flag if storage else ''} "
            "(evaluated earlier on the same inputs)"
        )
    if result.pruned:
        payload["notes"].append(
            f"the pruner stopped {result.pruned} of {payload['trials']} candidates after their first days "
            "(Optuna's successive halving on the cost so far, a missed day priced at the pools' ceiling fleet)"
        )
    if meets and best is result.committed:
        payload["config_set"] = config_set_lines(sm, list(best.candidate.edits))  # type: ignore[union-attr]  # a winner exists on this path: best is set and ran
        payload["notes"].append(
            "the committed policy is the cheapest candidate meeting the target: "
            + ("nothing to change" if not payload["config_set"] else "only its engine profile moves")
        )
    elif meets:
        payload["config_set"] = config_set_lines(sm, list(best.candidate.edits))  # type: ignore[union-attr]  # a winner exists on this path: best is set and ran
        planned = plan.deploy(sm, best.candidate, result.types)  # type: ignore[union-attr]  # a winner exists on this path: best is set and ran
        payload["notes"].append(result.rules.describe(planned.policy, planned.profile, best.summary.max_replicas_used))  # type: ignore[union-attr]  # a winner exists on this path: best is set and ran
        payload["notes"] += plan.deployment_notes(sm, best.params)  # type: ignore[union-attr]  # a winner exists on this path: best is set and ran
    if meets:
        if validation.slo_attainment < args.slo_attainment:  # type: ignore[union-attr]  # a winner exists on this path: best is set and ran
            payload["notes"].append(
                f"warning: validation attainment {validation.slo_attainment:.1%} is below the target "  # type: ignore[union-attr]  # a winner exists on this path: best is set and ran
                f"{args.slo_attainment:.1%} on traffic the search never saw; consider --margin 1.2"
            )
    else:
        payload["binding_limit"] = plan.binding_limit(sm, result, [p.trace for p in searched], options)
    planned = plan.deploy(sm, best.candidate, result.types) if meets and best is not None else None
    worth = plan.cache_value(planned, validation, held, options) if planned is not None and validation else None
    payload["prefix_cache"] = worth
    if worth is not None:
        payload["notes"].append(plan.cache_note(worth))
    name = f"plan {sm.stack}/{sm.model.name}"
    png = args.png or Path("out") / f"plan-{sm.stack}-{sm.model.name}.png"
    payload["frontier_png"] = str(plot_frontier(result, front, png, name, _caption(payload["run"]), validation))
    payload["html_report"] = str(_write_html(payload, name, args.slo_attainment, args.html or png.with_suffix(".html")))
    refusal = deploy_refusal(payload)
    if args.write and refusal is None and planned is not None:
        block = evidence_block(payload, planned.profile.name)
        write_stack(sm.source.path, list(best.candidate.edits), f"autoscaling.{sm.model.name}", block)  # type: ignore[union-attr]  # planned: a winner exists
        payload["written"] = str(sm.source.path)
    if args.emit == "scaledobject":
        if refusal is not None or planned is None:
            raise ValueError(f"--emit scaledobject: {refusal}; nothing emitted")
        print(emitted_scaled_object(payload, planned, args.prometheus_url), end="")
        return 0
    if args.json:
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print(payload, name, args.slo_attainment)
    if args.write and payload["written"] is None:
        print(f"{name}: --write: {refusal}; {sm.source.path} is unchanged", file=sys.stderr)
        return 1
    return 0


def _check_evidence(sm: StackModel, args: argparse.Namespace) -> None:
    """Before any search: one warning line per difference from the evidence block --write would
    replace, and a refusal (unless --force) when this plan searches less than that one did."""
    key = f"autoscaling.{sm.model.name}"
    new = {
        "--trace": list(args.trace),
        "--validate-trace": list(args.validate_trace),
        "--rate-scale": [f"{args.rate_scale:g}"],
        "--trials": [str(args.trials)],
    }
    defaults = {"--rate-scale": "1", "--trials": str(DEFAULT_TRIALS)}
    lines, weaker = evidence_check(for_key(evidence(sm.source.path), key), new, defaults)
    for line in lines:
        print(f"plan {sm.stack}/{sm.model.name}: --write: {line}", file=sys.stderr)
    if weaker and not args.force:
        raise ValueError(f"--write: {weaker} ({key} in {sm.source.path}); pass --force to replace it")


def _ready_line(sm: StackModel, where: str, trials: int) -> str:
    """What the coordinator says once its studies exist: workers elsewhere may join from now on."""
    return (
        f"plan {sm.stack}/{sm.model.name}: studies ready in {where} ({trials} trials); workers may join "
        "with the same arguments and --join"
    )


def deploy_refusal(payload: dict[str, Any]) -> str | None:
    """Why the winner must not be written or emitted (None: it meets the target searched and held out)."""
    if payload["binding_limit"] is not None or payload["search"] is None:
        return "no candidate meets the target"
    if payload["validation_meets_target"] is False:
        return (
            f"the winner attains {payload['validation']['slo_attainment']:.2%} on the held-out traffic, below the "
            f"target {payload['target']:.2%}"
        )
    return None


def evidence_command(payload: dict[str, Any]) -> str:
    """The plan's command line as its evidence names it: without the flags that only say where its
    output goes (a re-run re-plans, it does not re-write)."""
    words, kept = shlex.split(payload["run"]["command"]), []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in ("--write", "--json"):
            continue
        elif word in ("--emit", "--png", "--html", "--prometheus-url", "--journal", "--storage"):
            skip = True
        elif not word.startswith(("--emit=", "--png=", "--html=", "--prometheus-url=", "--journal=", "--storage=")):
            kept.append(word)
    return shlex.join(kept)


def evidence_block(payload: dict[str, Any], profile: str) -> list[str]:
    """The `# Evidence` comment of a written plan: date and profile, command, validation numbers
    (together, then per held-out day and the worst one when there are several) and search
    numbers, the rules its winner follows (the format tests/test_evidence.py and `explain` read)."""
    v, s = payload["validation"], payload["search"]
    numbers = (
        f"validation ({', '.join(d['label'] for d in v['days'])}, never searched): attainment "
        f"{v['slo_attainment']:.2%}, {v['gpu_hours']:.2f} GPU-h ({v['oracle_ratio']}x the oracle's "
        f"{v['oracle_gpu_hours']}), ${v['cost_usd']:.2f};{per_day_words(v)} search "
        f"({', '.join(d['label'] for d in s['days'])}): {s['slo_attainment']:.2%}, {s['gpu_hours']:.2f} GPU-h, "
        f"${s['cost_usd']:.2f}. Target: {payload['target']:.2%}.{static_words(payload)} Written by plan --write."
    )
    rules = [n for n in payload["notes"] if n.startswith("maxReplicas ")]
    head = f"Evidence: planned {payload['run']['date'][:10]} on engine profile {profile}"
    return [head, evidence_command(payload), *textwrap.wrap(" ".join([numbers, *rules]), 100)]


def static_words(payload: dict[str, Any]) -> str:
    """The evidence's sentence on the static fleet the winner must not lose to ("" when none ran)."""
    static = payload.get("static")
    if not static:
        return ""
    ahead, hindsight = static["ahead"], static["hindsight"]
    planned = (
        f"{ahead['replicas']} replicas (the fewest meeting it searched) attain "
        f"{ahead['validation']['slo_attainment']:.2%} at ${ahead['validation']['cost_usd']:.2f} held out"
        if ahead["replicas"]
        else f"none within the pools' {ahead['pools_replicas']} replicas meets it searched"
    )
    known = (
        f"{hindsight['replicas']} at ${hindsight['validation']['cost_usd']:.2f}"
        if hindsight["replicas"]
        else "none within the pools"
    )
    return f" Static fleet planned ahead: {planned}; in hindsight {known}."


def per_day_words(summary: dict[str, Any]) -> str:
    """Each part of a summary of several, then its worst day and its costliest, in words ("" for one part)."""
    days = summary["days"]
    if len(days) < 2:
        return ""
    each = "; ".join(f"{d['label']} {d['slo_attainment']:.2%} ${d['cost_usd']:.2f}" for d in days)
    worst, costliest = summary["worst_day"], summary["costliest_day"]
    return (
        f" per day: {each}; worst day {worst['label']} {worst['slo_attainment']:.2%} ${worst['cost_usd']:.2f}, "
        f"costliest {costliest['label']} ${costliest['cost_usd']:.2f};"
    )


def emitted_scaled_object(payload: dict[str, Any], planned: StackModel, prometheus_url: str | None) -> str:
    """The winner's ScaledObject as the platform would deploy it (contract/manifests), as YAML."""
    namespace = planned.source.settings(planned.raw_autoscaling).observability.namespace
    url = prometheus_url or PLATFORM_PROMETHEUS.format(namespace=namespace)
    manifest = scaled_object_manifest(planned.monitored, url)
    v = payload["validation"]
    head = (
        f"# {planned.stack}/{planned.model.name}: the plan's winner, validation {v['slo_attainment']:.2%} at "
        f"${v['cost_usd']:.2f} held out (target {payload['target']:.2%})\n# {record_line(payload)}\n"
    )
    return head + yaml.safe_dump(manifest, sort_keys=False)


FRONTIER_HEADERS = (
    "GPU",
    "steps x",  # the step-time scale the candidate ran at: 1 nominal, above the pessimistic bound
    "SLO attained",
    "GPU-h",
    "cost $",
    "$/M output tokens",
    "min",
    "max",
    "queue target",
)
GPU_HEADERS = (
    "GPU",
    "instance",  # the size a replica lands on, which the prices are of
    "trust",  # of the GPU's engine profile: measured, validated (published data) or extrapolated
    "$/GPU-h on-demand",
    "$/GPU-h spot (est.)",
    "trials",
    "meets",
    "SLO attained",
    "GPU-h",
    "$/M output tokens",
)
GPU_TITLE = "which GPU: each type's cheapest candidate meeting the target (else its closest)"


def _frontier_rows(payload: dict[str, Any]) -> list[list[str]]:
    return [
        [
            row["gpu"],
            cell(row["step_time_scale"], "g"),
            cell(row["slo_attainment"], ".1%"),
            cell(row["gpu_hours"], ".2f"),
            cell(row["cost_usd"], ".2f"),
            cell(row["usd_per_million_output_tokens"], ".2f"),
            str(row["params"]["minReplicas"]),
            str(row["params"]["maxReplicas"]),
            str(row["params"]["queueTarget"]),
        ]
        for row in payload["frontier"]
    ]


def _gpu_rows(payload: dict[str, Any]) -> list[list[str]]:
    return [
        [
            row["gpu"],
            row["instance_size"],
            row["trust"] or "-",
            cell(row["on_demand_usd_per_gpu_hour"], ".3f"),
            cell(row["spot_usd_per_gpu_hour"], ".3f"),
            str(row["trials"]),
            "yes" if row["meets_target"] else "no",
            cell(row.get("slo_attainment"), ".1%"),
            cell(row.get("gpu_hours"), ".2f"),
            cell(row.get("usd_per_million_output_tokens"), ".2f"),
        ]
        for row in payload["gpu_types"]
    ]


RANKED_CAPTION = (
    "steps x: the engine's step times over its profile's derived ones in the runs that ranked a candidate: "
    "1 the nominal figure; above 1 the pessimistic bound of an extrapolated profile (1 + its saturated error)."
)


def ranked_caption(payload: dict[str, Any]) -> str:
    """Which figure ranked each GPU type's candidates (the table has no column to spare for it)."""
    bound = [r for r in payload["gpu_types"] if r["ranked_step_time_scale"] != 1]
    if not bound:
        return "Ranked by the nominal figure: no GPU type's profile is extrapolated."
    named = ", ".join(f"{r['gpu']} ({r['trust']}: step times x{r['ranked_step_time_scale']:g})" for r in bound)
    return f"Ranked by the pessimistic bound: {named}; the others by the nominal figure."


BAND_HEADERS = (
    "edge",
    "steps x",
    "SLO attained",
    "meets target",
    "cost $",
    "challenger",
    "its steps x",
    "its SLO",
    "its cost $",
    "choice flips",
)
BAND_TITLE = "the winner within its profile's error band (search traffic, same seed)"
BAND_CAPTION = (
    "Each edge re-simulates the winner with every engine step (1 - e) x (fast) or (1 + e) x (slow) its derived "
    "time, e its profile's saturated error. The challenger, at its own profile's edge: at the fast edge the "
    "cheaper candidate closest to the target, at the slow edge the runner-up; the choice flips when the "
    "planner's rule picks it over the winner there."
)


def _band_rows(payload: dict[str, Any]) -> list[list[str]]:
    band = payload["band"]
    if not band:
        return []
    rows = [
        [
            "ranked",
            cell(band["ranked_step_time_scale"], "g"),
            cell(band["ranked_slo_attainment"], ".1%"),
            "yes" if band["ranked_meets_target"] else "no",
            cell(payload["search"]["cost_usd"], ".2f"),
            *[""] * 5,
        ]
    ]
    for edge in band["edges"]:
        other = edge["challenger"] or {}
        rows.append(
            [
                edge["edge"],
                cell(edge["step_time_scale"], "g"),
                cell(edge["slo_attainment"], ".1%"),
                "yes" if edge["meets_target"] else "no",
                cell(edge["cost_usd"], ".2f"),
                other.get("gpu", "-"),
                cell(other.get("step_time_scale"), "g"),
                cell(other.get("slo_attainment"), ".1%"),
                cell(other.get("cost_usd"), ".2f"),
                "yes" if edge["choice_flips"] else "no",
            ]
        )
    return rows


def band_table(payload: dict[str, Any]) -> Table | None:
    """The band's table as `plan` prints it (None: no winner, so no band)."""
    rows = _band_rows(payload)
    return _table(BAND_TITLE, BAND_HEADERS, rows, text=(0, 5), caption=BAND_CAPTION) if rows else None


def band_note(band: dict[str, Any], basis: str, target: float) -> str:
    """One line: the winner's attainment across its error band, whether the target and the choice
    hold there; a warning when either flips."""
    fast, slow = band["edges"]
    lines = [
        f"error band: with step times x{fast['step_time_scale']:g}..x{slow['step_time_scale']:g} (its "
        f"{band['trust']} profile's {band['regime']} error {band['error']:.1%}: {basis}) the winner attains "
        f"{slow['slo_attainment']:.1%}..{fast['slo_attainment']:.1%} on the search traffic"
    ]
    failed = [e["edge"] for e in band["edges"] if not e["meets_target"]]
    lines.append(
        f"the target {target:.1%} is missed at the {' and '.join(failed)} edge" if failed else "the target holds"
    )
    flips = [e for e in band["edges"] if e["choice_flips"]]
    lines += [
        f"the choice flips at the {e['edge']} edge to a {e['challenger']['gpu']} candidate "
        f"({e['challenger']['slo_attainment']:.1%} at ${e['challenger']['cost_usd']:.2f})"
        for e in flips
    ] or ["the choice holds at both edges"]
    warn = "warning: " if failed or flips else ""
    return warn + "; ".join(lines)


DAY_HEADERS = ("policy", "traffic", "day", "SLO attained", "GPU-h", "cost $", "x oracle", "worst")
DAY_TITLE = "per day (or part of a trace): the winner searched and held out, the committed policy held out"
DAY_CAPTION = (
    "Each day is one run from a warm fleet (the oracle's first interval); a trace shorter than two days is "
    "split in time instead. worst: the day of lowest attainment (attainment) and the costliest (cost)."
)


def _day_rows(payload: dict[str, Any]) -> list[list[str]]:
    """One row per day of the winner's search and validation, and of the committed policy's validation."""
    committed = payload["committed"] or {}
    shown = [("winner", "search", payload["search"]), ("winner", "held out", payload["validation"])]
    shown.append(("committed (stack)", "held out", committed.get("validation")))
    rows = []
    for policy, traffic, summary in shown:
        if not summary:
            continue
        worst, costliest = summary["worst_day"], summary["costliest_day"]
        for day in summary["days"]:
            marks = [
                m for m, d in (("attainment", worst), ("cost", costliest)) if d == day and len(summary["days"]) > 1
            ]
            rows.append(
                [
                    policy,
                    traffic,
                    day["label"],
                    cell(day["slo_attainment"], ".2%"),
                    cell(day["gpu_hours"], ".2f"),
                    cell(day["cost_usd"], ".2f"),
                    cell(day.get("oracle_ratio"), ".2f"),
                    ", ".join(marks),
                ]
            )
    return rows


WINNER_HEADERS = (
    "policy",
    "GPU",
    "SLO attained (search)",
    "cost $ (search)",
    "SLO attained (held out)",
    "cost $ (held out)",
    "GPU-h (held out)",
    "x oracle",
)
WINNER_TITLE = (
    "the winner beside the committed policy (the first candidate of its GPU type's study) and static fleets: the "
    "fewest replicas meeting the target on the searched traffic (ahead) and on the held-out one (hindsight)"
)


def _winner_rows(payload: dict[str, Any]) -> list[list[str]]:
    """The winner's row, then the committed policy's (its numbers, or why it did not run)."""
    rows = []
    if payload["search"]:
        rows.append(_outcome_row("winner", payload["gpu"], payload["search"], payload["validation"]))
    committed = payload["committed"]
    if committed and committed["refused"]:
        rows.append(["committed (stack)", committed["gpu"], f"refused: {committed['refused']}", *[""] * 5])
    elif committed:
        rows.append(_outcome_row("committed (stack)", committed["gpu"], committed["search"], committed["validation"]))
    static = payload.get("static") or {}
    for fleet, when in ((static.get("ahead"), "ahead"), (static.get("hindsight"), "hindsight")):
        if fleet:
            held = fleet["validation"]
            count = fleet["replicas"] or f"{fleet['pools_replicas']}, misses"
            rows.append(
                [
                    f"static {count} ({when})",
                    payload["gpu"],
                    "-",
                    "-",
                    cell(held["slo_attainment"], ".1%"),
                    cell(held["cost_usd"], ".2f"),
                    cell(held["gpu_hours"], ".2f"),
                    cell(held["oracle_ratio"], ".2f"),
                ]
            )
    return rows


def _outcome_row(label: str, gpu: str, search: dict[str, Any], held: dict[str, Any]) -> list[str]:
    return [
        label,
        gpu,
        cell(search["slo_attainment"], ".1%"),
        cell(search["cost_usd"], ".2f"),
        cell(held["slo_attainment"], ".1%"),
        cell(held["cost_usd"], ".2f"),
        cell(held["gpu_hours"], ".2f"),
        cell(held["oracle_ratio"], ".2f"),
    ]


def _verdict(payload: dict[str, Any]) -> list[str]:
    """The winner (search and validation) or the binding limit, then the notes."""
    search, validation = payload["search"], payload["validation"]
    lines = []
    if search and validation:
        lines.append(
            f"winner: search {search['slo_attainment']:.1%} at ${search['cost_usd']:.2f} ({search['gpu_hours']:.2f} GPU-h); "
            f"validation {validation['slo_attainment']:.1%} at ${validation['cost_usd']:.2f} ({validation['gpu_hours']:.2f} GPU-h, "
            f"{validation['oracle_ratio']}x the oracle)"
        )
    committed = payload["committed"]
    if committed and committed["rules_broken"]:
        lines.append(
            "the committed policy breaks the planner's rules (so it cannot win): "
            + "; ".join(committed["rules_broken"])
        )
    if payload["binding_limit"]:
        lines.append(f"no candidate meets the target; binding limit: {payload['binding_limit']}")
    return lines + payload["notes"] + refused_lines(payload)


def refused_lines(payload: dict[str, Any]) -> list[str]:
    """The refused candidates by reason (they would not deploy or start, so they have no numbers)."""
    if not payload["refused"]:
        return []
    head = f"refused: {payload['refused_trials']} of {payload['trials']} candidates would not deploy or start:"
    return [head, *(f"  {r['candidates']} x {r['reason']}" for r in payload["refused"])]


def withheld_warning(payload: dict[str, Any]) -> str | None:
    """Why the printed commands must not be applied as they are: the winner missed the target on
    traffic the search never saw (None: validation met it, or there are no commands)."""
    if not payload["config_set"] or payload["validation_meets_target"] is not False:
        return None
    return (
        f"DO NOT APPLY: the winner attains {payload['validation']['slo_attainment']:.2%} on the held-out traffic, "
        f"below the target {payload['target']:.2%}; the lines below are commented out. Re-plan (more --trials, "
        "--margin 1.2, or more traffic) before deploying them"
    )


def shown_commands(payload: dict[str, Any]) -> list[str]:
    """The commands as the text and HTML outputs show them: commented out under a failed validation."""
    if withheld_warning(payload):
        return ["# " + line for line in payload["config_set"]]
    return list(payload["config_set"])


def record_line(payload: dict[str, Any]) -> str:
    return made_by(payload["run"])


def _write_html(payload: dict[str, Any], title: str, target: float, path: Path) -> Path:
    tables = [
        HtmlTable(WINNER_TITLE, WINNER_HEADERS, _winner_rows(payload)),
        HtmlTable(DAY_TITLE, DAY_HEADERS, _day_rows(payload), DAY_CAPTION),
    ]
    if payload["band"]:
        tables.append(HtmlTable(BAND_TITLE, BAND_HEADERS, _band_rows(payload), BAND_CAPTION))
    tables += [
        HtmlTable(
            f"Pareto frontier (search traffic), target {target:.1%}",
            FRONTIER_HEADERS,
            _frontier_rows(payload),
            RANKED_CAPTION,
        ),
        HtmlTable(GPU_TITLE, GPU_HEADERS, _gpu_rows(payload), ranked_caption(payload)),
    ]
    figure = HtmlFigure(
        Path(payload["frontier_png"]),
        "Each dot a candidate on the search traffic; the line the cheapest attainment reachable at each cost; "
        "the star the winner (its validation in the legend), the diamond the committed policy. " + record_line(payload),
    )
    return write_html(
        path,
        title,
        [record_line(payload), *_verdict(payload)],
        tables,
        [figure],
        shown_commands(payload),
        withheld_warning(payload),
    )


def _table(
    title: str, headers: tuple[str, ...], rows: list[list[str]], text: tuple[int, ...] = (0,), caption: str = ""
) -> Table:
    table = Table(title=title, caption=caption or None)
    for header in headers:
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(*row)
    return keep_numbers_whole(table, text)


def _print(payload: dict[str, Any], title: str, target: float) -> None:
    console = table_console()
    console.print(
        _table(
            f"{title}: Pareto frontier (search traffic), target {target:.1%}",
            FRONTIER_HEADERS,
            _frontier_rows(payload),
            caption=RANKED_CAPTION,
        )
    )
    console.print(_table(GPU_TITLE, GPU_HEADERS, _gpu_rows(payload), caption=ranked_caption(payload)))
    if rows := _winner_rows(payload):
        console.print(_table(WINNER_TITLE, WINNER_HEADERS, rows, text=(0, 1, 2)))
    if rows := _day_rows(payload):
        console.print(_table(DAY_TITLE, DAY_HEADERS, rows, text=(0, 1, 2, 7), caption=DAY_CAPTION))
    if table := band_table(payload):
        console.print(table)
    for line in _verdict(payload):
        style = "yellow" if line.startswith("no candidate") else None
        console.print(line, style=style, highlight=False)
    if warning := withheld_warning(payload):
        console.print(warning, style="bold red", highlight=False)
    for line in shown_commands(payload):
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    console.print(record_line(payload), highlight=False, markup=False)
    if payload["written"]:
        console.print(f"wrote the winner's values and its # Evidence block to {payload['written']}", highlight=False)
    console.print(f"frontier: {payload['frontier_png']}\nreport: {payload['html_report']}")
