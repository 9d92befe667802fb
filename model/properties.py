"""spec/Properties.tla: the invariants, Done, and the pieces of Liveness.

`INVARIANTS` maps each invariant's TLA+ name to a predicate over a State; the explorer
checks the names spec/designs.toml lists, so a property added there without a predicate
here is an error, not a silent pass.
"""

from __future__ import annotations

from collections.abc import Callable

from shift.model.state import (
    ATOMICS,
    REGIONS,
    SUCCESS,
    State,
    note_wr,
    notes_before,
    notes_taken,
    num_notes,
    path_healthy,
    value_after,
)


def exactly_once_execution(s: State) -> bool:
    """No WR takes effect at the responder twice (SHIFT gives this up on purpose)."""
    return all(n <= 1 for n in s.execs)


def notification_integrity(s: State) -> bool:
    """The notifications B took are a prefix of those A posted, the k-th in receive WR k."""
    limit = notes_before(s.program, s.posted)
    for i, e in enumerate(notes_taken(s), 1):
        # Conjuncts in the spec's order: NoteWr is only evaluated (defined) for i <= limit.
        if i > limit or e.wr != note_wr(s.program, i) or e.recv != i:
            return False
    return True


def data_at_notification(s: State) -> bool:
    """When B takes a notification, each region holds the last value written before it."""
    return all(e.mem[r - 1] == value_after(s.program, r, e.wr - 1)
               for e in notes_taken(s) for r in REGIONS)


def completion_integrity(s: State) -> bool:
    """A sees each WR complete at most once, in post order, and success only for a WR that
    took effect at the responder."""
    seen = s.sndSeen
    if any(seen[k].wr >= seen[k + 1].wr for k in range(len(seen) - 1)):
        return False  # strictly increasing pairwise = strictly increasing neighbours
    return all(s.execs[e.wr - 1] >= 1 for e in seen if e.status == SUCCESS)


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
