"""How far to trust an engine profile (DESIGN.md, "Evidence and trust").

- measured: the profile IS a swept replica: its GPU, architecture, weight format and engine
  flags are those of a sweep in ../shared/calibration/ (the A10G run of the 14B AWQ), or it is
  a measured profile (`capacity.engine.measured`, fitted by `profile --from-sweep`) whose error
  per regime is its own sweep's held-out error (a regime the sweep has no level in: the GPU's
  held-out error below);
- validated: its GPU is covered by the published measurements of the fit set and the engine's
  leave-one-source-out error on that GPU is within `VALIDATED_BOUND`;
- extrapolated: neither (a GPU nobody measured, or one the model misses on), and every
  tensor-parallel replica (more than one GPU): no calibration or published row has TP > 1.

Each level carries the error per regime (light load, saturated) that it rests on, read from
data/accuracy.yaml, which `benchmarks/engine_accuracy.py --write` writes from its
leave-one-source-out run: the GPU's own held-out errors where it has points in that regime,
else the held-out error over every GPU (for an extrapolated profile: the worst held-out error,
the band a planner should assume).

A planner calls `trust_of(profile)` and widens a profile's step times by
`Trust.error(regime)` (pessimistic bound: `Trust.pessimistic_factor(regime)`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from capacity.engine import measured
from capacity.engine.hardware import checkpoints, gpus
from capacity.engine.profile import EngineProfile

ACCURACY_FILE = Path(__file__).with_name("data") / "accuracy.yaml"
LEVELS = ("measured", "validated", "extrapolated")
REGIMES = ("light", "saturated")
VALIDATED_BOUND = 0.15  # a GPU whose held-out median |error| exceeds this is not validated

# The replicas a sweep measured (../shared/calibration/README.md): GPU, architecture, weight
# format, max_num_seqs, max_num_batched_tokens, max_model_len.
SWEPT: tuple[tuple[str, str, str, int, int, int], ...] = (("a10g", "qwen2.5-14b", "awq-int4", 40, 2048, 15_000),)


@dataclass(frozen=True)
class Trust:
    profile: str
    level: str  # one of LEVELS
    gpu: str
    light_error: float  # median |error| the level rests on, light load
    saturated_error: float  # median |error|, saturated
    basis: str  # one line: what the level and errors come from

    def error(self, regime: str) -> float:
        if regime not in REGIMES:
            raise ValueError(f"regime must be one of {REGIMES}, got {regime!r}")
        return self.light_error if regime == "light" else self.saturated_error

    def pessimistic_factor(self, regime: str = "saturated") -> float:
        """Multiply step times by this for the pessimistic end of the band."""
        return 1.0 + self.error(regime)


@cache
def accuracy(path: Path = ACCURACY_FILE) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: {exc} (run: python benchmarks/engine_accuracy.py --write)") from None
    if "loso_per_gpu" not in data or "loso" not in data:
        raise ValueError(f"{path}: no leave-one-source-out results (run: python benchmarks/engine_accuracy.py --write)")
    return data


def _swept(profile: EngineProfile) -> bool:
    model = checkpoints().get(profile.checkpoint)
    if model is None:
        return False
    key = (
        profile.gpu,
        model.architecture.name,
        model.quantization.name,
        profile.max_num_seqs,
        profile.max_num_batched_tokens,
        profile.max_model_len,
    )
    return key in SWEPT


def _is_record_of(record: measured.MeasuredProfile, profile: EngineProfile) -> bool:
    """The profile runs the replica its record measured (not one re-derived with other flags)."""
    f = record.flags
    return (record.gpu, record.checkpoint, f.max_num_seqs, f.max_num_batched_tokens, f.max_model_len) == (
        profile.gpu,
        profile.checkpoint,
        profile.max_num_seqs,
        profile.max_num_batched_tokens,
        profile.max_model_len,
    )


def _measured_error(record: measured.MeasuredProfile, data: dict[str, Any], regime: str) -> float:
    """The sweep's own held-out error in `regime`; the GPU's where the sweep has no level there."""
    own = record.held_out.get(regime)
    return own if own is not None else _gpu_error(data, record.gpu, regime)


def _overall(data: dict[str, Any], regime: str, worst: bool = False) -> float:
    loso = data["loso"]
    return float(loso["worst"] if worst else loso[f"{regime}_median"])


def _gpu_error(data: dict[str, Any], gpu: str, regime: str) -> float:
    mine = data["loso_per_gpu"].get(gpu, {})
    value = mine.get(f"{regime}_median")
    return float(value) if value is not None and not math.isnan(value) else _overall(data, regime)


def trust_of(profile: EngineProfile, data: dict[str, Any] | None = None) -> Trust:
    """The trust level of `profile` and the error per regime it rests on."""
    data = data if data is not None else accuracy()
    gpu = profile.gpu
    record = measured.find(profile.name)
    if record is not None and _is_record_of(record, profile):
        light, saturated = (_measured_error(record, data, regime) for regime in REGIMES)
        return Trust(profile.name, "measured", gpu, light, saturated, record.basis())
    covered = data["loso_per_gpu"].get(gpu)
    single = profile.tensor_parallel_size == 1
    if gpu and single and _swept(profile):
        sweep = data["loso_a10g_sweep"] if "loso_a10g_sweep" in data else data["a10g_sweep"]
        light = _gpu_error(data, gpu, "light")
        return Trust(
            profile.name,
            "measured",
            gpu,
            min(light, float(sweep["median"])),
            float(sweep["saturated_median"]),
            f"a sweep of this replica ({gpu}, its model's architecture and weight format, these flags): "
            f"the fit's A10G rows, held out: median {sweep['median']:.1%}, worst {sweep['worst']:.1%}",
        )
    if single and covered and float(covered["median"]) <= VALIDATED_BOUND and gpus().get(gpu, None) is not None:
        light, saturated = _gpu_error(data, gpu, "light"), _gpu_error(data, gpu, "saturated")
        return Trust(
            profile.name,
            "validated",
            gpu,
            light,
            saturated,
            f"{covered['points']} published points on {gpu} ({', '.join(covered['sources'])}), "
            f"held out: median {covered['median']:.1%}, worst {covered['worst']:.1%}",
        )
    worst = _overall(data, "saturated", worst=True)
    why = (
        f"no published measurement on {gpu or 'this GPU'}"
        if not covered
        else f"held-out median {covered['median']:.1%} on {gpu} exceeds {VALIDATED_BOUND:.0%}"
    )
    if profile.tensor_parallel_size > 1:
        why = (
            f"tensor parallel over {profile.tensor_parallel_size} GPUs: no calibration or published row has "
            "more than one GPU per replica (the all-reduce cost is NCCL's model on datasheet link bandwidth)"
        )
    return Trust(
        profile.name,
        "extrapolated",
        gpu,
        max(_overall(data, "light"), worst),
        worst,
        f"{why}: datasheet physics with the fitted calibration; band = the worst held-out error {worst:.1%}",
    )
