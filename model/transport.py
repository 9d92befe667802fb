"""spec/RCTransport.tla: each host's requester and responder on one path, and the wire.

Each action takes (state, design, bound, *event arguments) and returns the successor, or
None when the action is not enabled. Indices: `h` the sending host's, `g` the responding
host's, `i` is path - 1, `j` the direction index (a host sends in direction `h`: A in AtoB,
B in BtoA; direction `j` delivers to host 1 - j).
"""

from __future__ import annotations

from shift.model.config import Constants, DesignRecord
from shift.model.state import (
    ATOMICS,
    DIR,
    FLUSH,
    HOST,
    LOC_PROT,
    REM_ACCESS,
    RETRY_EXC,
    RETURNS,
    RNR_FOREVER,
    RNR_RETRY_EXC,
    RTS,
    SUCCESS,
    TWO_SIDED,
    WAIT_DRAINED,
    WRITERS,
    Ack,
    Cqe,
    Nak,
    Packet,
    Req,
    Rnr,
    State,
    Wire,
    applied,
    incarnation_of,
    peer,
    set_in,
)


def push(link: tuple[bool, bool], wire: Wire, i: int, j: int, m: Packet) -> Wire:
    """State.tla's Push: put m on path i+1 in direction j; a dead link loses it."""
    if not link[i]:
        return wire
    return set_in(wire, i, j, wire[i][j] + (m,))


def complete(s: State, h: int, i: int, es: tuple[Cqe, ...]) -> dict[str, object]:
    """RCTransport.tla's Complete(h, p, es): h's NIC makes the completions es on path
    i+1's CQ, written behind (and with) the receive completions it had not yet written.
    The fields to replace."""
    return {"cq": set_in(s.cq, h, i, s.cq[h][i] + s.unwritten[h][i] + es),
            "unwritten": set_in(s.unwritten, h, i, ())}


def failed_at(s: State, h: int, i: int, k: int, status: str) -> tuple[Cqe, ...]:
    """RCTransport.tla's FailedAt(h, p, k, status): the CQEs of h's QP on path i+1 entering
    the error state because its WR at PSN k failed: in post order, the unacknowledged WRs
    before it flushed, it with status, every later one flushed, then every receive WR."""
    q, una = s.sq[h][i], s.una[h][i]
    return (tuple(Cqe(w, 0, FLUSH, 0) for w in q[una - 1:k - 1]) + (Cqe(q[k - 1], 0, status, 0),)
            + tuple(Cqe(w, 0, FLUSH, 0) for w in q[k:])
            + tuple(Cqe(0, r, FLUSH, 0) for r in s.rq[h][i]))


def transmit(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> State | None:
    """Transmit(h, p): h's NIC processes the next request of path p's send queue: sends it,
    or, when its lkey is bad, fails it with LOC_PROT_ERR and moves the QP to the error
    state (held on path 1 while h's layer waits for the fence to drain)."""
    h, i = HOST[host], p - 1
    if s.qp[h][i] != RTS:
        return None
    n, q = s.nxt[h][i], s.sq[h][i]
    if n > len(q) or (p == 1 and s.sendMode[h] == WAIT_DRAINED):
        return None
    if s.program[h][q[n - 1] - 1].key == "LKEY":
        return s._replace(qp=set_in(s.qp, h, i, "ERR"), rq=set_in(s.rq, h, i, ()),
                          **complete(s, h, i, failed_at(s, h, i, n, LOC_PROT)))
    return s._replace(wire=push(s.link, s.wire, i, h, Req(n, q[n - 1], incarnation_of(s, h, i))),
                      nxt=set_in(s.nxt, h, i, n + 1))


def _execute(s: State, g: int, i: int, w: int, psn: int, staged: bool, ack_first: bool,
             rest: Wire) -> State:
    """Execute(g, p, w, psn, staged, rest): host g's responder executes the request for
    its peer's WR w with the expected PSN. With ack_first (AckBeforeCqe) the receive
    completion of a notification is not yet in host memory: unwritten."""
    src = peer(g)
    x = s.program[src][w - 1]
    dup = staged and s.execs[src][w - 1] > 0  # Staging: a copy already made, by sequence number
    mem_g = s.mem[g]
    old = 0 if x.region == 0 else mem_g[x.region - 1]
    apply = not dup and x.op in WRITERS and x.region != 0
    mem = set_in(s.mem, g, x.region - 1, applied(x, old)) if apply else s.mem
    execs = s.execs if dup else set_in(s.execs, src, w - 1, s.execs[src][w - 1] + 1)
    copies = s.copies + 1 if staged and not dup else s.copies
    rq, bufs = s.rq, s.bufs
    cqs: dict[str, object] = {}
    if x.op in TWO_SIDED and not dup:
        # Respond ruled out receiver-not-ready, so a receive WR is there to consume.
        head = rq[g][i][0]
        if x.op == "SEND":  # the payload lands in that receive WR's buffer
            bufs = set_in(bufs, g, head - 1, x.value)
        rq = set_in(rq, g, i, rq[g][i][1:])
        cqe = Cqe(w, head, SUCCESS, 0)
        cqs = ({"unwritten": set_in(s.unwritten, g, i, s.unwritten[g][i] + (cqe,))}
               if ack_first else complete(s, g, i, (cqe,)))
    saved = (set_in(s.saved, g, i, s.saved[g][i] | {(psn, old)}) if x.op in ATOMICS
             else s.saved)
    val = old if x.op in RETURNS else 0
    return s._replace(mem=mem, bufs=bufs, execs=execs, copies=copies, rq=rq, **cqs,
                      saved=saved, epsn=set_in(s.epsn, g, i, s.epsn[g][i] + 1),
                      wire=push(s.link, rest, i, g, Ack(psn, val, incarnation_of(s, g, i))))


def duplicate_val(s: State, g: int, i: int, w: int, psn: int) -> int:
    """DuplicateVal(g, p, w, psn): what a duplicate request is answered with: a READ
    re-reads memory, an atomic returns its saved result (TLC's CHOOSE takes the least;
    there is only one)."""
    x = s.program[peer(g)][w - 1]
    if x.op == "READ":
        return s.mem[g][x.region - 1]
    if x.op in ATOMICS:
        vals = [v for (q, v) in s.saved[g][i] if q == psn]
        if not vals:
            raise ValueError(f"DuplicateVal: no saved result for PSN {psn} on path {i + 1}")
        return min(vals)
    return 0


def _remote_access(s: State, g: int, i: int, m: Req, rest: Wire) -> State:
    """RemoteAccess(g, p, m, rest): g's responder finds m's rkey bad: it executes nothing,
    NAKs m and moves its QP to the error state (its own WRs in flight there and its receive
    WRs flushed)."""
    q, una = s.sq[g][i], s.una[g][i]
    flushed = (tuple(Cqe(w, 0, FLUSH, 0) for w in q[una - 1:])
               + tuple(Cqe(0, r, FLUSH, 0) for r in s.rq[g][i]))
    return s._replace(wire=push(s.link, rest, i, g, Nak(m.psn, incarnation_of(s, g, i))),
                      qp=set_in(s.qp, g, i, "ERR"), rq=set_in(s.rq, g, i, ()),
                      **complete(s, g, i, flushed))


def _respond(s: State, g: int, i: int, m: Req, d: DesignRecord, b: Constants,
             rest: Wire) -> State:
    """Respond(g, p, m, staged, rest): execute the expected PSN, re-ACK a duplicate
    without executing it, RNR-NAK a notification that finds no receive WR (RnrNak; else
    discard it), discard a request ahead of it or any on a dead end."""
    src = peer(g)
    x = s.program[src][m.wr - 1]
    e = s.epsn[g][i]
    staged = d.staged
    rnr = x.op in TWO_SIDED and not s.rq[g][i] and not (staged and s.execs[src][m.wr - 1] > 0)
    if (not (s.nic[g][i] and s.qp[g][i] == RTS) or m.psn > e
            or (m.psn == e and rnr and not b.rnr_nak)):
        return s._replace(wire=rest)
    if m.psn == e and rnr:
        return s._replace(wire=push(s.link, rest, i, g, Rnr(m.psn, incarnation_of(s, g, i))))
    if m.psn == e and x.key == "RKEY":
        return _remote_access(s, g, i, m, rest)
    if m.psn == e:
        return _execute(s, g, i, m.wr, m.psn, staged, b.ack_before_cqe, rest)
    ack = Ack(m.psn, duplicate_val(s, g, i, m.wr, m.psn), incarnation_of(s, g, i))
    return s._replace(wire=push(s.link, rest, i, g, ack))


def _acknowledge(s: State, h: int, i: int, m: Ack | Nak | Rnr, b: Constants,
                 rest: Wire) -> State:
    """Acknowledge(h, p, m): h's requester takes a cumulative ACK: every WR up to its PSN
    is complete; the signaled ones get a successful CQE. A NAK or an RNR NAK acknowledges
    every WR before its PSN. At a NAK the WR fails with REM_ACCESS_ERR and the QP enters
    the error state (later WRs and the receive WRs flushed); at an RNR NAK the requester
    goes back to the WR while RNR retries are left (or for ever), else fails it with
    RNR_RETRY_EXC_ERR the same way. With ImplicitNak an ACK past a READ or atomic is an
    implicit NAK of it (`_implicit_nak`). Progress renews both retry counts. A QP in the
    error state ignores all three."""
    una = s.una[h][i]
    if s.qp[h][i] != RTS or m.psn < una:
        return s._replace(wire=rest)
    q, prog = s.sq[h][i], s.program[h]
    r = _implicit_nak_at(s, h, i, m, b)
    if r:
        return _implicit_nak(s, h, i, r, b, rest)
    if isinstance(m, Ack):
        last = q[m.psn - 1]
        done = tuple(Cqe(w, 0, SUCCESS, m.val if w == last else 0)
                     for w in q[una - 1:m.psn] if prog[w - 1].signaled)
        return s._replace(wire=rest, **(complete(s, h, i, done) if done else {}),
                          una=set_in(s.una, h, i, m.psn + 1),
                          retry=set_in(s.retry, h, i, b.max_retries),
                          rnrLeft=set_in(s.rnrLeft, h, i, b.rnr_retry))
    good = tuple(Cqe(w, 0, SUCCESS, 0) for w in q[una - 1:m.psn - 1] if prog[w - 1].signaled)
    progress = m.psn > una
    rnrs = b.rnr_retry if progress else s.rnrLeft[h][i]
    if isinstance(m, Rnr) and (b.rnr_retry == RNR_FOREVER or rnrs > 0):
        left = RNR_FOREVER if b.rnr_retry == RNR_FOREVER else rnrs - 1
        return s._replace(wire=rest, **(complete(s, h, i, good) if good else {}),
                          una=set_in(s.una, h, i, m.psn), nxt=set_in(s.nxt, h, i, m.psn),
                          retry=set_in(s.retry, h, i, b.max_retries) if progress else s.retry,
                          rnrLeft=set_in(s.rnrLeft, h, i, left))
    status = REM_ACCESS if isinstance(m, Nak) else RNR_RETRY_EXC
    failed = ((Cqe(q[m.psn - 1], 0, status, 0),)
              + tuple(Cqe(w, 0, FLUSH, 0) for w in q[m.psn:])
              + tuple(Cqe(0, r, FLUSH, 0) for r in s.rq[h][i]))
    return s._replace(wire=rest, qp=set_in(s.qp, h, i, "ERR"), rq=set_in(s.rq, h, i, ()),
                      **complete(s, h, i, good + failed))


def _implicit_nak_at(s: State, h: int, i: int, m: Ack | Nak | Rnr, b: Constants) -> int:
    """ImplicitNakAt(h, p, m): the PSN of the first READ or atomic an ACK passes (its
    response was lost), or 0."""
    if not (b.implicit_nak and isinstance(m, Ack)):
        return 0
    q, prog = s.sq[h][i], s.program[h]
    return next((k for k in range(s.una[h][i], m.psn) if prog[q[k - 1] - 1].op in RETURNS), 0)


def _implicit_nak(s: State, h: int, i: int, r: int, b: Constants, rest: Wire) -> State:
    """The implicit NAK of READ or atomic r: the WRs before it complete; the requester
    goes back to it spending a retry (renewed first if the WRs before it were progress), or
    fails it with RETRY_EXC_ERR, the QP to the error state, when none is left."""
    una, q, prog = s.una[h][i], s.sq[h][i], s.program[h]
    good = tuple(Cqe(w, 0, SUCCESS, 0) for w in q[una - 1:r - 1] if prog[w - 1].signaled)
    left = b.max_retries if r > una else s.retry[h][i]
    rnr = set_in(s.rnrLeft, h, i, b.rnr_retry) if r > una else s.rnrLeft
    if left > 0:
        return s._replace(wire=rest, **(complete(s, h, i, good) if good else {}),
                          una=set_in(s.una, h, i, r), nxt=set_in(s.nxt, h, i, r),
                          retry=set_in(s.retry, h, i, left - 1), rnrLeft=rnr)
    failed = ((Cqe(q[r - 1], 0, RETRY_EXC, 0),) + tuple(Cqe(w, 0, FLUSH, 0) for w in q[r:])
              + tuple(Cqe(0, x, FLUSH, 0) for x in s.rq[h][i]))
    return s._replace(wire=rest, qp=set_in(s.qp, h, i, "ERR"), rq=set_in(s.rq, h, i, ()),
                      rnrLeft=rnr, **complete(s, h, i, good + failed))


def deliver_packet(s: State, d: DesignRecord, b: Constants, p: int, direction: str) -> State | None:
    """DeliverPacket(p, d): the request, ACK or NAK at the head of a channel arrives at host
    To(d): its responder answers a request, its requester takes an ACK or a NAK. One of
    another incarnation than the receiving QP's is discarded."""
    i, j = p - 1, DIR[direction]
    ch = s.wire[i][j]
    if not ch or ch[0].kind == "ctl":
        return None
    rest = set_in(s.wire, i, j, ch[1:])
    m = ch[0]
    to = 1 - j
    if m.incarnation != incarnation_of(s, to, i):
        return s._replace(wire=rest)
    if isinstance(m, Req):
        return _respond(s, to, i, m, d, b, rest)
    assert isinstance(m, Ack | Nak | Rnr)
    return _acknowledge(s, to, i, m, b, rest)


def drop(s: State, d: DesignRecord, b: Constants, p: int, direction: str) -> State | None:
    """Drop(p, d): the wire loses the packet at the head of a channel: a request or an ACK
    on a path that may fail, or (with CtlLoss) a control message of the layer on any
    path."""
    i, j = p - 1, DIR[direction]
    ch = s.wire[i][j]
    if s.drops >= b.max_drops or not ch:
        return None
    if not (b.ctl_loss if ch[0].kind == "ctl" else p in b.fault_paths):
        return None
    return s._replace(wire=set_in(s.wire, i, j, ch[1:]), drops=s.drops + 1)


def timeout(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> State | None:
    """Timeout(h, p): h's retransmission timer on path p fires once nothing is left in
    flight there: go back to the oldest unacknowledged PSN while retries remain, else
    RETRY_EXC_ERR for it, the QP to the error state, WR_FLUSH_ERR for every later WR and
    every receive WR of the QP."""
    h, i = HOST[host], p - 1
    una = s.una[h][i]
    if s.qp[h][i] != RTS or not una < s.nxt[h][i] or s.wire[i][0] or s.wire[i][1]:
        return None
    if s.retry[h][i] > 0:
        return s._replace(nxt=set_in(s.nxt, h, i, una),
                          retry=set_in(s.retry, h, i, s.retry[h][i] - 1))
    q = s.sq[h][i]
    failed = ((Cqe(q[una - 1], 0, RETRY_EXC, 0),) + tuple(Cqe(w, 0, FLUSH, 0) for w in q[una:])
              + tuple(Cqe(0, r, FLUSH, 0) for r in s.rq[h][i]))
    return s._replace(qp=set_in(s.qp, h, i, "ERR"), rq=set_in(s.rq, h, i, ()),
                      **complete(s, h, i, failed))


def write_cqe(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> State | None:
    """WriteCqe(h, p): h's live NIC p writes the oldest receive completion it made and
    ACKed into host memory (AckBeforeCqe)."""
    h, i = HOST[host], p - 1
    waiting = s.unwritten[h][i]
    if not (s.nic[h][i] and waiting):
        return None
    return s._replace(cq=set_in(s.cq, h, i, s.cq[h][i] + waiting[:1]),
                      unwritten=set_in(s.unwritten, h, i, waiting[1:]))
