"""The achievability half of the trilemma: drop any one of the three properties and a
concrete design keeps the other two and liveness.

Each theorem does three things:
1. *sat with a witness*: with the dropped property's observation (or deduplication)
   allowed, Z3 finds a decision rule that works in every failure world (the free rule of
   `decisions`), and prints its decisions in T1 and T2;
2. *the design's rule, bounded*: the rule written out meets the requirement in every
   failure world of every program up to `BOUND` WRs (all ops, all signaled flags);
3. *the design's rule, for every n* (receiver query, staging): over every state of an RC
   path that `transport.rc_prefix`'s inductive invariant allows — any queue length, the
   responder's execution counts as the transport left them — the rule's decision and the
   design's mechanism (the expected PSN it reads; the staging buffer's record of what it
   copied) apply each outstanding WR exactly once.

Each check takes the mechanism as a parameter, so that `weakenings` can take it away (the
rule reads the requester's acknowledged PSN instead of the responder's expected PSN; the
staging buffer forgets; SHIFT's rule loses its counter filter or its atomic refusal) and
show the theorem then fails.
"""

from __future__ import annotations

import z3
from shift.proofs import decisions as d
from shift.proofs import transport
from shift.proofs.core import ProofVerdict, Theorem, Weakening, conj, solver, valid

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


def requester_ack_rule(p: d.ProgramShape, wd: d.World, w: int,
                       args: list[z3.ExprRef]) -> z3.ArithRef:
    """The same rule reading what A's software sees in place of the responder's expected
    PSN: replay every WR after the last completion A polled."""
    return z3.If(z3.IntVal(w) > args[len(p.args())], d.REPLAY, d.SKIP)


def _outstanding_path() -> tuple[transport.Path, z3.ArithRef, z3.ArithRef, list[z3.BoolRef]]:
    """Any state of an RC path that the RC prefix invariant allows, any n, with an
    outstanding WR w: after the last completion A polled (`last`, acknowledged)."""
    s = transport.path("")
    w, last = z3.Ints("w last")
    return s, w, last, [transport.invariant(s), last >= 0, last < s.una, last < w, w <= s.n]


def _receiver_query_parametric(reads_epsn: bool = True) -> ProofVerdict:
    """For every n: the responder executed w `execs[w]` times (the transport's own count);
    the rule replays w when w >= the PSN it reads; each outstanding w then executes once."""
    s, w, _, assume = _outstanding_path()
    threshold = s.epsn if reads_epsn else s.una
    return valid(s.execs[w] + z3.If(w >= threshold, 1, 0) == 1, assumptions=assume)


def _receiver_query(reads_epsn: bool = True) -> ProofVerdict:
    view = d.View(counter=True, epsn=reads_epsn)
    rule = receiver_query_rule if reads_epsn else requester_ack_rule
    allowed = list(d.OPS.values())
    return _combine(_witness(view, d.exactly_once_live, False, allowed),
                    _holds(rule, view, d.exactly_once_live, False, allowed),
                    _receiver_query_parametric(reads_epsn))


# -- drop zero-copy: Staging deduplicates by sequence number ------------------------------

def replay_all(p: d.ProgramShape, wd: d.World, w: int, args: list[z3.ExprRef]) -> z3.ArithRef:
    """Failover.tla's skip "none": replay every outstanding WR."""
    return z3.IntVal(d.REPLAY)


def _staging_parametric(remembers: bool = True) -> ProofVerdict:
    """For every n: the staging buffer records the sequence numbers it copied into place
    (`copied[q]` exactly when the transport executed q); a replayed WR is copied only if
    not recorded; replaying every outstanding WR, each is then applied once."""
    s, w, _, assume = _outstanding_path()
    copied, q = z3.Array("copied", z3.IntSort(), z3.BoolSort()), z3.Int("q")
    record = z3.ForAll([q], copied[q] == (s.execs[q] > 0))
    applied = s.execs[w] + z3.If(copied[w], 0, 1)  # replay_all re-posts w: copied unless recorded
    return valid(applied == 1, assumptions=assume + ([record] if remembers else []))


def _staging(remembers: bool = True) -> ProofVerdict:
    """`remembers`: the staging buffer keeps its record of copied sequence numbers across
    the failover; without it the responder applies a replayed WR again (zero-copy)."""
    view = d.View(counter=False)  # Staging needs no counter either
    allowed = list(d.OPS.values())
    return _combine(_witness(view, d.exactly_once_live, remembers, allowed),
                    _holds(replay_all, view, d.exactly_once_live, remembers, allowed),
                    _staging_parametric(remembers))


# -- drop exactly-once: SHIFT ---------------------------------------------------------------

def shift_rule(filters: bool = True, refuses: bool = True) -> d.Rule:
    """SHIFT's failover decision: with an atomic outstanding, fail (refuse); otherwise
    replay every outstanding WR except the notifications the peer's counter covers.
    `filters=False` drops the counter filter, `refuses=False` the atomic refusal."""
    def rule(p: d.ProgramShape, wd: d.World, w: int, args: list[z3.ExprRef]) -> z3.ArithRef:
        last = args[len(p.args())]  # the last completion A polled
        atomic_out = z3.Or(*[z3.And(z3.IntVal(v) > last, d.atomic(p.ops[v]))
                             for v in range(1, p.n + 1)])
        skip = z3.BoolVal(False)
        if filters:  # args[-1]: B's count of completed receives
            skip = z3.And(d.two_sided(p.ops[w]), p.notes_before(w) <= args[-1])
        action = z3.If(skip, d.SKIP, d.REPLAY)
        return z3.If(atomic_out, d.FAIL, action) if refuses else action
    return rule


def _shift_live(rule: d.Rule) -> ProofVerdict:
    """Without atomics SHIFT never fails: it is live."""
    def live(p: d.ProgramShape, w: int, o: d.Outcome) -> z3.BoolRef:
        return z3.Implies(o.pending, o.decision != d.FAIL)
    no_atomics = [d.WRITE, d.WRITE_IMM, d.SEND, d.READ]
    return _holds(rule, d.View(counter=True), live, False, no_atomics)


def _shift(filters: bool = True, refuses: bool = True) -> ProofVerdict:
    """`filters`: the rule sees B's counter and skips the notifications it covers (the
    witness too gets the counter only then)."""
    view = d.View(counter=filters)
    notes_only = [d.WRITE_IMM, d.SEND]
    rule = shift_rule(filters, refuses)
    return _combine(_witness(view, d.exactly_once_live, False, notes_only, n=2),
                    _holds(rule, view, d.shift_corner, False, list(d.OPS.values())),
                    _shift_live(rule))


THEOREMS = [
    Theorem(
        name="achieve.receiver_query",
        group="achievability",
        statement="Dropping opacity, a rule that reads the responder's expected PSN and "
                  "replays exactly the WRs at or after it gives exactly-once execution, "
                  "zero-copy and liveness, for every program and failure world.",
        formula="exists rule(view + epsn) (sat);  forall prog (<= 3 WRs), worlds, w. "
                "execs'(w) = 1 /\\ live for rule = (w >= epsn ? REPLAY : SKIP);  "
                "forall n, forall RC path state s with Inv_rc(s), last < una, last < w <= n: "
                "s.execs[w] + [w >= s.epsn] = 1",
        check=_receiver_query,
        scope="the rule: every program of 1..3 WRs (every op, signaled flag), every "
              "failure world (U, E); the rule over the transport: every n, every state "
              "transport.rc_prefix's invariant allows; one failover, backup healthy",
        weakenings=(Weakening(
            "reads the requester's acknowledged PSN",
            "the rule reads what A's software sees (its last completion, una) in place of "
            "the responder NIC's expected PSN: opacity kept",
            lambda: _receiver_query(reads_epsn=False)),),
    ),
    Theorem(
        name="achieve.staging",
        group="achievability",
        statement="Dropping zero-copy, replaying every outstanding WR into a staging "
                  "buffer that the receiver copies from once per sequence number gives "
                  "exactly-once execution, opacity and liveness.",
        formula="exists rule(view) (sat, staged);  forall prog (<= 3 WRs), worlds, w. "
                "max([w <= E], [REPLAY]) = 1 /\\ live for rule = REPLAY;  forall n, "
                "forall s with Inv_rc(s), copied[q] = (s.execs[q] > 0): "
                "s.execs[w] + [not copied[w]] = 1",
        check=_staging,
        scope="as achieve.receiver_query; the staging buffer as a record of the sequence "
              "numbers copied into place (its size unbounded)",
        weakenings=(Weakening(
            "the staging buffer forgets",
            "the responder keeps no record of the sequence numbers it copied (a replayed "
            "WR is applied again, as with zero-copy)",
            lambda: _staging(remembers=False)),),
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
        scope="every program of 1..3 WRs (every op, signaled flag), every failure world; "
              "the witness: notification-only programs of 2 WRs; not parametric in n",
        weakenings=(
            Weakening("no counter filter",
                      "the rule does not see B's receive counter and replays every "
                      "outstanding notification",
                      lambda: _shift(filters=False)),
            Weakening("no atomic refusal",
                      "the rule replays an outstanding FADD or CAS instead of returning "
                      "the error",
                      lambda: _shift(refuses=False)),
        ),
    ),
]
