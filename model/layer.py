"""spec/Failover.tla, the failover layer: Trigger, the Progress steps (handshake, replay,
reconnect, release) and the delivery of its control messages.

Hosts are indices here (0: A, 1: B); `design.skip` selects the replay filter.
"""

from __future__ import annotations

from shift.model.config import Constants, DesignRecord
from shift.model.state import (
    ATOMICS,
    DEFAULT,
    DIR,
    ERR,
    ERROR,
    FALLBACK,
    FLUSH,
    HOST,
    RTS,
    SUCCESS,
    WAIT_DRAINED,
    WAIT_SIGNALED,
    Cqe,
    Ctl,
    State,
    good_prefix,
    note_wr,
    notes_taken,
    path_healthy,
    set_at,
    set_in,
)
from shift.model.transport import push

NO_WIRE: tuple[tuple[()], tuple[()]] = ((), ())


def trigger(s: State, h: int, d: DesignRecord, status: str) -> State:
    """Host h enters Fallback: its default QP to the error state, the default CQ drained up
    to its first error with the good completions held for the application; on A, with an
    atomic outstanding, a refusing design fails the WRs instead (status for the first)."""
    good = good_prefix(s.cq[h][0])
    qp = set_in(s.qp, h, 0, ERR)
    if h == 0:
        last = good[-1].wr if good else 0
        rest = s.pending if not good else tuple(w for w in s.pending if w > last)
        prog = s.program
        refuse = d.refuseAtomics and any(prog[w - 1].op in ATOMICS for w in rest)
        failed = tuple(Cqe(w, 0, status if k == 0 else FLUSH, 0)
                       for k, w in enumerate(rest)) if refuse else ()
        return s._replace(qp=qp, cq=set_in(s.cq, 0, 0, ()),
                          buffered=set_at(s.buffered, 0, s.buffered[0] + good + failed),
                          pending=() if refuse else rest,
                          refused=s.refused | frozenset(rest) if refuse else s.refused,
                          layer=set_at(s.layer, 0, ERROR if refuse else FALLBACK))
    recvs = {c.recv for c in good}
    return s._replace(qp=qp, cq=set_in(s.cq, 1, 0, ()), rq=set_at(s.rq, 0, ()),
                      buffered=set_at(s.buffered, 1, s.buffered[1] + good),
                      recvDone=s.recvDone + len(good),
                      rpend=tuple(r for r in s.rpend if r not in recvs),
                      layer=set_at(s.layer, 1, FALLBACK))


def handshake(s: State, h: int) -> State | None:
    """Step 3: B reposts its outstanding receive WRs on the backup QP (flushed if that QP
    is in the error state); then the host sends its counter over the backup path."""
    if s.layer[h] != FALLBACK or s.sentCtr[h]:
        return None
    rq, cq = s.rq, s.cq
    if h == 1:
        if s.qp[1][1] == RTS:
            rq = set_at(rq, 1, rq[1] + s.rpend)
        else:
            cq = set_in(cq, 1, 1, cq[1][1] + tuple(Cqe(0, r, FLUSH, 0) for r in s.rpend))
    wire = s.wire
    if s.nic[h][1] and s.qp[h][1] == RTS:  # a dead NIC or an errored QP sends nothing
        wire = push(s.link, wire, 1, h, Ctl("counter", s.recvDone if h == 1 else 0))
    return s._replace(rq=rq, cq=cq, wire=wire, sentCtr=set_at(s.sentCtr, h, True))


def message_of(prog: tuple, w: int) -> int:
    """The notification that ends the message WR w belongs to (0: none)."""
    for x in prog[w - 1:]:
        if x.note > 0:
            return int(x.note)
    return 0


def skip(s: State, d: DesignRecord, w: int) -> bool:
    """The design's replay filter: is outstanding WR w known to have executed?"""
    prog = s.program
    if d.skip == "none":
        return False
    if d.skip == "counter":
        return 0 < prog[w - 1].note <= s.peerCtr[0]
    if d.skip == "prefix":
        return any(v >= w and 0 < prog[v - 1].note <= s.peerCtr[0] for v in s.pending)
    if d.skip == "psn":
        # w's PSN on the default QP is below the responder NIC's expected PSN.
        return any(v == w and k < s.epsn[0] for k, v in enumerate(s.sq[0], 1))
    if d.skip == "flag":
        msg = message_of(prog, w)
        return msg > 0 and any(e.wr == note_wr(prog, msg) for e in notes_taken(s))
    raise ValueError(f"unknown replay filter {d.skip!r}")


def replay(s: State, d: DesignRecord) -> State | None:
    """Step 4: re-post A's outstanding WRs on the backup QP in post order, except those the
    filter skips; a skipped signaled WR completes as a success."""
    if s.layer[0] != FALLBACK or not s.sentCtr[0] or s.peerCtr[0] < 0 or s.replayed[0]:
        return None
    flags = [(w, skip(s, d, w)) for w in s.pending]
    keep = tuple(w for w, skipped in flags if not skipped)
    prog = s.program
    done = tuple(Cqe(w, 0, SUCCESS, 0) for w, skipped in flags
                 if skipped and prog[w - 1].signaled)
    cq = s.cq
    if s.qp[0][1] == ERR:
        cq = set_in(cq, 0, 1, cq[0][1] + tuple(Cqe(w, 0, FLUSH, 0) for w in keep))
    return s._replace(sq=set_at(s.sq, 1, s.sq[1] + keep), cq=cq,
                      buffered=set_at(s.buffered, 0, s.buffered[0] + done), pending=keep,
                      replayed=set_at(s.replayed, 0, True),
                      queried=s.queried or d.readsResponder)


def reconnect(s: State, d: DesignRecord, b: Constants) -> State | None:
    """Step 5a: the default path is healthy again: reconnect its QP pair (both ends start
    afresh), probe it, and wait for the fence."""
    if not (d.failBack and b.recover and s.layer[0] == FALLBACK and s.replayed[0]
            and path_healthy(s, 1)):
        return None
    return s._replace(
        qp=((RTS, s.qp[0][1]), (RTS, s.qp[1][1])), sq=set_at(s.sq, 0, ()),
        rq=set_at(s.rq, 0, ()), cq=(((), s.cq[0][1]), ((), s.cq[1][1])),
        wire=set_at(s.wire, 0, NO_WIRE), una=set_at(s.una, 0, 1), nxt=set_at(s.nxt, 0, 1),
        retry=set_at(s.retry, 0, b.max_retries), epsn=set_at(s.epsn, 0, 1),
        saved=set_at(s.saved, 0, frozenset()), layer=set_at(s.layer, 0, WAIT_SIGNALED))


def release(s: State) -> State | None:
    """Step 5b: the fence completed on the backup path: notify B on the default path alone
    (a dead NIC sends nothing) and release the held WRs."""
    if s.layer[0] != WAIT_DRAINED or s.fence in s.pending:
        return None
    wire = s.wire
    if s.nic[0][0] and s.qp[0][0] == RTS:
        wire = push(s.link, wire, 0, 0, Ctl("failback", 0))
    return s._replace(wire=wire, layer=set_at(s.layer, 0, DEFAULT), fence=0,
                      sentCtr=set_at(s.sentCtr, 0, False), peerCtr=set_at(s.peerCtr, 0, -1),
                      replayed=set_at(s.replayed, 0, False))


def progress_all(s: State, d: DesignRecord, b: Constants, host: str) -> list[State]:
    """Every successor of Progress(host): one per enabled disjunct, as TLC generates them.
    The spec says at most one is enabled at a time; `progress` relies on it."""
    if not d.failover:
        return []
    h = HOST[host]
    out = []
    if s.layer[h] == DEFAULT and s.peerCtr[h] >= 0:  # woken by the peer's counter
        out.append(trigger(s, h, d, FLUSH))
    for step in (handshake(s, h),) + ((replay(s, d), reconnect(s, d, b), release(s))
                                      if h == 0 else ()):
        if step is not None:
            out.append(step)
    return out


class Nondeterministic(Exception):
    """An event with more than one successor: the spec's determinism claim is broken."""


def progress(s: State, d: DesignRecord, b: Constants, host: str) -> State | None:
    succ = progress_all(s, d, b, host)
    if len(succ) > 1:
        raise Nondeterministic(f"Progress({host}) has {len(succ)} enabled steps")
    return succ[0] if succ else None


def deliver_control(s: State, d: DesignRecord, b: Constants, p: int,
                    direction: str) -> State | None:
    """A control message arrives at a live QP: the peer's counter, or the fail-back notice
    on which B holds the backup CQ's good completions, drops the rest of that CQ, and
    reposts on the default QP every receive WR still owed to its application (those on
    the backup QP, and those the backup NIC flushed if it failed meanwhile)."""
    i, j = p - 1, DIR[direction]
    ch = s.wire[i][j]
    if not ch or ch[0].kind != "ctl":
        return None
    m = ch[0]
    assert isinstance(m, Ctl)
    h = 1 if j == 0 else 0
    rest = set_in(s.wire, i, j, ch[1:])
    alive = s.nic[h][i] and s.qp[h][i] == RTS
    if alive and m.what == "counter":
        return s._replace(wire=rest, peerCtr=set_at(s.peerCtr, h, m.count))
    if alive and m.what == "failback" and s.layer[1] == FALLBACK:
        good = good_prefix(s.cq[1][1])
        recvs = {c.recv for c in good}
        owed = tuple(r for r in s.rpend if r not in recvs and r not in s.rq[0])
        return s._replace(
            wire=rest, rq=(s.rq[0] + owed, ()),
            cq=set_in(s.cq, 1, 1, ()),
            buffered=set_at(s.buffered, 1, s.buffered[1] + good),
            recvDone=s.recvDone + len(good), rpend=tuple(r for r in s.rpend if r not in recvs),
            layer=set_at(s.layer, 1, DEFAULT), sentCtr=set_at(s.sentCtr, 1, False),
            peerCtr=set_at(s.peerCtr, 1, -1))
    return s._replace(wire=rest)
