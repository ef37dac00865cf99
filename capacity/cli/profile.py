"""Turn a sweep of one replica into a measured engine profile a stack's `capacityProfile` can name.

`--from-sweep` reads what `sweep` and `lab` write (DIR/envelope.csv and DIR/points.json) or a
CSV with the calibration sweep's columns (../shared/calibration/). The fit keeps the engine's
structure (capacity/engine/sweep_fit.py) and fits only what one sweep identifies: the achieved
bandwidth and GEMM fractions and the CPU time per engine step of this replica; it reports the
error in sample and with each concurrency held out, and writes data/measured/<name>.yaml,
marked measured, with its held-out error per regime.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.table import Table

from capacity.cli.progress import counted
from capacity.cli.stack_args import STACK_HELP, add_profiles_dir_argument
from capacity.engine import measured
from capacity.engine.fit import Point, SweepRow, summary
from capacity.engine.hardware import Checkpoint, Gpu, checkpoint, checkpoints, gpu
from capacity.engine.measured import EngineFlags
from capacity.engine.profiles import CALIBRATED, PINNED_VLLM, PROFILES, STACK_MODELS, UNAVAILABLE, calibrated
from capacity.engine.steady_state import predict
from capacity.engine.sweep_fit import (
    FITTED,
    ITERATIONS,
    MIN_ROWS,
    SweepFit,
    SweepSetup,
    errors_by_regime,
    fit_sweep,
    fitted_values,
    profile_of,
)
from capacity.measure.envelope import EnvelopeRow, read_envelope
from capacity.tables import console, keep_numbers_whole
from contract.settings.stack_file import read_stack

# The calibration run's window (../shared/calibration/README.md): a CSV without points.json
DEFAULT_WARMUP_S, DEFAULT_MEASURE_S = 30.0, 480.0
NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
# A sweep's mean KV usage this far from what the profile's flags give means another replica ran
KV_RATIO_LIMIT, KV_GAP_LIMIT = 1.5, 0.10
FLAG_KEYS = ("max_model_len", "max_num_seqs", "max_num_batched_tokens")
DEFAULT_GPU_MEMORY_UTILIZATION = 0.90  # vLLM's default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from-sweep",
        type=Path,
        required=True,
        metavar="DIR|CSV",
        help="a sweep: the folder `sweep`/`lab` wrote (envelope.csv, points.json) or an envelope CSV",
    )
    parser.add_argument("--gpu", required=True, help="the swept GPU (data/gpus.yaml name, e.g. a10g, l4)")
    parser.add_argument(
        "--model",
        required=True,
        help="the swept checkpoint (data/models.yaml repo or short name, e.g. qwen2.5-14b-awq)",
    )
    parser.add_argument(
        "--name", default=None, help="profile name, starting with '<gpu>-' (default: <gpu>-<model short>-measured)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder to write <name>.yaml to (default: --profiles-dir; else, in a checkout, "
        "capacity/engine/data/measured, where profiles are found by name; else ./profiles, never the installed package)",
    )
    add_profiles_dir_argument(parser)
    parser.add_argument(
        "--prompt-tokens", type=int, default=None, help="the sweep's prompt length (default: points.json's)"
    )
    parser.add_argument(
        "--output-tokens", type=int, default=None, help="the sweep's output length (default: points.json's)"
    )
    parser.add_argument(
        "--warmup", type=float, default=None, help="warm-up per level, s (default: points.json's, else 30)"
    )
    parser.add_argument(
        "--duration", type=float, default=None, help="measured window per level, s (default: points.json's, else 480)"
    )
    parser.add_argument("--max-model-len", type=int, default=None, help="vLLM flag (default: the stacks' for --model)")
    parser.add_argument("--max-num-seqs", type=int, default=None, help="vLLM flag (default: the stacks' for --model)")
    parser.add_argument(
        "--max-num-batched-tokens", type=int, default=None, help="vLLM flag (default: the stacks' for --model)"
    )
    parser.add_argument(
        "--gpu-memory-utilization", type=float, default=None, help="vLLM flag (default: the stacks', else 0.90)"
    )
    parser.add_argument(
        "--stack",
        default=None,
        help="take the vLLM flags from this stack's model serving --model (the replica a sweep of the stack ran): "
        + STACK_HELP
        + " (default: none: the flags given, else the stacks' defaults)",
    )
    parser.add_argument(
        "--stack-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder a --stack name is looked up in (default: here, else the checkout)",
    )
    parser.add_argument("--vllm-version", default=PINNED_VLLM, help=f"the replica's vLLM (default: {PINNED_VLLM})")
    parser.add_argument("--iterations", type=int, default=ITERATIONS, help="simplex steps per fit")
    parser.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")


@dataclass(frozen=True)
class Sweep:
    """A sweep as read: the envelope's rows and, when the sweep wrote one, points.json's levels."""

    csv: Path
    rows: list[EnvelopeRow]
    points: Path | None
    levels: list[dict[str, Any]]  # points.json summaries (one per level), [] without it


def _files(path: Path) -> tuple[Path, Path | None]:
    if not path.exists():
        raise ValueError(f"--from-sweep {path} does not exist")
    if path.is_dir():
        csv = path / "envelope.csv"
        if not csv.is_file():
            raise ValueError(f"--from-sweep {path}: no envelope.csv in it (`sweep` and `lab` write DIR/envelope.csv)")
        points = path / "points.json"
        return csv, points if points.is_file() else None
    points = path.with_name("points.json")
    return path, points if path.name == "envelope.csv" and points.is_file() else None


def read_sweep(path: Path) -> Sweep:
    csv, points = _files(path)
    rows = read_envelope(csv)
    levels: list[dict[str, Any]] = []
    if points is not None:
        try:
            levels = [dict(p["summary"], replicas=p.get("replicas", 1)) for p in json.loads(points.read_text())]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{points}: not the points.json `sweep`/`lab` write ({exc})") from None
    return Sweep(csv, rows, points, levels)


def _level(summary: dict[str, Any]) -> int:
    return int(summary.get("concurrency", 0)) // max(int(summary.get("replicas", 1)), 1)


def _recorded(sweep: Sweep) -> tuple[dict[str, float], list[str]]:
    """The request shape and window points.json records, the same at every level."""
    recorded: dict[str, float] = {}
    problems: list[str] = []
    for level in sweep.levels:
        c = _level(level)
        if level.get("rate") is not None:
            problems.append(f"{sweep.points}: level concurrency {c} ran an open-loop rate; a profile fits closed loops")
        window = level.get("window_s")
        mine = {"prompt_tokens": level.get("prompt_tokens"), "output_tokens": level.get("output_tokens")}
        if window:
            mine |= {"warmup_s": window[0], "measure_s": window[1] - window[0]}
        for key, value in mine.items():
            if value is None:
                continue
            if key in ("prompt_tokens", "output_tokens") and key in recorded and recorded[key] != value:
                problems.append(
                    f"{sweep.points}: level concurrency {c} has {key} {value}, an earlier level {recorded[key]:g} "
                    "(one profile, one request shape)"
                )
            recorded.setdefault(key, float(value))
    swept = sorted(_level(level) for level in sweep.levels)
    in_csv = [r.concurrency for r in sweep.rows]
    if sweep.levels and swept != in_csv:
        problems.append(f"{sweep.points} has levels {swept}, {sweep.csv} {in_csv}: not the same sweep")
    return recorded, problems


# the request shape and window: key -> (flag, argparse dest)
SHAPE_FLAGS = {
    "prompt_tokens": ("--prompt-tokens", "prompt_tokens"),
    "output_tokens": ("--output-tokens", "output_tokens"),
    "warmup_s": ("--warmup", "warmup"),
    "measure_s": ("--duration", "duration"),
}
WINDOW_DEFAULTS = {"warmup_s": DEFAULT_WARMUP_S, "measure_s": DEFAULT_MEASURE_S}


def _shape(sweep: Sweep, args: argparse.Namespace) -> tuple[dict[str, float], list[str]]:
    """Prompt and output tokens and the window: the flags, checked against the sweep's points.json."""
    recorded, problems = _recorded(sweep)
    shape: dict[str, float] = {}
    missing: list[str] = []
    for key, (flag, dest) in SHAPE_FLAGS.items():
        given, mine = getattr(args, dest), recorded.get(key)
        if given is not None and mine is not None and key in ("prompt_tokens", "output_tokens") and given != mine:
            problems.append(f"{flag} {given} disagrees with the sweep's {key} {mine:g} ({sweep.points})")
        chosen = given if given is not None else mine if mine is not None else WINDOW_DEFAULTS.get(key)
        if chosen is None:
            missing.append(flag)
        elif chosen < 0 or (chosen == 0 and key != "warmup_s"):
            problems.append(f"{flag} must be > 0, got {chosen:g}")
        else:
            shape[key] = float(chosen)
    if missing:
        problems.append(f"{' and '.join(missing)} required: {sweep.csv} has no points.json beside it to read them from")
    return shape, problems


def _replica(args: argparse.Namespace) -> tuple[Gpu | None, Checkpoint | None, list[str]]:
    problems = []
    device = model = None
    try:
        device = gpu(args.gpu)
    except ValueError as exc:
        problems.append(f"--gpu: {exc}")
    by_short = {c.short: c for c in checkpoints().values()}
    if args.model in by_short:
        model = by_short[args.model]
    else:
        try:
            model = checkpoint(args.model)
        except ValueError as exc:
            problems.append(f"--model: {exc} (or a short name: {', '.join(sorted(by_short))})")
    return device, model, problems


def _stack_flags(stack: str, stack_dir: Path | None, model: Checkpoint) -> tuple[dict[str, float], list[str]]:
    """The engine flags of the stack model that serves `model` (the replica a sweep of the stack measured)."""
    try:
        settings = read_stack(stack, stack_dir).settings()
    except ValueError as exc:
        return {}, [f"--stack {stack}: {exc}"]
    serving = [m for m in settings.models if m.hugging_face_id == model.repo]
    if not serving:
        served = ", ".join(f"{m.name} ({m.hugging_face_id})" for m in settings.models)
        return {}, [f"--stack {stack} serves no model with huggingFaceId {model.repo}; it serves {served}"]
    e = serving[0].engine
    return {
        "max_model_len": e.max_model_len,
        "max_num_seqs": e.max_num_seqs,
        "max_num_batched_tokens": e.max_num_batched_tokens,
        "gpu_memory_utilization": e.gpu_memory_utilization,
    }, []


def _flags(args: argparse.Namespace, model: Checkpoint | None) -> tuple[EngineFlags | None, list[str]]:
    """The replica's vLLM flags: given, else the `--stack` model's, else the stacks' defaults for
    this model (profiles.STACK_MODELS) or the calibration run's."""
    if model is None:
        return None, []  # --model's own problem says why
    defaults: dict[str, float] = dict(next((f for repo, f in STACK_MODELS if repo == model.repo), {}))
    reference = calibrated()
    if not defaults and model.repo == reference.checkpoint:
        defaults = {k: getattr(reference, k) for k in FLAG_KEYS}
    if args.stack is not None:
        defaults, problems = _stack_flags(args.stack, args.stack_dir, model)
        if problems:
            return None, problems
    keys = (*FLAG_KEYS, "gpu_memory_utilization")
    values = {k: getattr(args, k) if getattr(args, k) is not None else defaults.get(k) for k in keys}
    values["gpu_memory_utilization"] = values["gpu_memory_utilization"] or DEFAULT_GPU_MEMORY_UTILIZATION
    missing = ["--" + k.replace("_", "-") for k in FLAG_KEYS if values[k] is None]
    if missing:
        return None, [f"{', '.join(missing)} required: no stack runs {args.model} to take its flags from"]
    problems = [f"--{k.replace('_', '-')} must be > 0, got {values[k]}" for k in FLAG_KEYS if (values[k] or 0) <= 0]
    utilization = float(values["gpu_memory_utilization"] or 0)
    if not 0 < utilization <= 1:
        problems.append(f"--gpu-memory-utilization must be in (0, 1], got {utilization:g}")
    if problems:
        return None, problems
    m, s, b = (int(values[k] or 0) for k in FLAG_KEYS)
    return EngineFlags(m, s, b, utilization, args.vllm_version), []


def _name(args: argparse.Namespace, device: Gpu | None, model: Checkpoint | None) -> tuple[str, list[str]]:
    if device is None or model is None:
        return "", []
    name = args.name or f"{device.name}-{model.short}-measured"
    problems = []
    if not NAME.match(name):
        problems.append(f"--name {name!r} must be lower-case letters, digits, '.' and '-'")
    if not name.startswith(f"{device.name}-"):
        problems.append(
            f"--name {name!r} must start with '{device.name}-': a stack's capacityProfile names the GPU its "
            "instanceFamilies carry (contract/settings/models.py)"
        )
    if name in PROFILES or name in UNAVAILABLE:
        problems.append(f"--name {name!r} is a physics profile's name; pick another (e.g. {name}-measured)")
    return name, problems


def _consistency(sweep: Sweep, setup: SweepSetup) -> list[str]:
    """What the sweep shows that these flags contradict: a mean KV usage at the top level that
    another KV size would give. [] when they agree."""
    f = setup.flags
    top = sweep.rows[-1]
    if top.avg_kv_usage is None or top.avg_kv_usage <= 0:
        return []
    state = predict(
        profile_of("kv-check", setup, CALIBRATED),
        top.concurrency,
        setup.prompt_tokens,
        setup.output_tokens,
        warmup_s=setup.warmup_s,
        measure_s=setup.measure_s,
    )
    ratio = state.avg_kv_usage / top.avg_kv_usage
    if abs(state.avg_kv_usage - top.avg_kv_usage) > KV_GAP_LIMIT and not 1 / KV_RATIO_LIMIT <= ratio <= KV_RATIO_LIMIT:
        return [
            f"{sweep.csv}: mean KV usage at concurrency {top.concurrency} is {top.avg_kv_usage:.0%}, but "
            f"--max-num-seqs {f.max_num_seqs}, --max-model-len {f.max_model_len}, --gpu-memory-utilization "
            f"{f.gpu_memory_utilization:g} on {setup.gpu.name} give {state.avg_kv_usage:.0%}: the swept replica "
            "ran other flags (or another GPU/model); pass the flags it ran"
        ]
    return []


def setup_of(args: argparse.Namespace) -> tuple[Sweep, SweepSetup, str]:
    """Everything the fit needs, or one ValueError listing every problem."""
    problems: list[str] = []
    sweep = None
    try:
        sweep = read_sweep(args.from_sweep)
    except ValueError as exc:
        problems.append(str(exc))
    device, model, replica_problems = _replica(args)
    flags, flag_problems = _flags(args, model)
    name, name_problems = _name(args, device, model)
    problems += replica_problems + flag_problems + name_problems
    shape: dict[str, float] = {}
    if sweep is not None:
        shape, shape_problems = _shape(sweep, args)
        problems += shape_problems
        if len(sweep.rows) < MIN_ROWS:
            problems.append(
                f"{sweep.csv}: {len(sweep.rows)} concurrency levels; fitting {len(FITTED)} numbers and holding "
                f"one level out needs at least {MIN_ROWS}"
            )
    # vLLM answers 400 to a request whose prompt + max_tokens exceeds max_model_len (vllm-project/vllm
    # vllm/entrypoints/openai/serving_engine.py, OpenAIServing._validate_prompt_and_tokenize at
    # 0030b9ff: `token_num + request.max_tokens > self.max_model_len` raises; its successor
    # `_validate_input` keeps the check: "'max_tokens' or 'max_completion_tokens' is too large")
    if flags is not None and {"prompt_tokens", "output_tokens"} <= set(shape):
        length = int(shape["prompt_tokens"] + shape["output_tokens"])
        if length > flags.max_model_len:
            problems.append(
                f"the sweep's requests ({length} tokens) exceed --max-model-len {flags.max_model_len}: vLLM would "
                "have refused every one, so the swept replica ran another max-model-len"
            )
    if args.iterations < 1:
        problems.append(f"--iterations must be >= 1, got {args.iterations}")
    if problems or sweep is None or device is None or model is None or flags is None:
        raise ValueError("; ".join(problems))
    setup = SweepSetup(
        device,
        model,
        flags,
        int(shape["prompt_tokens"]),
        int(shape["output_tokens"]),
        shape["warmup_s"],
        shape["measure_s"],
    )
    try:
        profile_of(name, setup, CALIBRATED)
    except ValueError as exc:  # vLLM would not start this replica
        raise ValueError(str(exc)) from None
    consistency = _consistency(sweep, setup)
    if consistency:
        raise ValueError("; ".join(consistency))
    return sweep, setup, name


def table(result: SweepFit) -> Table:
    out = Table(title="measured vs fitted, each level also held out (fitted on the others)")
    for column in ("concurrency", "regime", "req/s", "in sample", "held out", "p99 s", "in sample ", "held out "):
        out.add_column(column, justify="left" if column == "regime" else "right")
    by = {(p.name, p.metric): (p, q) for p, q in zip(result.in_sample, result.held_out, strict=True)}
    for name in dict.fromkeys(p.name for p in result.in_sample):
        rps, rps_held = by[(name, "successful_rps")]
        p99, p99_held = by[(name, "p99_latency_s")]
        out.add_row(
            name.removeprefix("c"),
            rps.regime,
            f"{rps.measured:.2f}",
            f"{rps.error:+.1%}",
            f"{rps_held.error:+.1%}",
            f"{p99.measured:.2f}",
            f"{p99.error:+.1%}",
            f"{p99_held.error:+.1%}",
        )
    return keep_numbers_whole(out, text_columns=(1,))


def _errors(points: list[Point]) -> dict[str, float]:
    s = summary(points)
    return {k: s[k] for k in ("median", "light_median", "saturated_median", "worst")}


def report_lines(
    result: SweepFit,
    by_regime: dict[str, float | None],
    fitted: dict[str, float],
    start: dict[str, float],
    path: Path,
    found_by_name: bool,
    name: str,
) -> list[str]:
    """What the fit found and where it went, one fact per line."""
    held = ", ".join(f"{r} {e:.1%}" for r, e in by_regime.items() if e is not None)
    absent = [r for r, e in by_regime.items() if e is None]
    width = max(map(len, fitted))
    lines = ["fitted (the rest held at the global calibration):"]
    lines += [f"  {k:<{width}} {v:.4g} (global {start[k]:.4g})" for k, v in fitted.items()]
    lines += [
        f"error: in sample median {summary(result.in_sample)['median']:.1%}, worst {summary(result.in_sample)['worst']:.1%}",
        f"       held out (each level predicted by a fit of the others): median {held}, "
        f"worst {summary(result.held_out)['worst']:.1%}",
    ]
    if absent:
        lines.append(f"       no {' or '.join(absent)} level: trust falls back to the GPU's published error there")
    shown = path.resolve().relative_to(Path.cwd()) if path.resolve().is_relative_to(Path.cwd()) else path
    lines.append(f"wrote {shown} (trust: measured)")
    if found_by_name:
        lines += [
            f"next: capacityProfile: {name} in the model's entry of Pulumi.STACK.yaml (engine flags as swept),",
            "      then python -m capacity plan --stack STACK --model MODEL --trace TRACE",
        ]
    else:
        lines.append(
            f"next: pass --profiles-dir {path.parent} (or set $CAPACITY_PROFILES_DIR) to name {name} in a command"
        )
    return lines


def run(args: argparse.Namespace) -> int:
    sweep, setup, name = setup_of(args)
    with counted(f"profile {name}", not args.no_progress, "fits (all levels, then each level held out)") as tick:
        result = fit_sweep(
            [SweepRow(r.concurrency, r.successful_rps, r.p99_latency_s) for r in sweep.rows],
            setup,
            iterations=args.iterations,
            on_fold=(lambda done, total: tick(done, total)) if tick else None,
        )
    by_regime = errors_by_regime(result.held_out)
    fitted = dict(zip(FITTED, fitted_values(result.calibration, setup), strict=True))
    start = dict(zip(FITTED, fitted_values(CALIBRATED, setup), strict=True))
    out = args.out if args.out is not None else measured.write_dir()
    path = measured.path_of(name, out)
    document = measured.document(
        name=name,
        gpu=setup.gpu.name,
        checkpoint=setup.checkpoint.repo,
        flags=setup.flags,
        calibration=result.calibration,
        fitted=fitted,
        sweep={
            "source": str(sweep.csv),
            "sha256": hashlib.sha256(sweep.csv.read_bytes()).hexdigest(),
            "points": str(sweep.points) if sweep.points else None,
            "levels": [r.concurrency for r in sweep.rows],
            "prompt_tokens": setup.prompt_tokens,
            "output_tokens": setup.output_tokens,
            "warmup_s": setup.warmup_s,
            "measure_s": setup.measure_s,
        },
        in_sample=_errors(result.in_sample),
        held_out=_errors(result.held_out),
        held_out_by_regime=by_regime,
        command="python -m capacity " + " ".join(getattr(args, "_argv", [])),
        date=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    measured.write(
        path,
        document,
        "Written by `python -m capacity profile --from-sweep`; name it in a stack's models[].capacityProfile.",
    )
    console().print(table(result))
    print("\n".join(report_lines(result, by_regime, fitted, start, path, out in measured.profile_dirs(), name)))
    return 0
