"""spec/Failover.tla, the applications: each host posts its program's WRs to the peer,
one receive WR per notification of the peer's program, and its own stores, and polls
through its failover layer.

Each event function takes (state, design, bound, *event arguments) and returns the
successor, or None when the event is not enabled; `h` is a host index (`HOST`).
"""

from __future__ import annotations

from shift.model.config import Constants, DesignRecord
from shift.model.layer import acked_with, app_error, app_fault, app_owned, move_back, trigger
from shift.model.state import (
    DEFAULT,
    ERROR,
    FALLBACK,
    FLUSH,
    HOST,
    RTS,
    SPEAKING,
    SUCCESS,
    WAIT_DRAINED,
    WAIT_SIGNALED,
    WRITERS,
    Cqe,
    RcvSeen,
    SndSeen,
    State,
    flushes_at_once,
    notes_before,
    num_notes,
    peer,
    set_at,
    set_in,
    taken,
)


def can_post(s: State, h: int, w: int) -> bool:
    """CanPost(h, w), NCCL's flow control: a notification only once the peer posted its
    receive WR; a WR writing a region only once the peer took every notification posted
    before it (buffer reuse); a reply only once h took the notifications it waits for."""
    prog = s.program[h]
    x = prog[w - 1]
    if x.note > 0 and s.recvPosted[peer(h)] < x.note:
        return False
    if x.op in WRITERS and x.region != 0 and taken(s, peer(h)) < notes_before(prog, w - 1):
        return False
    return taken(s, h) >= x.after


def _post_on(s: State, h: int, p: int, w: int) -> State:
    """PostOn(h, p, w): append w to h's send queue of path p; a QP in the error state
    flushes it at once (unless its NIC died silently: FlushesAtOnce)."""
    i = p - 1
    s = s._replace(sq=set_in(s.sq, h, i, s.sq[h][i] + (w,)))
    if flushes_at_once(s, h, i):
        return s._replace(cq=set_in(s.cq, h, i, s.cq[h][i] + (Cqe(w, 0, FLUSH, 0),)))
    return s


def held_behind(s: State, h: int, p: int, c: Cqe) -> tuple[int, ...]:
    """HeldBehind(h, p, c): the WRs h's fail-back holds on the default QP behind its
    fence (WaitDrained: never transmitted, no completion anywhere) when c, the fence's
    failure on the backup path, puts the send side in Error; they complete flushed
    behind it. None if the default QP failed meanwhile (its flushes are on its CQ)."""
    if (c.status == SUCCESS or p != 2 or s.sendMode[h] != WAIT_DRAINED
            or s.qp[h][0] != RTS or s.fatal[h][0] != SPEAKING):
        return ()
    return s.sq[h][0][s.nxt[h][0] - 1:]


def post_send(s: State, d: DesignRecord, b: Constants, host: str, wr: int) -> State | None:
    """PostSend(h): h's application posts its next WR (the event names it: wr = posted +
    1); the layer routes it by h's send side."""
    h = HOST[host]
    w = s.posted[h] + 1
    if wr != w or s.posted[h] >= len(s.program[h]) or not can_post(s, h, w):
        return None
    mode = s.sendMode[h]
    posted = set_at(s.posted, h, w)
    if mode == ERROR:  # failed at once, behind every completion still to be polled
        return s._replace(posted=posted,
                          cq=set_in(s.cq, h, 1, s.cq[h][1] + (Cqe(w, 0, FLUSH, 0),)))
    s = s._replace(posted=posted, pending=set_at(s.pending, h, s.pending[h] + (w,)))
    if mode in (DEFAULT, WAIT_DRAINED):
        return _post_on(s, h, 1, w)
    if mode == FALLBACK:
        # Held by the layer until the replay, then straight to the backup QP.
        return _post_on(s, h, 2, w) if s.replayed[h] else s
    if mode == WAIT_SIGNALED:
        s = _post_on(s, h, 2, w)
        if s.program[h][w - 1].signaled:  # the fence: later WRs wait on the default QP
            return s._replace(sendMode=set_at(s.sendMode, h, WAIT_DRAINED),
                              fence=set_at(s.fence, h, w))
        return s
    raise ValueError(f"PostSend: no CASE arm for send side {mode!r}")


def _post_recv_on(s: State, h: int, p: int, r: int) -> State:
    """PostRecvOn(h, p, r): on h's QP of path p; a QP in the error state flushes it
    (unless its NIC died silently: FlushesAtOnce)."""
    i = p - 1
    if flushes_at_once(s, h, i):
        return s._replace(cq=set_in(s.cq, h, i, s.cq[h][i] + (Cqe(0, r, FLUSH, 0),)))
    return s._replace(rq=set_in(s.rq, h, i, s.rq[h][i] + (r,)))


def post_recv(s: State, d: DesignRecord, b: Constants, host: str, recv: int) -> State | None:
    """PostRecv(h): h's application posts its next receive WR: on the default QP, on the
    backup QP once the layer reposted there, or held while it moves them."""
    h = HOST[host]
    r = s.recvPosted[h] + 1
    if recv != r or s.recvPosted[h] >= num_notes(s.program[peer(h)]):
        return None
    s = s._replace(recvPosted=set_at(s.recvPosted, h, r),
                   rpend=set_at(s.rpend, h, s.rpend[h] + (r,)))
    mode = s.recvMode[h]
    if mode == DEFAULT:
        return _post_recv_on(s, h, 1, r)
    if mode == FALLBACK:
        return _post_recv_on(s, h, 2, r)
    return s  # Moving: the handshake reposts it with the others


def app_write(s: State, d: DesignRecord, b: Constants, host: str, region: int,
              value: int) -> State | None:
    """AppWrite(h): h's application makes its next store (the event names it), once it
    took the notifications the store waits for."""
    h = HOST[host]
    n = s.stored[h]
    if n >= len(s.stores[h]):
        return None
    x = s.stores[h][n]
    if (region, value) != (x.region, x.value) or taken(s, h) < x.after:
        return None
    return s._replace(mem=set_in(s.mem, h, region - 1, value), stored=set_at(s.stored, h, n + 1))


def see(s: State, h: int, c: Cqe) -> State:
    """See(h, c): h's application takes c: a send completion [wr, status, val], or a
    receive completion with h's memory and the receive WR's buffer as it reads them."""
    if c.recv > 0:
        seen = RcvSeen(c.wr, c.recv, c.status, s.mem[h], s.bufs[h][c.recv - 1])
        return s._replace(rcvSeen=set_at(s.rcvSeen, h, s.rcvSeen[h] + (seen,)))
    return s._replace(sndSeen=set_at(s.sndSeen, h, s.sndSeen[h] + (SndSeen(c.wr, c.status,
                                                                         c.val),)))


def polls1(s: State, h: int) -> bool:
    """Polls1(h): a side of h completes on the default QP."""
    return s.sendMode[h] == DEFAULT or s.recvMode[h] == DEFAULT


def poll_path(s: State, h: int) -> int:
    """PollPath(h): the backup QP's CQ while a side is off the default path and it has
    entries, else the default QP's."""
    polls2 = s.sendMode[h] != DEFAULT or s.recvMode[h] != DEFAULT
    return 2 if polls2 and s.cq[h][1] else 1


def poll_cq(s: State, d: DesignRecord, b: Constants, host: str) -> State | None:
    """PollCq(h): the application polls; the layer answers from the completions it holds,
    else from the CQ PollPath names. An error from the default QP starts a failover
    instead of reaching the application, unless the QP's first fault is the
    application's (AppError) or was (AppOwned: then it reaches the application); one
    from the backup QP reaches it (and puts a send side in Error). The completion of an
    acked notification a failover replayed (`resent`) the layer drops: the application
    had its success."""
    h = HOST[host]
    buf = s.buffered[h]
    if buf:
        return see(s, h, buf[0])._replace(buffered=set_at(s.buffered, h, buf[1:]))
    p = poll_path(s, h)
    q = s.cq[h][p - 1]
    if (p == 1 and not polls1(s, h)) or not q:
        return None
    c = q[0]
    if c.recv == 0 and c.wr in s.resent[h]:
        return s._replace(cq=set_in(s.cq, h, p - 1, q[1:]),
                          resent=set_at(s.resent, h, s.resent[h] - {c.wr}))
    failed = c.status != SUCCESS
    if failed and d.failover and p == 1 and not app_owned(s, h):
        # The QP's first fault, not the CQE polled: an application error is no path's.
        return app_error(s, h) if app_fault(s, h) else trigger(s, h, d, c.status)
    s = see(s, h, c)._replace(cq=set_in(s.cq, h, p - 1, q[1:]))
    if c.recv > 0:
        s = s._replace(rpend=set_at(s.rpend, h, tuple(r for r in s.rpend[h] if r != c.recv)),
                       recvDone=s.recvDone if failed
                       else set_at(s.recvDone, h, s.recvDone[h] + 1))
        # the last notification a waiting fail-back was owed: the receive side moves back
        waits = s.failbackAt[h]
        return move_back(s, h) if waits and s.recvDone[h] >= waits else s
    held = held_behind(s, h, p, c)
    if held:
        s = s._replace(cq=set_in(s.cq, h, p - 1, s.cq[h][p - 1] + tuple(
                           Cqe(w, 0, FLUSH, 0) for w in held)),
                       sq=set_in(s.sq, h, 0, s.sq[h][0][:s.nxt[h][0] - 1]))
    pending = (tuple(w for w in s.pending[h] if w != c.wr) if failed
               else tuple(w for w in s.pending[h] if w > c.wr))
    # only a success from the default path: a completion the backup path gave cannot have
    # died with the default NIC (F7), and the peer may not have counted it yet (F9)
    acked = s.acked if failed or p != 1 else set_at(
        s.acked, h, acked_with(s, h, d, tuple(w for w in s.pending[h] if w <= c.wr)))
    mode = ERROR if failed and d.failover else s.sendMode[h]
    return s._replace(pending=set_at(s.pending, h, pending), acked=acked,
                      sendMode=set_at(s.sendMode, h, mode))
