"""Inductive invariants of SHIFT (and of ShiftPrefix) over `protocol`'s encoding.

An invariant is a list of named conjuncts. `check_inductive` asks Z3, for each conjunct c:
Init => c, and Inv /\\ Next => c' (Inv the whole list), then Inv => the property. A
failure names the conjunct, the action and the state: a counterexample to induction.

The conjuncts, in groups (docs/proofs.md explains each and why it is needed):
- `shape`    ranges of the thresholds, and which layer state allows what;
- `rc`       what the RC prefix lemma gives per path (executions, consumed receives);
- `handshake` the counter exchange: B's counter equals what it consumed on path 1;
- `healthy`  the encoding's bound: A's backup QP never fails (left out, with `flushed`
             added, for the relation with `backup_fails`);
- `replay`   which WRs the replay put on the backup path (per design);
- `notes`    what B's application has taken (NotificationIntegrity);
- `atomics`  no atomic on both paths (AtomicSafety);
- `data`     memory is the fold of the executions, writers wait for notifications
             (DataAtNotification); its facts without the property are `memory`;
- `order`    completions still to be polled come after the last one seen, successes are
             executed (CompletionIntegrity).
"""

from __future__ import annotations

from collections.abc import Callable

import z3
from shift.proofs.abstract_state import (
    DEFAULT,
    ERROR,
    FALLBACK,
    AbstractState,
    Derived,
    flat,
    fresh,
)
from shift.proofs.core import ProofVerdict, conj, solver
from shift.proofs.decisions import OP_NAMES
from shift.proofs.programs import Program
from shift.proofs.properties import Property, atomic_safety
from shift.proofs.protocol import ReplayPolicy, action_names, init, next_

Conjunct = tuple[str, z3.BoolRef]


def _at(p: Program, k: z3.ArithRef, table: Callable[[int], z3.ExprRef]) -> z3.ExprRef:
    return p.at(table, k, default=table(0))


def shape(p: Program, d: ReplayPolicy, s: AbstractState) -> list[Conjunct]:
    n = p.n
    ws = range(1, n + 1)
    q = Derived(p, s)
    cs: list[Conjunct] = [
        ("ranges A", conj([s.posted >= 0, s.posted <= n, s.pol1 >= 0, s.pol1 <= s.una1,
                           s.una1 <= s.ex1, s.ex1 <= s.sq1, s.sq1 <= s.posted,
                           s.sndLast >= 0, s.sndLast <= s.posted])),
        ("ranges B", conj([s.polB1 >= 0, s.polB1 <= s.c1, s.c1 <= s.rposted,
                           s.rposted <= p.num_notes(), s.taken >= 0,
                           s.rposted >= _at(p, s.posted, p.nb)])),
        ("layers", conj([s.layerA >= DEFAULT, s.layerA <= ERROR,
                         s.layerB >= DEFAULT, s.layerB <= FALLBACK])),
        ("Default A", z3.Implies(s.layerA == DEFAULT, conj(
            [s.sq1 == s.posted, z3.Not(s.sentA), z3.Not(s.replayed), s.sndLast == s.pol1,
             s.p2 == 0, s.x2 == 0, s.a2 == 0]
            + [z3.And(z3.Not(s.buf[w]), z3.Not(s.sq2[w]), z3.Not(s.eflush[w]),
                      s.pend[w] == z3.And(s.pol1 < w, w <= s.posted)) for w in ws]))),
        ("after Trigger(A)", z3.Implies(s.layerA != DEFAULT, z3.Not(s.qpA1))),
        # Error is a refusal, or (`healthy` dropped) the backup path's failure after a replay
        ("Error A: refused, nothing pending", z3.Implies(s.layerA == ERROR, z3.Or(conj(
            [z3.Not(s.replayed)] + [z3.And(z3.Not(s.pend[w]), z3.Not(s.sq2[w]))
                                    for w in ws]), z3.And(s.replayed, z3.Not(s.qpA2))))),
        ("Default B", z3.Implies(s.layerB == DEFAULT, conj(
            [s.recvDone == s.polB1, s.taken == s.polB1, s.bh == s.bt, z3.Not(s.sentB)]))),
        ("Fallback B", z3.Implies(s.layerB == FALLBACK, conj(
            [z3.Not(s.qpB1), s.polB1 <= s.bh, s.bh <= s.bt, s.bt == s.c1,
             s.recvDone == s.bt + q.k2(), s.taken == s.bh + q.k2(),
             z3.Implies(q.k2() > 0, s.bh == s.bt)]))),
        ("pending and posted", conj([z3.Implies(s.pend[w], w <= s.posted) for w in ws]
                                    + [z3.Implies(s.eflush[w], z3.And(w <= s.posted,
                                                                      s.layerA == ERROR))
                                       for w in ws]
                                    + [z3.Implies(s.buf[w], w <= s.posted) for w in ws])),
        ("path 2 thresholds", conj(
            [s.x2 >= 0, s.a2 >= 0, s.p2 >= 0, s.pB2 >= 0, s.a2 <= s.x2, s.pB2 <= s.x2,
             s.x2 <= s.posted, s.p2 <= s.posted,
             _at(p, s.x2, lambda i: z3.BoolVal(True) if i == 0 else s.sq2[i]),
             _at(p, s.a2, lambda i: z3.BoolVal(True) if i == 0 else s.sq2[i]),
             _at(p, s.pB2, lambda i: z3.BoolVal(True) if i == 0
                 else z3.And(s.sq2[i], p.two_sided(i)))]
            + [z3.Implies(s.sq2[w], z3.And(s.replayed, w <= s.posted)) for w in ws])),
        ("queues sorted", z3.Not(s.qbad)),
    ]
    return cs


def rc(p: Program, d: ReplayPolicy, s: AbstractState) -> list[Conjunct]:
    ws = range(1, p.n + 1)
    return [
        ("path 1 consumed receives", s.c1 == _at(p, s.ex1, p.nb)),
        ("executions", conj([s.execs[w] == z3.If(w <= s.ex1, 1, 0)
                             + z3.If(z3.And(s.sq2[w], w <= s.x2), 1, 0) for w in ws])),
    ]


def handshake(p: Program, d: ReplayPolicy, s: AbstractState) -> list[Conjunct]:
    return [
        ("B's counter", z3.Implies(s.sentB, z3.And(s.layerB == FALLBACK,
                                                   s.base2 == s.c1))),
        # a copy of B's counter (the first, a timer's resend or an answer to A's resend)
        # carries the count B sent: base2
        ("B's counter in flight", z3.Implies(s.ctlBA, s.sentB)),
        ("B's counter arrived", z3.And(s.peerA >= -1, z3.Implies(
            s.peerA >= 0, z3.And(s.sentB, s.peerA == s.base2)))),
        ("A's counter", z3.And(z3.Implies(s.ctlAB, s.sentA),
                               z3.Or(s.peerB == -1, z3.And(s.peerB == 0, s.sentA)))),
        # asked: sent first and not yet answered (so a new counter never finds a host
        # that sent without asking, and never takes back its sentCtr)
        ("who asked", z3.And(s.askedA == z3.And(s.sentA, s.peerA == -1),
                             s.askedB == z3.And(s.sentB, s.peerB == -1))),
        # in Error too: a refused send side leaves A's receive side to fail over
        ("A sent its counter after its trigger", z3.Implies(s.sentA, s.layerA != DEFAULT)),
        ("replayed after both counters", z3.Implies(
            s.replayed, z3.And(s.sentA, s.peerA >= 0, z3.Or(
                s.layerA == FALLBACK, z3.And(s.layerA == ERROR, z3.Not(s.qpA2)))))),
    ]


def healthy(p: Program, d: ReplayPolicy, s: AbstractState) -> list[Conjunct]:
    """The encoding's bound: A's backup QP never fails (true of the relation without
    `backup_fails`, where only a receiver-not-ready could fail it)."""
    return [("backup QP never fails", s.qpA2)]


def flushed(p: Program, d: ReplayPolicy, s: AbstractState) -> list[Conjunct]:
    """What `healthy` implied and a backup failure needs said: once A's layer is in
    Error every later post is flushed at once, behind what path 2 holds."""
    ws = range(1, p.n + 1)
    return [("after Error, every post flushed", conj(
        [z3.Implies(z3.And(s.eflush[v], v < w, w <= s.posted), s.eflush[w])
         for v in ws for w in ws]
        + [z3.Implies(s.eflush[w], conj([z3.Not(s.sq2[w]), z3.Not(s.pend[w]),
                                         z3.Not(s.buf[w]), w > s.sq1])) for w in ws]
        + [z3.Implies(z3.And(s.eflush[w], s.sq2[v]), v < w) for v in ws for w in ws]))]


def replay(p: Program, d: ReplayPolicy, s: AbstractState) -> list[Conjunct]:
    """Which WRs are on the backup path, and what is pending before the replay."""
    ws = range(1, p.n + 1)
    before = z3.And(s.layerA == FALLBACK, z3.Not(s.replayed))
    cs: list[Conjunct] = [
        ("pending before replay", z3.Implies(before, conj(
            [z3.Implies(z3.And(s.ex1 < w, w <= s.posted), s.pend[w]) for w in ws]
            + [z3.Implies(z3.And(s.pend[w], w <= s.sq1), z3.Not(p.atomic(w))) for w in ws]
            + [z3.Implies(s.buf[w], z3.And(w <= s.una1, z3.Not(s.pend[w]))) for w in ws]
            + [z3.Implies(z3.And(s.pend[v], s.buf[w]), w < v) for v in ws for w in ws]
            + [z3.Implies(z3.And(s.pend[v], v < w, w <= s.posted), s.pend[w])
               for v in ws for w in ws]))),
        ("beyond path 1, on path 2", z3.Implies(s.replayed, conj(
            [z3.Implies(z3.And(s.ex1 < w, w <= s.posted), z3.Or(s.sq2[w], s.eflush[w]))
             for w in ws]
            + [z3.Implies(s.pend[w], s.sq2[w]) for w in ws]))),
        ("no atomic replayed from path 1", z3.Implies(s.replayed, conj(
            [z3.Implies(z3.And(s.sq2[w], w <= s.sq1), z3.Not(p.atomic(w))) for w in ws]))),
        ("buffered before replayed", z3.Implies(s.layerA == FALLBACK, conj(
            [z3.Implies(s.buf[w], w <= s.ex1) for w in ws]
            + [z3.Implies(z3.And(s.bok[w], s.buf[w]), w <= s.ex1) for w in ws]))),
    ]
    if d.skip == "counter":
        cs.append(("notifications on path 2 (counter)", z3.Implies(s.replayed, conj(
            [z3.Implies(p.two_sided(w), s.sq2[w] == z3.And(w <= s.posted, p.nb(w) > s.base2,
                                                           z3.Not(s.eflush[w])))
             for w in ws]))))
    elif d.skip == "prefix":
        cs.append(("path 2 holds a suffix (prefix)", z3.Implies(s.replayed, conj(
            [z3.Implies(z3.And(s.sq2[v], v < w, w <= s.posted), s.sq2[w])
             for v in ws for w in ws]
            + [z3.Implies(p.two_sided(w), s.sq2[w] == z3.And(w <= s.posted, p.nb(w) > s.base2))
               for w in ws]
            + [z3.Implies(z3.And(s.buf[v], s.sq2[w]), v < w) for v in ws for w in ws]))))
    return cs


def notes(p: Program, d: ReplayPolicy, s: AbstractState) -> list[Conjunct]:
    return [("NotificationIntegrity so far", z3.Not(s.nbad))]


def atomics(p: Program, d: ReplayPolicy, s: AbstractState) -> list[Conjunct]:
    return [("AtomicSafety", atomic_safety(p, s))]


def data(p: Program, d: ReplayPolicy, s: AbstractState) -> list[Conjunct]:
    return [("DataAtNotification so far", z3.Not(s.dbad))] + memory(p, d, s)


def memory(p: Program, d: ReplayPolicy, s: AbstractState) -> list[Conjunct]:
    """The data group's facts about memory and the writers, without its property: these
    hold with buffer reuse too (tests/proofs/test_prove.py proves them inductive for
    SHIFT on every program), so the search for F3 may assume them."""
    ws = range(1, p.n + 1)
    m: z3.ArithRef = _at(p, s.ex1, p.value_after)
    for w in ws:
        m = z3.If(z3.And(s.sq2[w], w <= s.x2), p.apply(w, m), m)
    return [
        ("memory is the fold of the executions", s.mem == m),
        ("writers wait for the notifications before them", conj(
            [z3.Implies(z3.And(p.writer(w), w <= s.posted), s.taken >= p.nb(w - 1))
             for w in ws])),
        ("taken notifications were posted", s.taken <= _at(p, s.posted, p.nb)),
    ]


def order(p: Program, d: ReplayPolicy, s: AbstractState) -> list[Conjunct]:
    ws = range(1, p.n + 1)
    q = Derived(p, s)
    return [
        ("CompletionIntegrity so far", z3.Not(s.cbad)),
        ("completions to come follow the last seen", conj(
            [z3.Implies(s.buf[w], w > s.sndLast) for w in ws]
            + [z3.Implies(z3.And(s.layerA != DEFAULT, q.cq2_any(w)), w > s.sndLast)
               for w in ws]
            + [z3.Implies(s.layerA != DEFAULT, s.p2 <= s.sndLast)]
            + [z3.Implies(z3.And(s.buf[v], s.sq2[w], p.sig[w]), v < w)
               for v in ws for w in ws]
            + [z3.Implies(z3.And(s.eflush[w], s.buf[v]), v < w) for v in ws for w in ws]
            + [z3.Implies(z3.And(s.pend[w], p.sig[w]), w > s.sndLast) for w in ws]
            + [z3.Implies(z3.And(s.sq2[w], p.sig[w], w > s.p2), s.pend[w]) for w in ws])),
        ("successes were executed", conj(
            [z3.Implies(z3.And(s.buf[w], s.bok[w]), s.execs[w] >= 1) for w in ws])),
    ]


def polled(p: Program, d: ReplayPolicy, s: AbstractState) -> list[Conjunct]:
    """What the liveness argument (`progress.no_deadlock`) adds: a WR whose completion,
    or a later one's, A took from a CQ is no longer held by the layer."""
    return [("polled WRs are not pending", conj(
        [z3.Implies(s.pend[w], z3.And(w > s.pol1, w > s.p2)) for w in range(1, p.n + 1)]))]


GROUPS = {"shape": shape, "rc": rc, "handshake": handshake, "healthy": healthy,
          "replay": replay, "notes": notes,
          "atomics": atomics, "data": data, "order": order}
# `memory` is part of a group above, for the searches' hints; `polled` is the liveness
# argument's, `flushed` the backup failure's
EXTRA_GROUPS = {"memory": memory, "polled": polled, "flushed": flushed}


def invariant(p: Program, d: ReplayPolicy, s: AbstractState,
              groups: tuple[str, ...] = tuple(GROUPS)) -> list[Conjunct]:
    return [c for g in groups for c in {**GROUPS, **EXTRA_GROUPS}[g](p, d, s)]


def check_inductive(p: Program, d: ReplayPolicy, prop: Property, assume: z3.BoolRef,
                    groups: tuple[str, ...] = tuple(GROUPS),
                    timeout_ms: int = 60_000, backup_fails: bool = False) -> ProofVerdict:
    """Init => Inv, Inv /\\ Next => Inv', Inv => prop, conjunct by conjunct (Next with A's
    backup QP failing too if `backup_fails`)."""
    s, t = fresh(p.n, "s"), fresh(p.n, "t")
    inv_s = invariant(p, d, s, groups)
    inv_t = invariant(p, d, t, groups)
    base = solver(timeout_ms)
    base.add(assume, init(p, s))
    if base.check() != z3.sat:  # guard against a vacuous proof
        return ProofVerdict("unknown", "no initial state satisfies the assumptions")
    step = solver(timeout_ms)
    act = z3.Int("act")
    step.add(assume, conj([c for _, c in inv_s]), next_(p, d, s, t, act,
                                                        backup_fails=backup_fails))
    names = action_names(p, d, backup_fails)
    for (name, c), (_, c_t) in zip(inv_s, inv_t, strict=True):
        r = base.check(z3.Not(c))
        if r != z3.unsat:
            return ProofVerdict("refuted" if r == z3.sat else "unknown", f"Init => {name}: {r}")
        r = step.check(z3.Not(c_t))
        if r == z3.sat:
            mdl = step.model()
            a = mdl.eval(act).as_long()
            return ProofVerdict("refuted", f"not inductive: {name} after {names[a]}",
                           _cti(mdl, p, s, t))
        if r != z3.unsat:
            return ProofVerdict("unknown", f"{name}: {step.reason_unknown()}")
    goal = solver(timeout_ms)
    goal.add(assume, conj([c for _, c in inv_s]), z3.Not(prop(p, s)))
    r = goal.check()
    if r == z3.sat:
        return ProofVerdict("refuted", "the invariant does not imply the property")
    if r != z3.unsat:
        return ProofVerdict("unknown", goal.reason_unknown())
    return ProofVerdict("proved", f"inductive: {len(inv_s)} conjuncts, {len(names)} actions, "
                   f"every program of {p.n} WRs")


def _cti(m: z3.ModelRef, p: Program, s: AbstractState, t: AbstractState) -> list[str]:
    prog = [f"{w}:{OP_NAMES.get(m.eval(p.op[w], model_completion=True).as_long(), '?')}"
            f"{'/sig' if z3.is_true(m.eval(p.sig[w], model_completion=True)) else ''}"
            for w in range(1, p.n + 1)]
    before = {k: str(m.eval(v, model_completion=True)) for k, v in flat(s)}
    after = {k: str(m.eval(v, model_completion=True)) for k, v in flat(t)}
    lines = ["program " + " ".join(prog), "state: " + " ".join(f"{k}={v}" for k, v in
                                                               before.items())]
    lines.append("changed: " + " ".join(f"{k}: {before[k]}->{after[k]}" for k in before
                                        if before[k] != after[k]))
    return lines
