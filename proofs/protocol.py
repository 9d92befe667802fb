"""SHIFT's failover layer (spec/Failover.tla) as a Z3 transition relation over an
abstract state, for a symbolic program of N WRs.

Abstraction (docs/proofs.md, "The protocol encoding", says it in full):
- *Transport.* Each path's wire is replaced by what `transport.rc_prefix` proves about it:
  the responder executed a prefix of the path's send queue, each WR once, and the
  requester's acknowledged prefix lies within it. Transmit/Deliver/Drop/Timeout collapse
  into `Exec` (the next request executes), `Ack` (the acknowledged prefix grows to any
  executed point) and `ErrA1` (A's default QP goes to the error state at any moment: a
  timeout with no retries left, or A's NIC failing). A request executes only while both
  ends of its QP are in RTS: at the moment A's default QP enters the error state its
  path's wire is empty (Timeout fires only on an empty wire, NicFail clears it) or B's
  QP is already in the error state (a failover the peer started).
- *Queues as thresholds.* Path 1's send queue is WRs 1..sq1 (A posts in order); B's
  receive WRs are consumed in order, so each queue is a range; the send queue of path 2
  is the set `sq2` (increasing by construction, checked by the history flag `qbad`), A's
  completion queues are what is left above the last polled WR. A completion appended
  below a WR already in a queue would make this encoding inexact: `qbad` records it, and
  every invariant proves `not qbad`.
- *Properties as history flags.* Each property of Properties.tla is about the sequences
  the applications polled; the encoding keeps the last WR A's application saw and the
  number of notifications B's took, and sets `cbad` / `nbad` / `dbad` at the poll that
  breaks CompletionIntegrity / NotificationIntegrity / DataAtNotification. Since `posted`
  and `execs` only grow, "the flag is never set" is exactly the spec's invariant.
- *Control plane.* The layer's counters are lossy packets (CtlLoss): flags for the counter
  in flight each way and its ask field, `asked` per host; a counter may be lost on path 2,
  the handshake timer of a host that asked resends it, and a resend delivered is
  idempotent, answered again if it asks and the receiver sent its own
  (`Actions.lossy_control`, the last actions of the relation).
- *Bound.* One failover: faults on the default path (either NIC, the link, lost
  packets, at any time, any number of retries), the backup path healthy, no fail-back
  (designs.toml's `small` bound, without its limits on drops and retries). One region
  (Workloads.tla has two) and no stores of B's application (StoresOf). Any program of N
  WRs: ops, signaled flags, regions and values are symbolic. One direction: A's WRs to B.
  A two-way run is two runs of this relation, one per direction (each host is the "A" of
  its own WRs); what couples them is that a host fails over as a whole, which `host`
  adds: either side may fail over when its host's default QP is in the error state.

This module is the relation: the replay policies, Init, the actions and Next. The
programs are `programs`, the abstract state and its queues `abstract_state`, the
properties `properties`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import z3
from shift.proofs.abstract_state import (
    DEFAULT,
    ERROR,
    FALLBACK,
    LISTS,
    AbstractState,
    Derived,
    fresh,
    is_first,
)
from shift.proofs.core import conj
from shift.proofs.programs import Program


@dataclass(frozen=True)
class ReplayPolicy:
    """Failover.tla's record D, the fields that matter in this bound: which outstanding
    WRs the replay does not re-post (D.skip), and whether the layer refuses to fail over
    with an atomic outstanding (D.refuseAtomics)."""

    name: str
    skip: str            # "counter" (SHIFT), "prefix" (ShiftPrefix), "none" (NaiveReplay)
    refuse_atomics: bool


SHIFT = ReplayPolicy("Shift", "counter", True)
SHIFT_PREFIX = ReplayPolicy("ShiftPrefix", "prefix", True)
NAIVE = ReplayPolicy("NaiveReplay", "none", False)


def init(p: Program, s: AbstractState) -> z3.BoolRef:
    """Failover.tla's Init, projected."""
    zero = ["posted", "sq1", "ex1", "una1", "pol1", "c1", "polB1", "x2", "a2", "p2", "pB2",
            "rposted", "bh", "bt", "recvDone", "base2", "mem", "sndLast", "taken"]
    cs = [getattr(s, f) == 0 for f in zero]
    cs += [s.layerA == DEFAULT, s.layerB == DEFAULT, s.peerA == -1, s.peerB == -1]
    cs += [s.qpA1, s.qpB1, s.qpA2]
    cs += [z3.Not(getattr(s, f)) for f in ("sentA", "replayed", "sentB", "ctlAB", "ctlBA",
                                           "askAB", "askBA", "askedA", "askedB",
                                           "cbad", "nbad", "dbad", "qbad")]
    for w in range(1, p.n + 1):
        cs += [z3.Not(s.pend[w]), z3.Not(s.buf[w]), z3.Not(s.bok[w]), z3.Not(s.eflush[w]),
               z3.Not(s.sq2[w]), s.execs[w] == 0]
    return conj(cs)


# --------------------------------------------------------------------------------------
# Transitions
# --------------------------------------------------------------------------------------

Updates = dict[str, object]


def frame(s: AbstractState, t: AbstractState, upd: Updates) -> z3.BoolRef:
    cs = []
    for f in fields(AbstractState):
        new = upd.get(f.name, getattr(s, f.name))
        old_t = getattr(t, f.name)
        if f.name in LISTS:
            cs += [old_t[w] == new[w] for w in range(1, len(old_t))]  # type: ignore[index]
        else:
            cs.append(old_t == new)
    return conj(cs)


def _set(xs: list[z3.ExprRef], w: int, v: z3.ExprRef) -> list[z3.ExprRef]:
    return [v if i == w else x for i, x in enumerate(xs)]


class Actions:
    """Every action of the abstract SHIFT system, each as (name, guard, updates)."""

    def __init__(self, p: Program, d: ReplayPolicy, s: AbstractState, t: AbstractState,
                 backup_fails: bool = False) -> None:
        self.p, self.d, self.s, self.t = p, d, s, t
        self.q = Derived(p, s)
        self.backup_fails = backup_fails

    # -- application observations -------------------------------------------------------
    def see_a(self, w: z3.ArithRef, ok: z3.BoolRef) -> Updates:
        s = self.s
        bad = z3.Or(w <= s.sndLast, z3.And(ok, self.q.execs_of(w) == 0))
        return {"sndLast": w, "cbad": z3.Or(s.cbad, bad)}

    def take_b(self, wr: z3.ArithRef, recv: z3.ArithRef) -> Updates:
        s, p = self.s, self.p
        i = s.taken + 1
        nbad = z3.Or(wr != p.note_wr(i), recv != i, i > p.at(p.nb, s.posted))
        expected = p.at(lambda k: p.value_after(max(k - 1, 0)), wr, default=z3.IntVal(0))
        return {"taken": i, "nbad": z3.Or(s.nbad, nbad), "dbad": z3.Or(s.dbad, s.mem != expected)}

    # -- A's application ----------------------------------------------------------------
    def post_send(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        s, p, q = self.s, self.p, self.q
        out = []
        for w in range(1, p.n + 1):
            g = z3.And(s.posted == w - 1, q.can_post(w))
            err = {"posted": w, "eflush": _set(s.eflush, w, z3.BoolVal(True))}
            held = {"posted": w, "pend": _set(s.pend, w, z3.BoolVal(True))}
            on1 = {**held, "sq1": w}
            on2 = {**held, "sq2": _set(s.sq2, w, z3.BoolVal(True))}
            out += [(f"PostSend({w}) Error", z3.And(g, s.layerA == ERROR), err),
                    (f"PostSend({w}) default QP", z3.And(g, s.layerA == DEFAULT), on1),
                    (f"PostSend({w}) backup QP",
                     z3.And(g, s.layerA == FALLBACK, s.replayed), on2),
                    (f"PostSend({w}) held", z3.And(g, s.layerA == FALLBACK,
                                                   z3.Not(s.replayed)), held)]
        return out

    def post_recv(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        s, p = self.s, self.p
        return [("PostRecv", s.rposted < p.num_notes(), {"rposted": s.rposted + 1})]

    # -- path 1 -------------------------------------------------------------------------
    def path1(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        s, p, t = self.s, self.p, self.t
        out = []
        for w in range(1, p.n + 1):
            g = z3.And(s.qpA1, s.qpB1, s.ex1 == w - 1, w <= s.sq1,
                       z3.Implies(p.two_sided(w), s.c1 < s.rposted))
            upd: Updates = {"ex1": w, "execs": _set(s.execs, w, s.execs[w] + 1),
                            "mem": p.apply(w, s.mem),
                            "c1": z3.If(p.two_sided(w), s.c1 + 1, s.c1)}
            out.append((f"Deliver(1, AtoB) executes {w}", g, upd))
        out.append(("Deliver(1, BtoA) ACK", z3.And(s.qpA1, s.una1 < t.una1, t.una1 <= s.ex1),
                    {"una1": t.una1}))
        out.append(("Timeout/NicFail(A, 1): A's default QP in ERR", s.qpA1,
                    {"qpA1": z3.BoolVal(False)}))
        out.append(("NicFail(B, 1)", z3.And(s.qpB1, s.layerB == DEFAULT),
                    {"qpB1": z3.BoolVal(False)}))
        return out

    # -- the layer: trigger ---------------------------------------------------------------
    def trigger_a(self) -> Updates:
        s, p, q = self.s, self.p, self.q
        good = [q.cq1_ok(w) for w in range(p.n + 1)]
        gmax: z3.ArithRef = z3.IntVal(0)
        for w in range(1, p.n + 1):
            gmax = z3.If(good[w], z3.IntVal(w), gmax)
        rest = [z3.BoolVal(False)] + [z3.And(s.pend[w], w > gmax) for w in range(1, p.n + 1)]
        refuse = z3.And(z3.BoolVal(self.d.refuse_atomics),
                        z3.Or(*[z3.And(rest[w], p.atomic(w)) for w in range(1, p.n + 1)]))
        appended = [z3.Or(good[w], z3.And(refuse, rest[w])) for w in range(p.n + 1)]
        qbad = z3.Or(s.qbad, *[z3.And(s.buf[v], appended[w], v >= w)
                               for v in range(1, p.n + 1) for w in range(1, p.n + 1)])
        return {
            "qpA1": z3.BoolVal(False),
            "buf": [z3.Or(s.buf[w], appended[w]) for w in range(p.n + 1)],
            "bok": [z3.If(appended[w], good[w], s.bok[w]) for w in range(p.n + 1)],
            "pend": [z3.And(z3.Not(refuse), rest[w]) for w in range(p.n + 1)],
            "layerA": z3.If(refuse, ERROR, FALLBACK),
            "qbad": qbad,
        }

    def trigger_b(self) -> Updates:
        s = self.s
        return {"qpB1": z3.BoolVal(False), "bh": s.polB1, "bt": s.c1,
                "recvDone": s.recvDone + (s.c1 - s.polB1), "layerB": FALLBACK,
                "qbad": z3.Or(s.qbad, s.bh < s.bt)}

    # -- polls ------------------------------------------------------------------------------
    def poll_a(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        s, p, q = self.s, self.p, self.q
        n = p.n
        out = []
        has_buf = z3.Or(*[s.buf[w] for w in range(1, n + 1)])
        for w in range(1, n + 1):
            g = is_first(n, lambda v: s.buf[v], w)
            out.append((f"PollCq(A) buffered {w}", g,
                        {**self.see_a(z3.IntVal(w), s.bok[w]),
                         "buf": _set(s.buf, w, z3.BoolVal(False))}))
        for w in range(1, n + 1):
            g = z3.And(z3.Not(has_buf), is_first(n, q.cq1_ok, w))
            out.append((f"PollCq(A) default CQ {w} SUCCESS", g,
                        {**self.see_a(z3.IntVal(w), z3.BoolVal(True)), "pol1": w,
                         "pend": [z3.And(s.pend[v], v > w) for v in range(n + 1)]}))
        no_ok1 = z3.And(*[z3.Not(q.cq1_ok(w)) for w in range(1, n + 1)])
        out.append(("PollCq(A) default CQ error: Trigger(A)",
                    z3.And(z3.Not(has_buf), no_ok1, q.cq1_err()), self.trigger_a()))
        for w in range(1, n + 1):
            g = z3.And(z3.Not(has_buf), s.layerA != DEFAULT, is_first(n, q.cq2_any, w))
            ok = q.cq2_ok(w)
            upd: Updates = {**self.see_a(z3.IntVal(w), ok), "p2": w,
                            "pend": [z3.If(ok, z3.And(s.pend[v], v > w),
                                           z3.And(s.pend[v], v != w)) for v in range(n + 1)],
                            "layerA": z3.If(ok, s.layerA, ERROR)}
            out.append((f"PollCq(A) backup CQ {w}", g, upd))
        return out

    def poll_b(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        s, p, q = self.s, self.p, self.q
        n = p.n
        out = []
        has_buf = s.bh < s.bt
        out.append(("PollCq(B) buffered", has_buf,
                    {**self.take_b(p.note_wr(s.bh + 1), s.bh + 1), "bh": s.bh + 1}))
        d1 = z3.And(z3.Not(has_buf), s.layerB == DEFAULT)
        out.append(("PollCq(B) default CQ SUCCESS", z3.And(d1, s.polB1 < s.c1),
                    {**self.take_b(p.note_wr(s.polB1 + 1), s.polB1 + 1),
                     "polB1": s.polB1 + 1, "recvDone": s.recvDone + 1}))
        out.append(("PollCq(B) default CQ flush error: Trigger(B)",
                    z3.And(d1, s.polB1 == s.c1, z3.Not(s.qpB1), s.c1 < s.rposted),
                    self.trigger_b()))
        for w in range(1, n + 1):
            g = z3.And(z3.Not(has_buf), s.layerB == FALLBACK, is_first(n, q.cqB2, w))
            recv = s.base2 + q.rank2(w)
            out.append((f"PollCq(B) backup CQ {w}", g,
                        {**self.take_b(z3.IntVal(w), recv), "pB2": w,
                         "recvDone": s.recvDone + 1}))
        return out

    # -- the layer's progress and control messages -----------------------------------------
    # The counters are lossy packets (Failover.tla with CtlLoss): each host sends one
    # counter in this bound (one failover: Handshake once per host, so every copy of it
    # carries seq 1), numbered so that the receiver tells a resend from the first copy it
    # takes. Which copy is new is then whether the receiver took the peer's counter yet
    # (peerA, peerB >= 0: peerSeq = 1). A copy asks for an answer (askAB, askBA) when its
    # sender sent first (the Handshake's ~fresh: it had not taken the peer's counter) or
    # its timer resent it; an answer to a duplicate asks as its sender's `asked` does.
    def progress(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        s, p = self.s, self.p
        n = p.n
        a_first, b_first = s.peerA < 0, s.peerB < 0  # ~fresh at the Handshake
        out = [
            ("Progress(A): peer's counter, Trigger(A)",
             z3.And(s.layerA == DEFAULT, s.peerA >= 0), self.trigger_a()),
            ("Progress(B): peer's counter, Trigger(B)",
             z3.And(s.layerB == DEFAULT, s.peerB >= 0), self.trigger_b()),
            # A's receive side fails over whether or not its send side refused (Error):
            # the handshake sends A's counter either way
            ("Progress(A): Handshake", z3.And(s.layerA != DEFAULT, z3.Not(s.sentA)),
             {"sentA": z3.BoolVal(True), "ctlAB": s.qpA2, "askAB": z3.And(s.qpA2, a_first),
              "askedA": a_first}),
            ("Progress(B): Handshake (repost receives, send counter)",
             z3.And(s.layerB == FALLBACK, z3.Not(s.sentB)),
             {"sentB": z3.BoolVal(True), "base2": s.recvDone, "ctlBA": z3.BoolVal(True),
              "askBA": b_first, "askedB": b_first}),
        ] + self.deliver_counters()
        skip = [self.skip(w) for w in range(n + 1)]
        keep = [z3.And(s.pend[w], z3.Not(skip[w])) for w in range(n + 1)]
        skipped = [z3.And(s.pend[w], skip[w], p.sig[w]) for w in range(n + 1)]
        qbad = z3.Or(s.qbad, *[z3.Or(z3.And(s.sq2[v], keep[w], v >= w),
                                     z3.And(s.buf[v], skipped[w], v >= w))
                               for v in range(1, n + 1) for w in range(1, n + 1)])
        out.append(("Progress(A): Replay",
                    z3.And(s.layerA == FALLBACK, s.sentA, s.peerA >= 0, z3.Not(s.replayed)),
                    {"sq2": [z3.Or(s.sq2[w], keep[w]) for w in range(n + 1)],
                     "buf": [z3.Or(s.buf[w], skipped[w]) for w in range(n + 1)],
                     "bok": [z3.Or(z3.And(s.bok[w], z3.Not(skipped[w])), skipped[w])
                             for w in range(n + 1)],
                     "pend": keep, "replayed": z3.BoolVal(True), "qbad": qbad}))
        return out

    def deliver_counters(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        """DeliverControl(2, d) of a counter new at the receiver: taken (peerCtr; `asked`
        cleared). A's receive end drops it in the error state (qpA2); B's backup QP is
        healthy in this bound. The spec's `sentCtr' = IF asked THEN sentCtr ELSE FALSE`
        is left out: a host that did not ask has not sent yet (it answers only after the
        peer's counter, so none is new to it then; invariant "who asked"), so it changes
        nothing here, and the agreement test checks sentCtr against the model. (With it,
        the search for `shift.stale_data_with_reuse` takes twice as long.)"""
        s = self.s
        false = z3.BoolVal(False)
        return [
            ("Deliver(2, AtoB) A's counter", z3.And(s.ctlAB, s.peerB < 0),
             {"ctlAB": false, "askAB": false, "peerB": 0, "askedB": false}),
            ("Deliver(2, BtoA) B's counter", z3.And(s.ctlBA, s.peerA < 0),
             {"ctlBA": false, "askBA": false, "peerA": z3.If(s.qpA2, s.base2, s.peerA),
              "askedA": z3.And(s.askedA, z3.Not(s.qpA2))}),
        ]

    def deliver_resends(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        """DeliverControl(2, d) of a counter the receiver took already (its seq is
        peerSeq): idempotent, answered with the receiver's own counter if it asks and the
        receiver sent one."""
        s = self.s
        false = z3.BoolVal(False)
        b_answers = z3.And(s.askAB, s.sentB)
        a_answers = z3.And(s.qpA2, s.askBA, s.sentA)
        return [
            ("Deliver(2, AtoB) A's counter again (a resend: B answers if it asks)",
             z3.And(s.ctlAB, s.peerB >= 0),
             {"ctlAB": false, "askAB": false, "ctlBA": z3.Or(s.ctlBA, b_answers),
              "askBA": z3.If(b_answers, s.askedB, s.askBA)}),
            ("Deliver(2, BtoA) B's counter again (a resend: A answers if it asks)",
             z3.And(s.ctlBA, s.peerA >= 0),
             {"ctlBA": false, "askBA": false, "ctlAB": z3.Or(s.ctlAB, a_answers),
              "askAB": z3.If(a_answers, s.askedA, s.askAB)}),
        ]

    def lossy_control(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        """What the lossy control plane adds (issue 15, item 3): a counter lost, the
        handshake timer's resend, and the delivery of a resend. Without them the counters
        are delivered reliably, as before CtlLoss: a sub-relation."""
        return self.lose_counters() + self.handshake_timeouts() + self.deliver_resends()

    def lose_counters(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        """Drop(2, d) of a counter (CtlLoss: the wire loses control messages on any path;
        no drop budget here, as for the requests)."""
        s = self.s
        false = z3.BoolVal(False)
        return [("Drop(2, AtoB) A's counter", s.ctlAB, {"ctlAB": false, "askAB": false}),
                ("Drop(2, BtoA) B's counter", s.ctlBA, {"ctlBA": false, "askBA": false})]

    def handshake_timeouts(self, quiet_wire: bool = True
                           ) -> list[tuple[str, z3.BoolRef, Updates]]:
        """HandshakeTimeout(h): h asked and awaits the answer, no counter is in flight on
        path 2 (the spec asks for the whole wire of path 2 to be quiet: the encoding sees
        only the counters, a weaker guard), and the peer is not about to answer (it did
        not take h's counter, or it has sent its own): h resends its counter, asking. The
        timer's assumption (it outlasts a round trip) is the quiet wire. Either host can
        be the one that asked: B when its default QP's flush, or `host`, triggered it
        first. `quiet_wire=False` drops that assumption (a weakening: the timer may fire
        with a counter in flight)."""
        s = self.s
        true = z3.BoolVal(True)
        quiet = z3.And(z3.Not(s.ctlAB), z3.Not(s.ctlBA)) if quiet_wire else true
        return [
            ("HandshakeTimeout(A): A resends its counter",
             z3.And(s.askedA, s.sentA, z3.Not(z3.And(s.peerB >= 0, z3.Not(s.sentB))),
                    s.qpA2, quiet),
             {"ctlAB": true, "askAB": true}),
            ("HandshakeTimeout(B): B resends its counter",
             z3.And(s.askedB, s.sentB, z3.Not(z3.And(s.peerA >= 0, z3.Not(s.sentA))), quiet),
             {"ctlBA": true, "askBA": true}),
        ]

    def skip(self, w: int) -> z3.BoolRef:
        """Failover.tla's Skip(D, w)."""
        s, p = self.s, self.p
        if w == 0 or self.d.skip == "none":
            return z3.BoolVal(False)
        if self.d.skip == "counter":
            return z3.And(p.two_sided(w), p.nb(w) <= s.peerA)
        assert self.d.skip == "prefix"
        return z3.Or(*[z3.And(s.pend[v], p.two_sided(v), p.nb(v) <= s.peerA)
                       for v in range(w, p.n + 1)])

    # -- path 2 -------------------------------------------------------------------------
    def path2(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        s, p, q, t = self.s, self.p, self.q, self.t
        n = p.n
        out = []
        for w in range(1, n + 1):
            nxt = is_first(n, q.in_sq2_after, w)
            g = z3.And(s.qpA2, nxt, z3.Implies(p.two_sided(w), q.rq2_has()))
            out.append((f"Deliver(2, AtoB) executes {w}", g,
                        {"x2": w, "execs": _set(s.execs, w, s.execs[w] + 1),
                         "mem": p.apply(w, s.mem)}))
            rnr = z3.And(s.qpA2, nxt, p.two_sided(w), z3.Not(q.rq2_has()))
            out.append((f"Timeout(A, 2) after receiver-not-ready for {w}", rnr,
                        {"qpA2": z3.BoolVal(False)}))
        acked = z3.Or(*[z3.And(t.a2 == w, s.sq2[w]) for w in range(1, n + 1)])
        out.append(("Deliver(2, BtoA) ACK", z3.And(s.qpA2, s.a2 < t.a2, t.a2 <= s.x2, acked),
                    {"a2": t.a2}))
        return out

    # -- the host's other direction ----------------------------------------------------------
    def host(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        """A host fails over as a whole (Failover.tla's Trigger(h) moves its send and its
        receive side): with two-way traffic, A's send side can be triggered by A's own
        receive WRs' flush, and B's receive side by B's own sends' error, with nothing of
        this direction to poll. Either needs that host's default QP in the error state
        (what flushed them); the peer's counter is the other trigger, above."""
        s = self.s
        return [("Trigger(A) by A's receive side", z3.And(s.layerA == DEFAULT, z3.Not(s.qpA1)),
                 self.trigger_a()),
                ("Trigger(B) by B's send side", z3.And(s.layerB == DEFAULT, z3.Not(s.qpB1)),
                 self.trigger_b())]

    def backup_failure(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        """The bound widened (`backup_fails`): A's backup QP enters the error state at any
        moment (A's second NIC fails, or its retries on path 2 run out), with path 2's
        wire empty as for path 1: a NIC failure clears it, counters in flight included
        (a timeout finds it empty). Its WRs not acknowledged then complete with an error
        (`Derived.cq2_err`), the layer goes to Error when A polls one, B's counter no
        longer reaches A. B's backup QP stays healthy."""
        if not self.backup_fails:
            return []
        false = z3.BoolVal(False)
        return [("Timeout/NicFail(A, 2): A's backup QP in ERR", self.s.qpA2,
                 {"qpA2": false, "ctlAB": false, "askAB": false, "ctlBA": false,
                  "askBA": false})]

    def all(self) -> list[tuple[str, z3.BoolRef, Updates]]:
        return (self.post_send() + self.post_recv() + self.path1() + self.poll_a()
                + self.poll_b() + self.progress() + self.path2() + self.host()
                + self.lossy_control() + self.backup_failure())


def transitions(p: Program, d: ReplayPolicy, s: AbstractState,
                t: AbstractState) -> list[tuple[str, z3.BoolRef]]:
    """Each action as one formula over (s, t), with its frame."""
    return [(name, z3.And(g, frame(s, t, upd))) for name, g, upd in Actions(p, d, s, t).all()]


def next_(p: Program, d: ReplayPolicy, s: AbstractState, t: AbstractState,
          act: z3.ArithRef | None = None, stutter: bool = False,
          without: Sequence[int] = (), backup_fails: bool = False) -> z3.BoolRef:
    """The transition relation: act = i names the action taken (the i-th of
    `action_names`; with `stutter`, act = len(actions) leaves the state unchanged).
    `without`: actions left out (a sub-relation), their indices kept. `backup_fails`:
    A's backup QP may fail too (`Actions.backup_failure`, the last action).

    Encoded per variable rather than per action (t.f = the update of the chosen action,
    else s.f), which is the same relation as the disjunction of `transitions` and much
    smaller."""
    out = set(without)
    acts = Actions(p, d, s, t, backup_fails).all()
    a = act if act is not None else z3.FreshInt("act")
    top = len(acts) + (1 if stutter else 0)
    cs: list[z3.BoolRef] = [a >= 0, a < top] + [a != i for i in sorted(out)]
    cs += [z3.Implies(a == i, g) for i, (_, g, _) in enumerate(acts) if i not in out]
    for f in fields(AbstractState):
        old_v, new_v = getattr(s, f.name), getattr(t, f.name)
        writers = [(i, u[f.name]) for i, (_, _, u) in enumerate(acts)
                   if f.name in u and i not in out]
        if f.name in LISTS:
            for w in range(1, len(old_v)):
                val = old_v[w]
                for i, u in writers:
                    val = z3.If(a == i, u[w], val)  # type: ignore[index]
                cs.append(new_v[w] == val)
        else:
            val = old_v
            for i, u in writers:
                val = z3.If(a == i, u, val)
            cs.append(new_v == val)
    return conj(cs)


def action_names(p: Program, d: ReplayPolicy, backup_fails: bool = False) -> list[str]:
    s, t = fresh(p.n, "s"), fresh(p.n, "t")
    return [name for name, _, _ in Actions(p, d, s, t, backup_fails).all()]


def action_indices(p: Program, d: ReplayPolicy,
                   group: Callable[[Actions], list[tuple[str, z3.BoolRef, Updates]]],
                   backup_fails: bool = False) -> list[int]:
    """The indices (in `action_names`) of the actions `group` picks out of `Actions`
    (for `next_`'s `without`)."""
    s, t = fresh(p.n, "s"), fresh(p.n, "t")
    acts = Actions(p, d, s, t, backup_fails)
    picked = {name for name, _, _ in group(acts)}
    return [i for i, (name, _, _) in enumerate(acts.all()) if name in picked]


def lossy_control_actions(p: Program, d: ReplayPolicy) -> list[int]:
    """The indices (in `action_names`) of `Actions.lossy_control`'s actions."""
    return action_indices(p, d, Actions.lossy_control)

