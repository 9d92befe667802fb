"""spec/Failover.tla, the applications: A posts its program's WRs, B posts one receive WR
per notification and makes its stores, and either polls through the failover layer."""

from __future__ import annotations

from shift.model.config import Constants, DesignRecord
from shift.model.layer import trigger
from shift.model.state import (
    DEFAULT,
    ERR,
    ERROR,
    FALLBACK,
    FLUSH,
    HOST,
    SUCCESS,
    WAIT_DRAINED,
    WAIT_SIGNALED,
    WRITERS,
    Cqe,
    RcvSeen,
    SndSeen,
    State,
    notes_before,
    notes_taken,
    num_notes,
    set_at,
    set_in,
)


def can_post(s: State, w: int) -> bool:
    """NCCL's flow control: a notification only once B posted its receive WR; a WR writing
    a region only once B took every notification posted before it (buffer reuse)."""
    x = s.program[w - 1]
    if x.note > 0 and s.recvPosted < x.note:
        return False
    return not (x.op in WRITERS and x.region != 0
                and len(notes_taken(s)) < notes_before(s.program, w - 1))


def _post_on(s: State, p: int, w: int) -> State:
    """PostOn: append w to A's send queue of path p; a QP in the error state flushes it."""
    i = p - 1
    s = s._replace(sq=set_at(s.sq, i, s.sq[i] + (w,)))
    if s.qp[0][i] == ERR:
        return s._replace(cq=set_in(s.cq, 0, i, s.cq[0][i] + (Cqe(w, 0, FLUSH, 0),)))
    return s


def post_send(s: State, d: DesignRecord, b: Constants, host: str, wr: int) -> State | None:
    """A's application posts its next WR (the event names it: wr = posted + 1); the layer
    routes it by its state."""
    w = s.posted + 1
    if host != "A" or wr != w or s.posted >= len(s.program) or not can_post(s, w):
        return None
    mode = s.layer[0]
    if mode == ERROR:  # failed at once, behind every completion still to be polled
        return s._replace(posted=w, cq=set_in(s.cq, 0, 1, s.cq[0][1] + (Cqe(w, 0, FLUSH, 0),)))
    s = s._replace(posted=w, pending=s.pending + (w,))
    if mode in (DEFAULT, WAIT_DRAINED):
        return _post_on(s, 1, w)
    if mode == FALLBACK:
        # Held by the layer until the replay, then straight to the backup QP.
        return _post_on(s, 2, w) if s.replayed[0] else s
    if mode == WAIT_SIGNALED:
        s = _post_on(s, 2, w)
        if s.program[w - 1].signaled:  # the fence: later WRs wait on the default QP
            return s._replace(layer=set_at(s.layer, 0, WAIT_DRAINED), fence=w)
        return s
    raise ValueError(f"PostSend: no CASE arm for layer {mode!r}")


def post_recv(s: State, d: DesignRecord, b: Constants, host: str, recv: int) -> State | None:
    """B's application posts its next receive WR: on the default QP, on the backup QP
    once the layer reposted there, or held until it does."""
    r = s.recvPosted + 1
    if host != "B" or recv != r or s.recvPosted >= num_notes(s.program):
        return None
    s = s._replace(recvPosted=r, rpend=s.rpend + (r,))
    if s.layer[1] == DEFAULT:
        i = 0
    elif s.sentCtr[1]:
        i = 1
    else:
        return s
    if s.qp[1][i] == ERR:
        return s._replace(cq=set_in(s.cq, 1, i, s.cq[1][i] + (Cqe(0, r, FLUSH, 0),)))
    return s._replace(rq=set_at(s.rq, i, s.rq[i] + (r,)))


def app_write(s: State, d: DesignRecord, b: Constants, host: str, region: int,
              value: int) -> State | None:
    """B's application makes its next store (the event names it), once it took the
    notifications the store waits for (AppWrite)."""
    if host != "B" or s.stored >= len(s.stores):
        return None
    x = s.stores[s.stored]
    if (region, value) != (x.region, x.value) or len(notes_taken(s)) < x.after:
        return None
    return s._replace(mem=set_at(s.mem, region - 1, value), stored=s.stored + 1)


def _see(s: State, h: int, c: Cqe) -> State:
    """The application takes c: A sees [wr, status, val]; B also reads memory and the
    receive WR's buffer (SeeA, SeeB)."""
    if h == 0:
        return s._replace(sndSeen=s.sndSeen + (SndSeen(c.wr, c.status, c.val),))
    return s._replace(rcvSeen=s.rcvSeen + (RcvSeen(c.wr, c.recv, c.status, s.mem,
                                                   s.bufs[c.recv - 1]),))


def poll_cq(s: State, d: DesignRecord, b: Constants, host: str) -> State | None:
    """The application polls; the layer answers from what it holds, else from the active
    QP's CQ. An error from the default QP starts a failover instead of reaching the
    application; one from the backup QP reaches it (and puts A's layer in Error)."""
    h = HOST[host]
    buf = s.buffered[h]
    if buf:
        return _see(s, h, buf[0])._replace(buffered=set_at(s.buffered, h, buf[1:]))
    i = 0 if s.layer[h] == DEFAULT else 1
    q = s.cq[h][i]
    if not q:
        return None
    c = q[0]
    failed = c.status != SUCCESS
    if failed and d.failover and s.layer[h] == DEFAULT:
        return trigger(s, h, d, c.status)
    cq = set_in(s.cq, h, i, q[1:])
    layer = set_at(s.layer, 0, ERROR) if failed and d.failover and h == 0 else s.layer
    if h == 0:
        pending = (tuple(w for w in s.pending if w != c.wr) if failed
                   else tuple(w for w in s.pending if w > c.wr))
        return _see(s, 0, c)._replace(cq=cq, layer=layer, pending=pending)
    return _see(s, 1, c)._replace(cq=cq, layer=layer,
                                  rpend=tuple(r for r in s.rpend if r != c.recv),
                                  recvDone=s.recvDone + (0 if failed else 1))
