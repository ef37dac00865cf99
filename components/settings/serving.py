"""Serving settings: where predictors run."""

from __future__ import annotations

import re

from pydantic import field_validator

from .base import Section


class ServingSettings(Section):
    namespace: str = "inference"

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not re.match(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", value):
            raise ValueError("must be a Kubernetes namespace name (DNS label)")
        return value
