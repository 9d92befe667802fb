"""spec/Properties.tla: the invariants, Done, and the pieces of Liveness.

`INVARIANTS` maps each invariant's TLA+ name to a predicate over a State; the explorer
checks the names spec/designs.toml lists, so a property added there without a predicate
here is an error, not a silent pass. NotificationIntegrity and DataAtNotification are the
observable properties of `shift.model.observable` on the state's observation, the same
predicates the differential runner, trace validation and the implementation's tests
check on the C core's; CompletionIntegrity adds to its observable half the responder's
executions.
"""

from __future__ import annotations

from collections.abc import Callable

from shift.model import observable
from shift.model.observe import observe
from shift.model.state import (
    ATOMICS,
    SUCCESS,
    State,
    notes_taken,
    num_notes,
    path_healthy,
)


def exactly_once_execution(s: State) -> bool:
    """No WR takes effect at the responder twice (SHIFT gives this up on purpose)."""
    return all(n <= 1 for n in s.execs)


def notification_integrity(s: State) -> bool:
    """The notifications B took are a prefix of those A posted, the k-th in receive WR k:
    the observable property (shift.model.observable) on the state's observation."""
    return observable.notification_integrity(observe(s), s.program, s.posted)


def data_at_notification(s: State) -> bool:
    """When B takes a notification, each region holds the last value written before it:
    the observable property on the state's observation."""
    return observable.data_at_notification(observe(s), s.program)


def completion_integrity(s: State) -> bool:
    """A sees each WR complete at most once, in post order, and success only for a WR that
    took effect at the responder. The first half is what an application observes
    (`observable.completion_order`, the whole check on the implementation's side); the
    second reads the responder's executions (`execs`), a ghost of the spec no application
    sees, so this predicate is stronger than the observable one."""
    if not observable.completion_order(observe(s)):
        return False
    return all(s.execs[e.wr - 1] >= 1 for e in s.sndSeen if e.status == SUCCESS)


def atomic_safety(s: State) -> bool:
    """No FADD or CAS is applied twice."""
    return all(n <= 1 for w, n in zip(s.program, s.execs, strict=True) if w.op in ATOMICS)


def opacity(s: State) -> bool:
    """No failover decision read the responder NIC's transport state."""
    return not s.queried


def zero_copy(s: State) -> bool:
    """No payload was copied by a CPU."""
    return s.copies == 0


INVARIANTS: dict[str, Callable[[State], bool]] = {
    "ExactlyOnceExecution": exactly_once_execution,
    "NotificationIntegrity": notification_integrity,
    "DataAtNotification": data_at_notification,
    "CompletionIntegrity": completion_integrity,
    "AtomicSafety": atomic_safety,
    "Opacity": opacity,
    "ZeroCopy": zero_copy,
}

TEMPORAL = ("Liveness",)


def done(s: State) -> bool:
    """The workload is finished: everything posted, every signaled WR completed at A and,
    unless the layer refused on purpose, every completion a success and every notification
    taken by B."""
    prog = s.program
    if s.posted != len(prog) or s.recvPosted != num_notes(prog):
        return False
    completed = {e.wr for e in s.sndSeen}
    if any(w.signaled and k not in completed for k, w in enumerate(prog, 1)):
        return False
    if s.refused:
        return True
    return (all(e.status == SUCCESS for e in s.sndSeen)
            and len(notes_taken(s)) == num_notes(prog))


def some_path_healthy(s: State) -> bool:
    """PathHealthy(1) \\/ PathHealthy(2): what Liveness assumes stays true for good."""
    return path_healthy(s, 1) or path_healthy(s, 2)
