"""`python -m capacity` commands, one module each: `add_arguments(parser)` and `run(args) -> int`,
the docstring's first line is the command's help. Argument parsing lives here only."""

# The stack every command reads when --stack is not given: the one whose thresholds matter, and
# the one the README's examples retune.
DEFAULT_STACK = "prod"
