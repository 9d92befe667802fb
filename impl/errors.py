"""What shift.impl raises when the core refuses or reports a failure.

Wrong Python types and values raise TypeError/ValueError before any C call (`validate`);
the classes here are for what the C core says: an errno from a call (`PostError`), an error
status on a completion the application checks (`CompletionError`), a closed handle.
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .values import Completion


class CoreError(Exception):
    """Base of every error shift.impl raises for a failure of the C core (not the CLI's
    `shift.errors.ShiftError`, which is a user's mistake on the command line)."""


class PostError(CoreError):
    """A post (or another call) was refused: ``errno`` as a real verbs call returns it."""

    def __init__(self, err: int, what: str):
        self.errno = err
        self.errno_name = _errno.errorcode.get(err, str(err))
        super().__init__(f"{what}: {self.errno_name} ({err})")


class CompletionError(CoreError):
    """A completion the application checked carries an error status (verbs name).

    ``completion`` is the first error; ``completions`` every completion the checked call
    took, in order, successes and errors alike: a checked poll loses none."""

    def __init__(self, completion: Completion, completions: Sequence[Completion] = ()):
        self.completion = completion
        self.completions = list(completions) or [completion]
        self.status = completion.status
        self.status_name = completion.status.name
        errors = sum(not c.ok for c in self.completions)
        more = f" (+{errors - 1} more errors)" if errors > 1 else ""
        why = ", refused: an atomic or ineligible WR was in flight" if completion.refused else ""
        super().__init__(f"{completion.host}: WR {completion.wr_id}: {self.status_name}{why}"
                         f"{more}; {len(self.completions)} completions taken")

    @property
    def errors(self) -> list[Completion]:
        return [c for c in self.completions if not c.ok]


class ClosedError(CoreError):
    """The fabric or connection was closed."""


def check_errno(err: int, what: str) -> None:
    """A C call's result that is 0 or a positive errno."""
    if err:
        raise PostError(err, what)


def event_result(r: int, what: str) -> int:
    """A C event's result: 1 (it did something), 0 (not enabled), or -errno."""
    if r < 0:
        raise PostError(-r, what)
    return r
