"""spec/Properties.tla: the invariants, Done, and the pieces of Liveness, per direction (a
host's WRs to its peer).

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
from shift.model.layer import app_owned
from shift.model.observe import observe
from shift.model.state import (
    APP_ERRORS,
    ATOMICS,
    DEFAULT,
    ERROR,
    KEY_STATUS,
    MOVING,
    SUCCESS,
    State,
    num_notes,
    path_healthy,
    peer,
    taken,
)

HOST_IDS = (0, 1)


def exactly_once_execution(s: State) -> bool:
    """No WR of either host takes effect at its peer twice (SHIFT gives this up on
    purpose)."""
    return all(n <= 1 for execs in s.execs for n in execs)


def notification_integrity(s: State) -> bool:
    """The notifications each host took are a prefix of those its peer posted, the k-th
    in receive WR k: the observable property (shift.model.observable) on each direction's
    observation (direction h: h's WRs, the peer's receive completions)."""
    return all(notification_integrity_of(s, h) for h in HOST_IDS)


def notification_integrity_of(s: State, h: int) -> bool:
    """NotificationIntegrity of direction h (h's WRs, the peer's receive completions)."""
    return observable.notification_integrity(observe(s).direction(h), s.program[h],
                                             s.posted[h])


def data_at_notification(s: State) -> bool:
    """When a host takes a notification, each of its regions holds the peer's last value
    written before it: the observable property on each direction's observation."""
    return all(data_at_notification_of(s, h) for h in HOST_IDS)


def data_at_notification_of(s: State, h: int) -> bool:
    """DataAtNotification of direction h."""
    return observable.data_at_notification(observe(s).direction(h), s.program[h])


def completion_integrity(s: State) -> bool:
    """Each host sees each of its WRs complete at most once, in post order, and success
    only for a WR that took effect at the peer. The first half is what an application
    observes (`observable.completion_order`, the whole check on the implementation's
    side); the second reads the peer's executions (`execs`), a ghost of the spec no
    application sees, so this predicate is stronger than the observable one."""
    return all(completion_integrity_of(s, h) for h in HOST_IDS)


def completion_integrity_of(s: State, h: int) -> bool:
    """CompletionIntegrity of direction h: h's completions in order, success only for a
    WR that took effect at the peer."""
    return (observable.completion_order(observe(s).direction(h))
            and all(s.execs[h][e.wr - 1] >= 1 for e in s.sndSeen[h] if e.status == SUCCESS))


def atomic_safety(s: State) -> bool:
    """No FADD or CAS is applied twice."""
    return all(n <= 1 for prog, execs in zip(s.program, s.execs, strict=True)
               for w, n in zip(prog, execs, strict=True) if w.op in ATOMICS)


def opacity(s: State) -> bool:
    """No failover decision read the responder NIC's transport state."""
    return not s.queried


def zero_copy(s: State) -> bool:
    """No payload was copied by a CPU."""
    return s.copies == 0


def first_bad_key(s: State, h: int) -> int:
    """FirstBadKey(h): the first of h's WRs with a bad key (0: none)."""
    return next((k for k, w in enumerate(s.program[h], 1) if w.key != "OK"), 0)


def app_error_contained(s: State) -> bool:
    """In a run where the environment did nothing (no fault, no drop): a host whose layer
    knows of an application error (AppOwned: its own, or the peer's word) is out of any
    failover (send side in Default or Error, no receive WR held while moving), an
    application-error status reached an application only on a WR with that bad key, and
    the first WR with a bad key completed, if it did, with its own status."""
    if s.faults or s.drops:
        return True
    for h in HOST_IDS:
        if app_owned(s, h) and (s.sendMode[h] not in (DEFAULT, ERROR)
                                or s.recvMode[h] == MOVING):
            return False
        first, prog = first_bad_key(s, h), s.program[h]
        for e in s.sndSeen[h]:
            own = KEY_STATUS[prog[e.wr - 1].key]
            if (e.status in APP_ERRORS or e.wr == first) and e.status != own:
                return False
    return True


INVARIANTS: dict[str, Callable[[State], bool]] = {
    "ExactlyOnceExecution": exactly_once_execution,
    "NotificationIntegrity": notification_integrity,
    "DataAtNotification": data_at_notification,
    "CompletionIntegrity": completion_integrity,
    "AtomicSafety": atomic_safety,
    "Opacity": opacity,
    "ZeroCopy": zero_copy,
    "AppErrorContained": app_error_contained,
}

TEMPORAL = ("Liveness",)


def _done_at(s: State, h: int) -> bool:
    """Done's conjunct for host h: everything posted, every signaled WR completed and,
    unless h's layer refused on purpose or an application of either host saw an error
    of its own (a bad key: AppFailed, which fails the QP pair), every completion a
    success and every notification taken by the peer; after such an error, every receive
    WR h posted came back to its application, taken or flushed (F6b)."""
    prog = s.program[h]
    if s.posted[h] != len(prog) or s.recvPosted[h] != num_notes(s.program[peer(h)]):
        return False
    completed = {e.wr for e in s.sndSeen[h]}
    if any(w.signaled and k not in completed for k, w in enumerate(prog, 1)):
        return False
    if any(e.status in APP_ERRORS for seen in s.sndSeen for e in seen):
        back = {e.recv for e in s.rcvSeen[h]}
        return all(r in back for r in range(1, s.recvPosted[h] + 1))
    if s.refused[h]:
        return True
    return (all(e.status == SUCCESS for e in s.sndSeen[h])
            and taken(s, peer(h)) == num_notes(prog))


def done(s: State) -> bool:
    """The workload is finished on both hosts (Properties.tla's Done)."""
    return _done_at(s, 0) and _done_at(s, 1)


def some_path_healthy(s: State) -> bool:
    """PathHealthy(1) \\/ PathHealthy(2): what Liveness assumes stays true for good."""
    return path_healthy(s, 1) or path_healthy(s, 2)
