"""spec/RCTransport.tla: A's requester and B's responder on one path, and the wire.

Each action takes (state, design, bound, *event arguments) and returns the successor, or
None when the action is not enabled. Indices: `i` is path - 1, `j` the direction index.
"""

from __future__ import annotations

from shift.model.config import Constants, DesignRecord
from shift.model.state import (
    ATOMICS,
    DIR,
    FLUSH,
    RETRY_EXC,
    RETURNS,
    RTS,
    SUCCESS,
    TWO_SIDED,
    WAIT_DRAINED,
    WRITERS,
    Ack,
    Channel,
    Cqe,
    Packet,
    Req,
    State,
    applied,
    set_at,
    set_in,
)

Wire = tuple[tuple[Channel, Channel], tuple[Channel, Channel]]


def push(link: tuple[bool, bool], wire: Wire, i: int, j: int, m: Packet) -> Wire:
    """State.tla's Push: put m on path i+1 in direction j; a dead link loses it."""
    if not link[i]:
        return wire
    return set_in(wire, i, j, wire[i][j] + (m,))


def transmit(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> State | None:
    """A's NIC sends the next request of path p's send queue (held on path 1 while the
    layer waits for the fence to drain)."""
    i = p - 1
    if host != "A" or s.qp[0][i] != RTS:
        return None
    n, q = s.nxt[i], s.sq[i]
    if n > len(q) or (p == 1 and s.layer[0] == WAIT_DRAINED):
        return None
    return s._replace(wire=push(s.link, s.wire, i, 0, Req(n, q[n - 1])),
                      nxt=set_at(s.nxt, i, n + 1))


def _execute(s: State, i: int, w: int, psn: int, staged: bool, rest: Wire) -> State:
    """RCTransport.tla's Execute: the request with the expected PSN takes effect."""
    x = s.program[w - 1]
    dup = staged and s.execs[w - 1] > 0  # Staging: a copy already made, by sequence number
    old = 0 if x.region == 0 else s.mem[x.region - 1]
    apply = not dup and x.op in WRITERS and x.region != 0
    mem = set_at(s.mem, x.region - 1, applied(x, old)) if apply else s.mem
    execs = s.execs if dup else set_at(s.execs, w - 1, s.execs[w - 1] + 1)
    copies = s.copies + 1 if staged and not dup else s.copies
    rq, cq, bufs = s.rq, s.cq, s.bufs
    if x.op in TWO_SIDED and not dup:
        # Respond ruled out receiver-not-ready, so a receive WR is there to consume.
        head = rq[i][0]
        if x.op == "SEND":  # the payload lands in that receive WR's buffer
            bufs = set_at(bufs, head - 1, x.value)
        rq = set_at(rq, i, rq[i][1:])
        cq = set_in(cq, 1, i, cq[1][i] + (Cqe(w, head, SUCCESS, 0),))
    saved = set_at(s.saved, i, s.saved[i] | {(psn, old)}) if x.op in ATOMICS else s.saved
    val = old if x.op in RETURNS else 0
    return s._replace(mem=mem, bufs=bufs, execs=execs, copies=copies, rq=rq, cq=cq,
                      saved=saved, epsn=set_at(s.epsn, i, s.epsn[i] + 1),
                      wire=push(s.link, rest, i, 1, Ack(psn, val)))


def duplicate_val(s: State, i: int, w: int, psn: int) -> int:
    """What a duplicate request is answered with: a READ re-reads memory, an atomic
    returns its saved result (TLC's CHOOSE takes the least; there is only one)."""
    x = s.program[w - 1]
    if x.op == "READ":
        return s.mem[x.region - 1]
    if x.op in ATOMICS:
        vals = [v for (q, v) in s.saved[i] if q == psn]
        if not vals:
            raise ValueError(f"DuplicateVal: no saved result for PSN {psn} on path {i + 1}")
        return min(vals)
    return 0


def _respond(s: State, i: int, m: Req, staged: bool, rest: Wire) -> State:
    """B's responder: execute the expected PSN, re-ACK a duplicate without executing it,
    discard a request ahead of it, one that finds no receive WR, or any on a dead end."""
    x = s.program[m.wr - 1]
    e = s.epsn[i]
    rnr = x.op in TWO_SIDED and not s.rq[i] and not (staged and s.execs[m.wr - 1] > 0)
    if not (s.nic[1][i] and s.qp[1][i] == RTS) or m.psn > e or (m.psn == e and rnr):
        return s._replace(wire=rest)
    if m.psn == e:
        return _execute(s, i, m.wr, m.psn, staged, rest)
    return s._replace(wire=push(s.link, rest, i, 1, Ack(m.psn, duplicate_val(s, i, m.wr, m.psn))))


def _acknowledge(s: State, i: int, m: Ack, max_retries: int, rest: Wire) -> State:
    """A's requester takes a cumulative ACK: every WR up to its PSN is complete; the
    signaled ones get a successful CQE. A QP in the error state ignores it."""
    una = s.una[i]
    if s.qp[0][i] != RTS or m.psn < una:
        return s._replace(wire=rest)
    q, prog = s.sq[i], s.program
    last = q[m.psn - 1]
    done = tuple(Cqe(w, 0, SUCCESS, m.val if w == last else 0)
                 for w in q[una - 1:m.psn] if prog[w - 1].signaled)
    return s._replace(wire=rest, cq=set_in(s.cq, 0, i, s.cq[0][i] + done),
                      una=set_at(s.una, i, m.psn + 1), retry=set_at(s.retry, i, max_retries))


def deliver_packet(s: State, d: DesignRecord, b: Constants, p: int, direction: str) -> State | None:
    """The request or ACK at the head of a channel arrives (DeliverPacket)."""
    i, j = p - 1, DIR[direction]
    ch = s.wire[i][j]
    if not ch or ch[0].kind == "ctl":
        return None
    rest = set_in(s.wire, i, j, ch[1:])
    m = ch[0]
    if j == 0:
        assert isinstance(m, Req)
        return _respond(s, i, m, d.staged, rest)
    assert isinstance(m, Ack)
    return _acknowledge(s, i, m, b.max_retries, rest)


def drop(s: State, d: DesignRecord, b: Constants, p: int, direction: str) -> State | None:
    """The wire loses the request or ACK at the head of a channel of a path that may fail;
    control messages ride a reliable QP and are not lost this way."""
    i, j = p - 1, DIR[direction]
    ch = s.wire[i][j]
    if p not in b.fault_paths or s.drops >= b.max_drops or not ch or ch[0].kind == "ctl":
        return None
    return s._replace(wire=set_in(s.wire, i, j, ch[1:]), drops=s.drops + 1)


def timeout(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> State | None:
    """A's retransmission timer on path p fires once nothing is left in flight: go back to
    the oldest unacknowledged PSN while retries remain, else RETRY_EXC_ERR for it, the QP
    to the error state and WR_FLUSH_ERR for every later WR."""
    i = p - 1
    if host != "A" or s.qp[0][i] != RTS or not s.una[i] < s.nxt[i] or s.wire[i][0] \
            or s.wire[i][1]:
        return None
    una = s.una[i]
    if s.retry[i] > 0:
        return s._replace(nxt=set_at(s.nxt, i, una), retry=set_at(s.retry, i, s.retry[i] - 1))
    q = s.sq[i]
    failed = (Cqe(q[una - 1], 0, RETRY_EXC, 0),) + tuple(Cqe(w, 0, FLUSH, 0) for w in q[una:])
    return s._replace(qp=set_in(s.qp, 0, i, "ERR"), cq=set_in(s.cq, 0, i, s.cq[0][i] + failed))
