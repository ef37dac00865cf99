"""The one error type the CLI turns into a clear message and a non-zero exit."""


class SyncError(Exception):
    """A sync failed for a reason the operator can act on; the message says which."""


class Interrupted(SyncError):
    """The run was asked to stop (SIGTERM/SIGINT) and cleaned up its own uploads."""
