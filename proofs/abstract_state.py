"""The abstract state of `protocol`'s encoding, and the queues read off its thresholds.

Each field stands for a variable of spec/Failover.tla or for a threshold that a queue of
it is summarised by (docs/proofs.md, "The protocol encoding"): path 1's send queue is
WRs 1..sq1, B's receive WRs are consumed in order, the backup send queue is the set `sq2`,
A's completion queues are what is left above the last polled WR. `Derived` reads the
queues back off the thresholds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import z3
from shift.proofs.programs import Program

DEFAULT, FALLBACK, ERROR = 0, 1, 2
LAYERS = {DEFAULT: "Default", FALLBACK: "Fallback", ERROR: "Error"}


@dataclass(frozen=True)
class AbstractState:
    """The abstract state. Scalars are Z3 terms; per-WR fields are lists indexed 1..N."""

    # A's application and layer
    posted: z3.ArithRef
    layerA: z3.ArithRef
    pend: list[z3.BoolRef]     # pending
    buf: list[z3.BoolRef]      # buffered["A"] holds a completion of w ...
    bok: list[z3.BoolRef]      # ... with status SUCCESS
    sentA: z3.BoolRef          # sentCtr["A"]
    peerA: z3.ArithRef         # peerCtr["A"]
    replayed: z3.BoolRef       # replayed["A"]
    eflush: list[z3.BoolRef]   # w was posted in Error: a flush CQE on A's CQ of path 2
    # path 1 (default)
    qpA1: z3.BoolRef           # qp["A"][1] = "RTS"
    qpB1: z3.BoolRef           # qp["B"][1] = "RTS"
    sq1: z3.ArithRef           # sq[1] = <<1, ..., sq1>>
    ex1: z3.ArithRef           # epsn[1] - 1
    una1: z3.ArithRef          # una[1] - 1
    pol1: z3.ArithRef          # the last WR whose completion A took from cq["A"][1]
    c1: z3.ArithRef            # receive WRs 1..c1 consumed on path 1
    polB1: z3.ArithRef         # B's application took receive completions 1..polB1
    # path 2 (backup)
    qpA2: z3.BoolRef
    sq2: list[z3.BoolRef]      # w is in sq[2]
    x2: z3.ArithRef            # every w in sq[2] up to x2 executed
    a2: z3.ArithRef            # every w in sq[2] up to a2 acknowledged
    p2: z3.ArithRef            # A polled cq["A"][2] up to WR p2
    pB2: z3.ArithRef           # B polled cq["B"][2] up to WR pB2
    # B's application and layer
    rposted: z3.ArithRef       # recvPosted
    layerB: z3.ArithRef
    bh: z3.ArithRef            # buffered["B"] = receive completions bh+1..bt
    bt: z3.ArithRef
    recvDone: z3.ArithRef
    sentB: z3.BoolRef
    peerB: z3.ArithRef
    base2: z3.ArithRef         # recvDone when B reposted: rq[2] = base2+1, base2+2, ...
    ctlAB: z3.BoolRef          # A's counter in flight on path 2 (at most one: a resend
                               # leaves only when path 2's wire is quiet or answers one)
    ctlBA: z3.BoolRef          # B's counter (= base2) in flight on path 2
    askAB: z3.BoolRef          # ... A's counter in flight asks for an answer (its ask)
    askBA: z3.BoolRef          # ... B's counter in flight asks for an answer
    askedA: z3.BoolRef         # asked["A"]: A sent its counter first, awaits B's answer
    askedB: z3.BoolRef         # asked["B"]
    # responder memory and history
    mem: z3.ArithRef           # mem[1]
    execs: list[z3.ArithRef]
    sndLast: z3.ArithRef       # the last WR A's application saw complete
    taken: z3.ArithRef         # Len(NotesTaken)
    cbad: z3.BoolRef
    nbad: z3.BoolRef
    dbad: z3.BoolRef
    qbad: z3.BoolRef


LISTS = {"pend", "buf", "bok", "eflush", "sq2", "execs"}
BOOLS = {"sentA", "replayed", "qpA1", "qpB1", "qpA2", "sentB", "ctlAB", "ctlBA", "askAB",
         "askBA", "askedA", "askedB", "cbad", "nbad", "dbad", "qbad", "pend", "buf", "bok",
         "eflush", "sq2"}


def fresh(n: int, tag: str) -> AbstractState:
    kw: dict[str, object] = {}
    for f in fields(AbstractState):
        mk = z3.Bool if f.name in BOOLS else z3.Int
        if f.name in LISTS:
            dummy = z3.BoolVal(False) if f.name in BOOLS else z3.IntVal(0)
            kw[f.name] = [dummy] + [mk(f"{f.name}{w}_{tag}") for w in range(1, n + 1)]
        else:
            kw[f.name] = mk(f"{f.name}_{tag}")
    return AbstractState(**kw)  # type: ignore[arg-type]


def flat(s: AbstractState) -> list[tuple[str, z3.ExprRef]]:
    out: list[tuple[str, z3.ExprRef]] = []
    for f in fields(AbstractState):
        v = getattr(s, f.name)
        if f.name in LISTS:
            out += [(f"{f.name}[{w}]", x) for w, x in enumerate(v) if w > 0]
        else:
            out.append((f.name, v))
    return out


# --------------------------------------------------------------------------------------
# Derived views of the state (the queues the thresholds stand for)
# --------------------------------------------------------------------------------------

def first(n: int, cond: Callable[[int], z3.BoolRef]) -> z3.ArithRef:
    """The least w in 1..n with cond(w), 0 if none."""
    out: z3.ArithRef = z3.IntVal(0)
    for w in range(n, 0, -1):
        out = z3.If(cond(w), z3.IntVal(w), out)
    return out


def is_first(n: int, cond: Callable[[int], z3.BoolRef], w: int) -> z3.BoolRef:
    return z3.And(cond(w), *[z3.Not(cond(v)) for v in range(1, w)])


class Derived:
    """The abstract state's queues, read off its thresholds."""

    def __init__(self, p: Program, s: AbstractState) -> None:
        self.p, self.s = p, s

    def cq1_ok(self, w: int) -> z3.BoolRef:
        """cq["A"][1] holds a SUCCESS for w (Acknowledge appended it, A has not taken it)."""
        s = self.s
        return z3.And(s.layerA == DEFAULT, self.p.sig[w], s.pol1 < w, w <= s.una1)

    def cq1_err(self) -> z3.BoolRef:
        """cq["A"][1] holds error CQEs (after every SUCCESS): the QP is in ERR with WRs
        unacknowledged (Timeout, NicFail, or a post to the ERR QP)."""
        s = self.s
        return z3.And(s.layerA == DEFAULT, z3.Not(s.qpA1), s.una1 < s.sq1)

    def cq2_ok(self, w: int) -> z3.BoolRef:
        s = self.s
        return z3.And(self.p.sig[w], s.sq2[w], s.p2 < w, w <= s.a2)

    def cq2_err(self, w: int) -> z3.BoolRef:
        s = self.s
        return z3.And(s.p2 < w, z3.Or(z3.And(z3.Not(s.qpA2), s.sq2[w], w > s.a2),
                                      s.eflush[w]))

    def cq2_any(self, w: int) -> z3.BoolRef:
        return z3.Or(self.cq2_ok(w), self.cq2_err(w))

    def in_sq2_after(self, w: int) -> z3.BoolRef:
        return z3.And(self.s.sq2[w], w > self.s.x2)

    def notes2(self, last: int, upto: z3.ArithRef | None = None) -> z3.ArithRef:
        """How many two-sided WRs among 1..last are on path 2 (and at most `upto`)."""
        s, p = self.s, self.p
        return z3.Sum([z3.IntVal(0)] + [z3.If(z3.And(p.two_sided(v), s.sq2[v],
                                                     *([] if upto is None else [v <= upto])),
                                              1, 0)
                                        for v in range(1, last + 1)])

    def c2(self) -> z3.ArithRef:
        """Receive WRs consumed on path 2."""
        return self.notes2(self.p.n, self.s.x2)

    def rank2(self, w: int) -> z3.ArithRef:
        """Which receive WR of path 2 the two-sided w consumes (1 = the first)."""
        return self.notes2(w)

    def k2(self) -> z3.ArithRef:
        """Receive completions of path 2 B's application took."""
        return self.notes2(self.p.n, self.s.pB2)

    def cqB2(self, w: int) -> z3.BoolRef:
        """cq["B"][2] holds the receive completion of two-sided w, not yet taken."""
        s, p = self.s, self.p
        return z3.And(p.two_sided(w), s.sq2[w], s.pB2 < w, w <= s.x2)

    def rq2_has(self) -> z3.BoolRef:
        """rq[2] is not empty: B reposted, and fewer receives consumed than posted."""
        s = self.s
        return z3.And(s.sentB, s.base2 + self.c2() < s.rposted)

    def received(self, r: int) -> z3.ArithRef:
        """The WR whose payload B's receive WR r holds (0: none consumed it): on path 1
        the r-th notification (receives are consumed in order, by the executed prefix),
        on path 2 the notification there whose rank, counted from B's counter, is r."""
        s, p = self.s, self.p
        out: z3.ArithRef = z3.IntVal(0)
        for w in range(p.n, 0, -1):
            on2 = z3.And(s.sentB, p.two_sided(w), s.sq2[w], w <= s.x2,
                         s.base2 + self.rank2(w) == r)
            out = z3.If(on2, z3.IntVal(w), out)
        return z3.If(r <= s.c1, p.note_wr(z3.IntVal(r)), out)

    def execs_of(self, w: z3.ArithRef) -> z3.ArithRef:
        return self.p.at(lambda i: self.s.execs[i] if i > 0 else z3.IntVal(0), w,
                         default=z3.IntVal(0))

    def can_post(self, w: int) -> z3.BoolRef:
        """Failover.tla's CanPost(w): NCCL's flow control."""
        s, p = self.s, self.p
        return z3.And(z3.Implies(p.two_sided(w), s.rposted >= p.nb(w)),
                      z3.Implies(p.writer(w), s.taken >= p.nb(w - 1)))
