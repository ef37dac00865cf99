"""`python -m capacity` commands, one module each: `add_arguments(parser)` and `run(args) -> int`,
the docstring's first line is the command's help. Argument parsing lives here only."""
