"""The achievability half of the trilemma: drop any one of the three properties and a
concrete design keeps the other two and liveness.

Each theorem does two things:
1. *sat with a witness*: with the dropped property's observation (or deduplication)
   allowed, Z3 finds a decision rule that works in every failure world (the free rule of
   `decisions`), and prints its decisions in T1 and T2;
2. *a proof*: the design's own rule, written out, meets the requirement in every failure
   world of every program up to `BOUND` WRs (all ops, all signaled flags), and, where the
   argument does not depend on the program, for every number of WRs n (parametric, from
   the RC prefix lemma `transport.rc_prefix`).
"""

from __future__ import annotations

import z3
from shift.proofs import decisions as d
from shift.proofs.core import ProofVerdict, Theorem, conj, solver, valid

BOUND = 3


def _witness(view: d.View, req: d.Requirement, staged: bool, allowed: list[int],
             n: int = 1) -> tuple[ProofVerdict | None, list[str]]:
    """Find some rule meeting `req` in every world of every program (sat), and show it."""
    p = d.program(n)
    rule = d.free_rule(p, view)
    s = solver()
    s.add(p.wellformed(allowed))
    for _, c in d.constraints(p, rule, view, req, staged):
        s.add(c)
    r = s.check()
    if r != z3.sat:
        return ProofVerdict("refuted" if r == z3.unsat else "unknown", f"no rule: {r}"), []
    m = s.model()
    lines = [f"program: {[d.OP_NAMES[m.eval(o).as_long()] for o in p.ops[1:]]}"]
    for wd in d.worlds(n):
        decs = []
        for w in range(1, n + 1):
            o = d.outcome(p, wd, w, rule, view, staged)
            pending = z3.is_true(m.eval(o.pending, model_completion=True))
            code = m.eval(o.decision, model_completion=True).as_long()
            decs.append(d.DECISIONS.get(code, "?") if pending else "completed")
        lines.append(f"world U={wd.u} E={wd.e}: {decs}")
    return None, lines


def _holds(rule: d.Rule, view: d.View, req: d.Requirement, staged: bool,
           allowed: list[int], extra: z3.BoolRef | None = None) -> ProofVerdict:
    """The concrete rule meets `req` in every world of every program of 1..BOUND WRs."""
    for n in range(1, BOUND + 1):
        p = d.program(n)
        claim = conj([c for _, c in d.constraints(p, rule, view, req, staged)])
        v = valid(claim, assumptions=[p.wellformed(allowed)] + ([extra] if extra is not None
                                                                 else []))
        if v.status != "proved":
            v.detail = f"{n} WRs: {v.detail}"
            return v
    return ProofVerdict("proved")


def _combine(witness: tuple[ProofVerdict | None, list[str]], *proofs: ProofVerdict) -> ProofVerdict:
    bad, lines = witness
    if bad is not None:
        return bad
    for v in proofs:
        if v.status != "proved":
            return v
    return ProofVerdict("proved", "sat with a witness; the design's rule proved", lines)


# -- drop opacity: ReceiverQuery reads the responder NIC's expected PSN ------------------

def receiver_query_rule(p: d.ProgramShape, wd: d.World, w: int,
                        args: list[z3.ExprRef]) -> z3.ArithRef:
    """Failover.tla's skip "psn": replay exactly the WRs at or after the expected PSN."""
    return z3.If(z3.IntVal(w) >= args[-1], d.REPLAY, d.SKIP)


def _receiver_query_parametric() -> ProofVerdict:
    """For any n: with executed = [1, epsn) (the RC lemma), the psn rule applies every
    outstanding WR exactly once."""
    n, w, epsn, una, last = z3.Ints("n w epsn una last")
    before = z3.If(w < epsn, 1, 0)
    replay = z3.If(w >= epsn, 1, 0)
    return valid(z3.Implies(z3.And(last < w, w <= n), before + replay == 1),
                 assumptions=[una >= 1, una <= epsn, epsn <= n + 1, last >= 0, last < una])


def _receiver_query() -> ProofVerdict:
    view = d.View(counter=True, epsn=True)
    allowed = list(d.OPS.values())
    return _combine(_witness(view, d.exactly_once_live, False, allowed),
                    _holds(receiver_query_rule, view, d.exactly_once_live, False, allowed),
                    _receiver_query_parametric())


# -- drop zero-copy: Staging deduplicates by sequence number ------------------------------

def replay_all(p: d.ProgramShape, wd: d.World, w: int, args: list[z3.ExprRef]) -> z3.ArithRef:
    """Failover.tla's skip "none": replay every outstanding WR."""
    return z3.IntVal(d.REPLAY)


def _staging_parametric() -> ProofVerdict:
    """For any n: a staged responder applies WR w once if it ever arrived, and replaying
    every outstanding WR makes each arrive."""
    w, epsn, n = z3.Ints("w epsn n")
    applied = z3.If(z3.Or(w < epsn, z3.BoolVal(True)), 1, 0)  # replayed, so it arrives
    return valid(z3.Implies(z3.And(w >= 1, w <= n), applied == 1),
                 assumptions=[epsn >= 1, epsn <= n + 1])


def _staging() -> ProofVerdict:
    view = d.View(counter=False)  # Staging needs no counter either
    allowed = list(d.OPS.values())
    return _combine(_witness(view, d.exactly_once_live, True, allowed),
                    _holds(replay_all, view, d.exactly_once_live, True, allowed),
                    _staging_parametric())


# -- drop exactly-once: SHIFT ---------------------------------------------------------------

def shift_rule(p: d.ProgramShape, wd: d.World, w: int, args: list[z3.ExprRef]) -> z3.ArithRef:
    """SHIFT's failover decision: with an atomic outstanding, fail (refuse); otherwise
    replay every outstanding WR except the notifications the peer's counter covers."""
    counter = p.notes_before(wd.e)  # = args[-1]: B's count of completed receives
    last = p.last_sig(wd.u)
    atomic_out = z3.Or(*[z3.And(z3.IntVal(v) > last, d.atomic(p.ops[v]))
                         for v in range(1, p.n + 1)])
    note = p.notes_before(w)
    skip = z3.And(d.two_sided(p.ops[w]), note <= counter)
    del args
    return z3.If(atomic_out, d.FAIL, z3.If(skip, d.SKIP, d.REPLAY))


def _shift_live() -> ProofVerdict:
    """Without atomics SHIFT never fails: it is live."""
    def live(p: d.ProgramShape, w: int, o: d.Outcome) -> z3.BoolRef:
        return z3.Implies(o.pending, o.decision != d.FAIL)
    no_atomics = [d.WRITE, d.WRITE_IMM, d.SEND, d.READ]
    return _holds(shift_rule, d.View(counter=True), live, False, no_atomics)


def _shift() -> ProofVerdict:
    view = d.View(counter=True)
    notes_only = [d.WRITE_IMM, d.SEND]
    return _combine(_witness(view, d.exactly_once_live, False, notes_only, n=2),
                    _holds(shift_rule, view, d.shift_corner, False, list(d.OPS.values())),
                    _shift_live())


THEOREMS = [
    Theorem(
        name="achieve.receiver_query",
        group="achievability",
        statement="Dropping opacity, a rule that reads the responder's expected PSN and "
                  "replays exactly the WRs at or after it gives exactly-once execution, "
                  "zero-copy and liveness, for every program and failure world.",
        formula="exists rule(view + epsn) (sat);  forall prog (<= 3 WRs), worlds, w. "
                "execs'(w) = 1 /\\ live for rule = (w >= epsn ? REPLAY : SKIP);  "
                "forall n: una <= epsn <= n+1 => [w < epsn] + [w >= epsn] = 1",
        check=_receiver_query,
    ),
    Theorem(
        name="achieve.staging",
        group="achievability",
        statement="Dropping zero-copy, replaying every outstanding WR into a staging "
                  "buffer that the receiver copies from once per sequence number gives "
                  "exactly-once execution, opacity and liveness.",
        formula="exists rule(view) (sat, staged);  forall prog, worlds, w. "
                "max([w <= E], [REPLAY]) = 1 /\\ live for rule = REPLAY;  forall n",
        check=_staging,
    ),
    Theorem(
        name="achieve.shift",
        group="achievability",
        statement="Dropping exactly-once, SHIFT's rule (replay all but the notifications "
                  "the peer's counter covers, refuse with an atomic outstanding) keeps "
                  "opacity and zero-copy, delivers every notification exactly once, "
                  "applies no atomic twice, and is live whenever no atomic is outstanding; "
                  "for notification-only programs a rule even gives exactly-once.",
        formula="exists rule(view) for notification-only programs (sat);  forall prog "
                "(<= 3 WRs), worlds, w. two_sided(w) => execs'(w) = 1, atomic(w) => "
                "execs'(w) <= 1, not FAIL => execs'(w) >= 1;  no atomics => no FAIL",
        check=_shift,
    ),
]
