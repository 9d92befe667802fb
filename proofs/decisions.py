"""Failover decisions as functions of what software can see: the trilemma's setting.

A *program* is n WRs A posts on the default path (ops and signaled flags, symbolic). The
default path then fails. By `transport.rc_prefix`, the failure worlds are exactly the
pairs (U, E) with 0 <= U <= E <= n, U < n: the responder executed WRs 1..E (E = epsn - 1,
hidden in its NIC), the requester's NIC saw WRs 1..U acknowledged (U = una - 1).

What software sees of a world (its *view*):
- A's software (always): the program, and the completions of the signaled WRs <= U, i.e.
  `last_sig(U)`; every WR after it is outstanding and gets a decision;
- B's software (`counter=True`): its count of completed receives, NB(E) (SHIFT's
  counter: B drains its CQ before answering, so it counts every executed notification);
- the responder NIC's expected PSN (`epsn=True`): only a design that drops opacity.

A *decision rule* is an uninterpreted function from a view and an outstanding WR to
REPLAY (re-post it on the backup path), SKIP (report it complete) or FAIL (return the
error). Z3 treats it as every function over the view domain at once. The backup path is
healthy; a replayed WR is executed there once more (zero-copy: nothing deduplicates it),
unless `staged` (the Staging design: the responder copies a payload into place only the
first time its sequence number arrives).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import z3
from shift.proofs.core import conj

# Operation codes. Two-sided ops are notifications: they consume a receive WR.
WRITE, WRITE_IMM, SEND, READ, FADD, CAS = range(6)
OPS = {"WRITE": WRITE, "WRITE_IMM": WRITE_IMM, "SEND": SEND, "READ": READ, "FADD": FADD,
       "CAS": CAS}
OP_NAMES = {v: k for k, v in OPS.items()}
REPLAY, SKIP, FAIL = 0, 1, 2
DECISIONS = {REPLAY: "REPLAY", SKIP: "SKIP", FAIL: "FAIL"}


def two_sided(op: z3.ArithRef) -> z3.BoolRef:
    return z3.Or(op == WRITE_IMM, op == SEND)


def atomic(op: z3.ArithRef) -> z3.BoolRef:
    return z3.Or(op == FADD, op == CAS)


def one_sided(op: z3.ArithRef) -> z3.BoolRef:
    return z3.Not(two_sided(op))


@dataclass(frozen=True)
class ProgramShape:
    """A program as a decision rule sees it: n symbolic WRs, op codes and signaled flags only,
    indexed 1..n (index 0 unused). `shift.proofs.programs.Program` is the whole WR record."""

    ops: list[z3.ArithRef]
    sig: list[z3.BoolRef]

    @property
    def n(self) -> int:
        return len(self.ops) - 1

    def wellformed(self, allowed: Sequence[int] = tuple(OPS.values())) -> z3.BoolRef:
        return conj([z3.Or(*[o == a for a in allowed]) for o in self.ops[1:]])

    def last_sig(self, u: int) -> z3.ArithRef:
        """The last signaled WR among 1..u (0 if none): what A's completions reveal."""
        ls: z3.ArithRef = z3.IntVal(0)
        for w in range(1, u + 1):
            ls = z3.If(self.sig[w], z3.IntVal(w), ls)
        return ls

    def notes_before(self, k: int) -> z3.ArithRef:
        """NotesBefore(program, k): the notifications among WRs 1..k."""
        return z3.Sum([z3.If(two_sided(self.ops[w]), 1, 0) for w in range(1, k + 1)]
                      + [z3.IntVal(0)])

    def args(self) -> list[z3.ExprRef]:
        return [*self.ops[1:], *self.sig[1:]]


def program(n: int, tag: str = "") -> ProgramShape:
    return ProgramShape([z3.IntVal(-1)] + [z3.Int(f"op{tag}{w}") for w in range(1, n + 1)],
                   [z3.BoolVal(False)] + [z3.Bool(f"sig{tag}{w}") for w in range(1, n + 1)])


def concrete(ops: Sequence[tuple[str, bool]]) -> ProgramShape:
    """A fixed program, e.g. [("WRITE", False), ("WRITE_IMM", True)]."""
    return ProgramShape([z3.IntVal(-1)] + [z3.IntVal(OPS[o]) for o, _ in ops],
                   [z3.BoolVal(False)] + [z3.BoolVal(s) for _, s in ops])


@dataclass(frozen=True)
class View:
    """Which observations the rule gets (the assumptions being varied)."""

    counter: bool = True   # B's software: its count of completed receives
    epsn: bool = False     # the responder NIC's expected PSN: drops opacity


@dataclass(frozen=True)
class World:
    u: int  # acknowledged prefix seen by A's NIC
    e: int  # executed prefix at B's NIC

    def trace(self, prog_names: Sequence[str]) -> list[str]:
        """The world as spec events (RCTransport.tla / Faults.tla action names)."""
        n = len(prog_names)
        ev = [f"PostSend(A, {w})  [{prog_names[w - 1]}]" for w in range(1, n + 1)]
        ev += [f"Transmit(A, 1)  [PSN {w}]" for w in range(1, n + 1)]
        ev += [f"Deliver(1, AtoB)  [PSN {w} executed]" for w in range(1, self.e + 1)]
        if self.e < n:
            ev.append(f"Drop(1, AtoB)  [PSN {self.e + 1} lost before the responder]")
        ev += [f"Deliver(1, AtoB)  [PSN {w} ahead of the expected PSN: discarded]"
               for w in range(self.e + 2, n + 1)]
        ev += [f"Deliver(1, BtoA)  [ACK {w}]" for w in range(1, self.u + 1)]
        if self.u < self.e:
            ev.append(f"Drop(1, BtoA)  [ACK {self.e} lost]")
        ev.append("Timeout(A, 1)  [RETRY_EXC_ERR: A's software sees the error]")
        return ev


def worlds(n: int) -> list[World]:
    """Every failure world the RC prefix lemma allows: 0 <= U <= E <= n, U < n."""
    return [World(u, e) for e in range(n + 1) for u in range(e + 1) if u < n]


Rule = Callable[[ProgramShape, World, int, list[z3.ExprRef]], z3.ArithRef]


def view_args(p: ProgramShape, wd: World, view: View) -> list[z3.ExprRef]:
    """The rule's inputs in world wd: only what `view` lets software observe."""
    args: list[z3.ExprRef] = [*p.args(), p.last_sig(wd.u)]
    if view.counter:
        args.append(p.notes_before(wd.e))
    if view.epsn:
        args.append(z3.IntVal(wd.e + 1))
    return args


def free_rule(p: ProgramShape, view: View, name: str = "rule") -> Rule:
    """Every decision rule over the view domain at once: an uninterpreted function."""
    arity = len(p.args()) + 1 + int(view.counter) + int(view.epsn) + 1
    sorts = [a.sort() for a in p.args()] + [z3.IntSort()] * (arity - len(p.args()))
    f = z3.Function(name, *sorts, z3.IntSort())

    def decide(_p: ProgramShape, _wd: World, w: int, args: list[z3.ExprRef]) -> z3.ArithRef:
        return f(*args, z3.IntVal(w))
    return decide


@dataclass(frozen=True)
class Outcome:
    """Per outstanding WR w: the decision, and how often the responder applied w."""

    pending: z3.BoolRef
    decision: z3.ArithRef
    execs: z3.ArithRef


def outcome(p: ProgramShape, wd: World, w: int, rule: Rule, view: View,
            staged: bool = False) -> Outcome:
    d = rule(p, wd, w, view_args(p, wd, view))
    before = 1 if w <= wd.e else 0
    replay = z3.If(d == REPLAY, 1, 0)
    # staged: deduplicated by sequence number, applied once if it ever arrived;
    # zero-copy: a replayed WR is applied again.
    execs = (z3.If(z3.Or(z3.BoolVal(before == 1), d == REPLAY), 1, 0) if staged
             else before + replay)
    return Outcome(w > p.last_sig(wd.u), d, execs)


Requirement = Callable[[ProgramShape, int, Outcome], z3.BoolRef]


def exactly_once_live(p: ProgramShape, w: int, o: Outcome) -> z3.BoolRef:
    """ExactlyOnceExecution and liveness: applied once, and completed (no FAIL)."""
    return z3.Implies(o.pending, z3.And(o.decision != FAIL, o.execs == 1,
                                        z3.Or(o.decision == REPLAY, o.decision == SKIP)))


def shift_corner(p: ProgramShape, w: int, o: Outcome) -> z3.BoolRef:
    """What SHIFT keeps: notifications and atomics at most once (NotificationIntegrity:
    no duplicate, no sliding; AtomicSafety), every WR not failed at least once (so a
    notification that completes was delivered exactly once); a FAIL is the refusal,
    which the liveness theorem restricts to programs with an atomic outstanding."""
    op = p.ops[w]
    return z3.Implies(o.pending, conj([
        z3.Implies(z3.Or(two_sided(op), atomic(op)), o.execs <= 1),
        z3.Implies(o.decision != FAIL, o.execs >= 1),
        o.decision >= REPLAY, o.decision <= FAIL,
    ]))


def constraints(p: ProgramShape, rule: Rule, view: View, req: Requirement,
                staged: bool = False) -> list[tuple[World, z3.BoolRef]]:
    """For each failure world, the requirement on every outstanding WR."""
    out = []
    for wd in worlds(p.n):
        out.append((wd, conj([req(p, w, outcome(p, wd, w, rule, view, staged))
                              for w in range(1, p.n + 1)])))
    return out
