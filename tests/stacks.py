"""A stack file as tests of mechanics need it: the planner's per-model autoscaling blocks dropped.

The committed stacks carry planner-derived values (issue 17) that move whenever the evidence is
re-planned, and a model's own block overrides `autoscaling.default` field by field; a test about
how the tools and settings work, not about those values, reads the `default` scope alone
(dev: minReplicas 1, maxReplicas 3, the TTFT trigger off).
"""

import copy
from pathlib import Path

import yaml

from contract.settings.config_path import edited_config
from contract.settings.stack_file import StackFile, read_stack

ROOT = Path(__file__).resolve().parents[1]
AUTOSCALING = "inference-platform:autoscaling"


def unplanned_file(stack: str) -> StackFile:
    """`Pulumi.<stack>.yaml` as read, with only its default autoscaling scope."""
    source = read_stack(stack, ROOT)
    config = copy.deepcopy(source.config)
    config[AUTOSCALING] = {"default": config.get(AUTOSCALING, {}).get("default", {})}
    return StackFile(source.path, config)


def unplanned(stack: str, directory: Path) -> Path:
    """`unplanned_file(stack)` written to `directory` as `Pulumi.<stack>.yaml` (for CLI tests)."""
    path = Path(directory) / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"config": unplanned_file(stack).config}, sort_keys=False))
    return path


def edited(stack: str, directory: Path, edits: list) -> Path:
    """`Pulumi.<stack>.yaml` after `pulumi config set --path` edits, written to `directory` (for CLI tests)."""
    path = Path(directory) / f"Pulumi.{stack}.yaml"
    config = edited_config(read_stack(stack, ROOT).config, edits)
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return path
