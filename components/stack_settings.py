"""The program's settings: the engine's config for this stack, validated before any resource."""

from __future__ import annotations

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env, is_config_secret

from contract.settings import SettingsError, StackSettings
from contract.settings.stack_file import from_engine_config


def load() -> StackSettings:
    """Read and validate all config, or stop with a RunError naming every bad key; what deploys
    but needs attention soon (a Kubernetes version near its end of support) is logged as a warning."""
    try:
        settings = from_engine_config({**get_config_env(), **CONFIG.get()}, is_config_secret)
    except SettingsError as exc:
        raise pulumi.RunError(str(exc)) from None
    for warning in settings.warnings():
        pulumi.log.warn(warning)
    return settings
