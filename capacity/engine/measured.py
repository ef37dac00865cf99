"""Measured profiles as data: one YAML file per swept replica, written by `python -m capacity profile
--from-sweep` and read by `profiles.get_profile` (by name) and `trust.trust_of` (its held-out error).

Home: `capacity/engine/data/measured/<name>.yaml`, beside the datasheets the physics profiles come
from. A stack's `capacityProfile` names a profile, and the stack file, its `# Evidence` block and
the tests that hold the committed plan to its target are committed together with the code; a
measured profile is evidence of the same kind, so it is committed in the same tree, found by its
name without a registry to edit, and travels with the package (`pip install '.[tools]'` ships
data/). An installed package is never written into: there, and wherever `--profiles-dir DIR` is
given, profiles live in an operator's folder, looked up by name before the shipped ones.

A file records what was swept (GPU, checkpoint, vLLM flags, request shape, the sweep file and its
sha256), the whole calibration the profile runs with (the fitted numbers and the global ones they
were held at, so a later refit of the global calibration does not silently change a measurement),
and the errors: in sample and held out (leave one concurrency out) per regime.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from capacity.engine.roofline import Calibration

MEASURED_DIR = Path(__file__).with_name("data") / "measured"
# An operator's profiles directory: `--profiles-dir` sets it for the command and the worker
# processes it starts (they inherit the environment).
PROFILES_DIR_ENV = "CAPACITY_PROFILES_DIR"
# Run from a checkout (its root holds Pulumi.yaml), not from an installed package.
IN_CHECKOUT = (Path(__file__).resolve().parents[2] / "Pulumi.yaml").is_file()
# Where an installed `profile --from-sweep` writes without --profiles-dir or --out.
INSTALLED_WRITE_DIR = Path("profiles")


@dataclass(frozen=True)
class EngineFlags:
    """The vLLM flags of a swept replica (what `profiles.derive` needs besides the GPU and checkpoint)."""

    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    vllm_version: str


@dataclass(frozen=True)
class MeasuredProfile:
    name: str
    gpu: str  # data/gpus.yaml name
    checkpoint: str  # data/models.yaml checkpoint
    flags: EngineFlags
    calibration: Calibration
    held_out: dict[str, float | None]  # regime -> median |error| of the held-out rows (None: no level there)
    held_out_worst: float
    levels: tuple[int, ...]
    sweep: str  # the sweep file the fit read
    path: Path  # this file

    def basis(self) -> str:
        regimes = ", ".join(f"{r} {e:.1%}" for r, e in self.held_out.items() if e is not None)
        return (
            f"a sweep of this replica ({self.sweep}, concurrency {', '.join(map(str, self.levels))}), "
            f"each level held out and predicted by the fit of the others: median {regimes}, "
            f"worst {self.held_out_worst:.1%} ({self.path.name})"
        )


def operator_dir() -> Path | None:
    folder = os.environ.get(PROFILES_DIR_ENV)
    return Path(folder) if folder else None


def profile_dirs() -> list[Path]:
    """Where a measured profile's name is looked up: the operator's directory first, then the shipped one."""
    extra = operator_dir()
    return [extra, MEASURED_DIR] if extra is not None else [MEASURED_DIR]


def write_dir() -> Path:
    """Where `profile --from-sweep` writes by default: the operator's directory when set; in a
    checkout, beside the committed profiles (a profile is evidence, committed with its stack);
    else ./profiles, never inside the installed package."""
    extra = operator_dir()
    if extra is not None:
        return extra
    return MEASURED_DIR if IN_CHECKOUT else INSTALLED_WRITE_DIR


def path_of(name: str, directory: Path | None = None) -> Path:
    return (directory if directory is not None else MEASURED_DIR) / f"{name}.yaml"


def names(directory: Path | None = None) -> list[str]:
    folders = [directory] if directory is not None else profile_dirs()
    return sorted({p.stem for folder in folders if folder.is_dir() for p in folder.glob("*.yaml")})


def find(name: str, directory: Path | None = None) -> MeasuredProfile | None:
    """The measured profile called `name` (in `directory`, else the first of `profile_dirs()` that
    holds it), None when there is no such file (a ValueError when it is broken)."""
    for folder in [directory] if directory is not None else profile_dirs():
        path = path_of(name, folder)
        if path.is_file():
            return _read(path, path.stat().st_mtime_ns)
    return None


def write(path: Path, document: dict[str, Any], header: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {header}\n" + yaml.safe_dump(document, sort_keys=False, width=120))


def document(
    *,
    name: str,
    gpu: str,
    checkpoint: str,
    flags: EngineFlags,
    calibration: Calibration,
    fitted: dict[str, float],
    sweep: dict[str, Any],
    in_sample: dict[str, float],
    held_out: dict[str, float],
    held_out_by_regime: dict[str, float | None],
    command: str,
    date: str,
) -> dict[str, Any]:
    """The YAML document of one measured profile (`_read` reads it back)."""
    return {
        "name": name,
        "trust": "measured",
        "gpu": gpu,
        "model": checkpoint,
        "engine": asdict(flags),
        "fitted": fitted,
        "calibration": calibration.as_vector(),
        "sweep": sweep,
        "error": {
            "in_sample": _clean(in_sample),
            "held_out": {**_clean(held_out), "by_regime": held_out_by_regime},
        },
        "command": command,
        "date": date,
    }


def _clean(summary: dict[str, float]) -> dict[str, float | None]:
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in summary.items()}


@cache
def _read(path: Path, mtime_ns: int) -> MeasuredProfile:
    """One file, parsed once per modification (get_profile is called in the planner's loops)."""
    try:
        data = yaml.safe_load(path.read_text())
        if data["name"] != path.stem:
            raise ValueError(f"its name {data['name']!r} is not its file name {path.stem!r}")
        engine = data["engine"]
        held = data["error"]["held_out"]
        return MeasuredProfile(
            name=str(data["name"]),
            gpu=str(data["gpu"]),
            checkpoint=str(data["model"]),
            flags=EngineFlags(
                int(engine["max_model_len"]),
                int(engine["max_num_seqs"]),
                int(engine["max_num_batched_tokens"]),
                float(engine["gpu_memory_utilization"]),
                str(engine["vllm_version"]),
            ),
            calibration=Calibration.from_vector([float(v) for v in data["calibration"]]),
            held_out={r: None if e is None else float(e) for r, e in held["by_regime"].items()},
            held_out_worst=float(held["worst"]),
            levels=tuple(int(c) for c in data["sweep"]["levels"]),
            sweep=str(data["sweep"]["source"]),
            path=path,
        )
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueError(
            f"measured profile {path}: unreadable ({type(exc).__name__}: {exc}); rewrite it with "
            "python -m capacity profile --from-sweep"
        ) from None
