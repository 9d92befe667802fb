"""Errors a user can cause: the CLI prints them as one line and exits 2."""


class ShiftError(Exception):
    """A problem with the user's input or environment, told in one line."""


class UsageError(ShiftError):
    """An unknown design, bound or option value."""


class SpecError(ShiftError):
    """A malformed specification: designs.toml or a .tla module (with file and line)."""


class JavaNotFound(ShiftError):
    """No Java runtime to run TLC with."""
