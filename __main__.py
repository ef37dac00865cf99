"""Entry point: validate the stack's settings, build the platform, export its outputs."""

import pulumi

from components.platform import Platform
from components.stack_settings import load

stack_settings = load()
platform = Platform(f"llm-{pulumi.get_stack()}", stack_settings)
for key, value in platform.outputs.items():
    pulumi.export(key, value)
