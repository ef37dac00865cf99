"""Pulumi type tokens and AWS tags shared by every component."""

from __future__ import annotations

from contract.names import PACKAGE


def type_token(area: str, name: str) -> str:
    """`inference-platform:<area>:<Name>`, the type of a ComponentResource."""
    return f"{PACKAGE}:{area}:{name}"


def base_tags(stack: str, environment: str) -> dict[str, str]:
    return {"project": PACKAGE, "stack": stack, "environment": environment, "managed-by": "pulumi"}
