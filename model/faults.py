"""spec/Faults.tla: link and NIC faults, at most MaxFaults of them on FaultPaths; with
Recover, a failed link or NIC comes back (its QPs stay in the error state)."""

from __future__ import annotations

from shift.model.config import Constants, DesignRecord
from shift.model.state import ERR, FLUSH, HOST, SPEAKING, Cqe, State, covered, set_at, set_in

NO_WIRE: tuple[tuple[()], tuple[()]] = ((), ())


def link_down(s: State, d: DesignRecord, b: Constants, p: int) -> State | None:
    """The packets in flight on a failing path are lost."""
    i = p - 1
    if p not in b.fault_paths or s.faults >= b.max_faults or not s.link[i]:
        return None
    return s._replace(link=set_at(s.link, i, False), wire=set_at(s.wire, i, NO_WIRE),
                      faults=s.faults + 1)


def link_up(s: State, d: DesignRecord, b: Constants, p: int) -> State | None:
    i = p - 1
    if not b.recover or s.link[i]:
        return None
    return s._replace(link=set_at(s.link, i, True))


def nic_fail(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> State | None:
    """NicFail(h, p): NIC p of host dies: its QP goes to the error state; CQEs already in
    host memory survive, those it had not yet written (AckBeforeCqe) die with it. Its
    driver flushes the outstanding WRs (the send WRs from the oldest unacknowledged, then
    the receive WRs) - or, with DeviceFatal, the QP goes silent: its WRs wait (those whose
    completion died first) until the layer reads the event (layer.fatal_event), whose
    flush starts after the WRs a completion covers. A QP already in the error state
    flushed when it got there; with DeviceFatal it falls silent all the same (its event
    flushes the posts made since), unless an earlier death is still unread or its
    layer already took it over."""
    h, i = HOST[host], p - 1
    if p not in b.fault_paths or s.faults >= b.max_faults or not s.nic[h][i]:
        return None
    s2 = s._replace(nic=set_in(s.nic, h, i, False), wire=set_at(s.wire, i, NO_WIRE),
                    faults=s.faults + 1, qp=set_in(s.qp, h, i, ERR),
                    unwritten=set_in(s.unwritten, h, i, ()))
    was_err = s.qp[h][i] == ERR  # (it flushed when it went to the error state)
    if was_err and (not b.device_fatal or s.fatal[h][i] != SPEAKING):
        return s2
    if b.device_fatal:
        lost = tuple(c.recv for c in s.unwritten[h][i])
        first = len(s.sq[h][i]) + 1 if was_err else covered(s, h, i) + 1
        return s2._replace(rq=set_in(s.rq, h, i, lost + s.rq[h][i]),
                           fatal=set_in(s.fatal, h, i, first))
    flushed = (tuple(Cqe(w, 0, FLUSH, 0) for w in s.sq[h][i][s.una[h][i] - 1:])
               + tuple(Cqe(0, r, FLUSH, 0) for r in s.rq[h][i]))
    return s2._replace(cq=set_in(s.cq, h, i, s.cq[h][i] + flushed), rq=set_in(s.rq, h, i, ()))


def nic_recover(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> State | None:
    h, i = HOST[host], p - 1
    if not b.recover or s.nic[h][i]:
        return None
    return s._replace(nic=set_in(s.nic, h, i, True))
