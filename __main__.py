"""Entry point: validate the stack's settings, build the platform, export its outputs."""

import pulumi

from components import settings
from components.platform import Platform

stack_settings = settings.load()
platform = Platform(f"llm-{pulumi.get_stack()}", stack_settings)
for key, value in platform.outputs.items():
    pulumi.export(key, value)
