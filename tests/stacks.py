"""A stack file as tests of mechanics need it: the planner's per-model autoscaling blocks dropped.

The committed stacks carry planner-derived values (issue 17) that move whenever the evidence is
re-planned; a test about how the tools work, not about those values, reads the stack's
`autoscaling.default` scope alone (dev: minReplicas 1, maxReplicas 3, the TTFT trigger off).
"""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
AUTOSCALING = "inference-platform:autoscaling"


def unplanned(stack: str, directory: Path) -> Path:
    """`Pulumi.<stack>.yaml` written to `directory` with only its default autoscaling scope."""
    document = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    document["config"][AUTOSCALING] = {"default": document["config"][AUTOSCALING]["default"]}
    path = Path(directory) / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
