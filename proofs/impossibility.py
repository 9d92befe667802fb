"""The impossibility half of the trilemma: under receiver-NIC opacity and zero-copy, no
failover decision rule gives exactly-once execution together with liveness.

The setting is `shift.proofs.decisions`: failure worlds from the RC prefix lemma, a rule
that is every function of what software can observe. Z3 shows the constraints of all
worlds unsatisfiable; the unsat core names the worlds that clash, and for one WRITE they
are the paper's T1 (request lost, then timeout) and T2 (executed, ACK lost, timeout).
"""

from __future__ import annotations

import z3
from shift.proofs import decisions as d
from shift.proofs.core import ProofVerdict, Theorem, Weakening, conclude, disj, solver

OPAQUE = d.View(counter=True)  # both hosts' software: A's completions, B's counter
SENDER = d.View(counter=False)  # A's software only: Rocq's sender_view


def clash(p: d.ProgramShape, view: d.View, req: d.Requirement, *extra: z3.BoolRef,
          staged: bool = False) -> tuple[z3.CheckSatResult, list[d.World], z3.Solver]:
    """Ask for a rule meeting `req` in every world; on unsat, the clashing worlds."""
    s = solver()
    s.add(*extra)
    tracked: dict[str, d.World] = {}
    for wd, c in d.constraints(p, d.free_rule(p, view), view, req, staged):
        tag = f"world_U{wd.u}_E{wd.e}"
        tracked[tag] = wd
        s.assert_and_track(c, z3.Bool(tag))
    r = s.check()
    core = [tracked[str(b)] for b in s.unsat_core()] if r == z3.unsat else []
    return r, core, s


def _t1_t2(view: d.View = OPAQUE, staged: bool = False) -> ProofVerdict:
    prog = [("WRITE", True)]
    r, core, s = clash(d.concrete(prog), view, d.exactly_once_live, staged=staged)
    if r != z3.unsat:
        return conclude(s, r, refuted="a rule exists")
    names = [o for o, _ in prog]
    lines = []
    for wd in sorted(core, key=lambda w: w.e):
        label = "T1" if wd.e == 0 else "T2"
        lines.append(f"{label}: " + "; ".join(wd.trace(names)))
    lines.append("equal views in both: A saw no completion and an error; B's software "
                 "saw no receive completion (counter 0)")
    ok = sorted((w.u, w.e) for w in core) == [(0, 0), (0, 1)]
    return ProofVerdict("proved" if ok else "unknown",
                   "unsat; the clashing worlds are T1 and T2" if ok else f"core {core}", lines)


def _no_rule(n: int, view: d.View = OPAQUE, staged: bool = False,
             one_sided: bool = True) -> ProofVerdict:
    p = d.program(n)
    has_one_sided = disj([d.one_sided(o) for o in p.ops[1:]]) if one_sided else True
    r, core, s = clash(p, view, d.exactly_once_live, p.wellformed(), has_one_sided,
                       staged=staged)
    return conclude(s, r, proved=f"unsat for every program of {n} WRs with a one-sided WR",
                    refuted="a rule exists")


def _no_rule_upto(n: int, view: d.View = OPAQUE, staged: bool = False,
                  one_sided: bool = True) -> ProofVerdict:
    for k in range(1, n + 1):
        v = _no_rule(k, view, staged, one_sided)
        if v.status != "proved":
            v.detail = f"{k} WRs: {v.detail}"
            return v
    return ProofVerdict("proved", f"unsat for every program of 1..{n} WRs with a one-sided WR")


def _send_sliding(view: d.View = SENDER) -> ProofVerdict:
    """Two SENDs, the rule sees only the requester (Rocq's sender_view): queue sliding."""
    prog = [("SEND", True), ("SEND", True)]
    r, core, s = clash(d.concrete(prog), view, d.exactly_once_live)
    if r != z3.unsat:
        return conclude(s, r, refuted="a rule exists")
    names = [o for o, _ in prog]
    return ProofVerdict("proved", "unsat: a replayed SEND that had executed consumes the next "
                   "receive WR (sliding), one that had not is lost",
                   [f"U={w.u} E={w.e}: " + "; ".join(w.trace(names)) for w in core])


def atomics_once_live(p: d.ProgramShape, w: int, o: d.Outcome) -> z3.BoolRef:
    """Rocq's Theorem 1 notion: SystemSafety (an executed FADD/CAS is not retried: applied
    at most once) and SystemLiveness (every outstanding WR is retried if it did not
    execute: applied at least once, no FAIL)."""
    return z3.Implies(o.pending, z3.And(o.decision != d.FAIL, o.execs >= 1,
                                        z3.Implies(d.atomic(p.ops[w]), o.execs <= 1)))


def _atomic_dilemma(ops: tuple[str, ...] = ("FADD", "CAS")) -> ProofVerdict:
    """For one WR of each op (signaled or not), no rule over both hosts' views meets
    Rocq's safety and liveness."""
    for op in ops:
        for sig in (False, True):
            r, core, s = clash(d.concrete([(op, sig)]), OPAQUE, atomics_once_live)
            if r != z3.unsat:
                v = conclude(s, r, refuted="a rule exists")
                v.detail = f"{op}: {v.detail}"
                return v
    return ProofVerdict("proved", f"unsat for one {' or one '.join(ops)}, signaled or not")


def impossible_with(view: d.View, n: int = 2, staged: bool = False) -> z3.CheckSatResult:
    """The impossibility query with the assumptions varied (for the weakening tests):
    sat means some rule gives exactly-once and liveness for some program with a
    one-sided WR."""
    p = d.program(n)
    r, _, _ = clash(p, view, d.exactly_once_live, p.wellformed(),
                    disj([d.one_sided(o) for o in p.ops[1:]]), staged=staged)
    return r


READS_EPSN = Weakening(
    "the rule reads the expected PSN",
    "the rule also reads the responder NIC's expected PSN (opacity dropped)",
    lambda: _t1_t2(d.View(counter=True, epsn=True)))
STAGED = Weakening(
    "the responder stages",
    "the responder copies a payload into place once per sequence number (zero-copy "
    "dropped)",
    lambda: _t1_t2(staged=True))

THEOREMS = [
    Theorem(
        name="trilemma.t1_t2",
        group="impossibility",
        statement="For one WRITE, no decision rule over both hosts' software views gives "
                  "exactly-once execution and liveness, and the two worlds that clash are "
                  "T1 (request lost, timeout) and T2 (executed, ACK lost, timeout).",
        formula="not exists rule. forall (U,E) in {0<=U<=E<=1, U<1}. "
                "EO(E + [rule(view(U,E)) = REPLAY]) /\\ rule(view(U,E)) != FAIL;  "
                "unsat core = {(0,0), (0,1)}",
        check=_t1_t2,
        scope="one signaled WRITE; the failure worlds of transport.rc_prefix; every rule "
              "over A's completions and B's receive counter",
        weakenings=(READS_EPSN, STAGED),
    ),
    Theorem(
        name="trilemma.no_transparent_rule",
        group="impossibility",
        statement="For every program of up to three WRs that contains a one-sided WR "
                  "(any ops, any signaled flags), no decision rule over what the two "
                  "hosts' software can observe gives exactly-once execution and liveness "
                  "under opacity and zero-copy.",
        formula="forall prog (|prog| <= 3, exists w. one_sided(prog[w])). not exists rule. "
                "forall worlds. forall outstanding w. execs'(w) = 1 /\\ rule(...) != FAIL",
        check=lambda: _no_rule_upto(3),
        scope="every program of 1..3 WRs with a one-sided WR (every op, signaled flag); "
              "every failure world; every rule over both hosts' software views; not "
              "parametric in n",
        weakenings=(
            Weakening("no one-sided WR",
                      "the program may be notifications only (SEND, WRITE_WITH_IMM), "
                      "which B's counter can tell apart",
                      lambda: _no_rule_upto(3, one_sided=False)),
            Weakening(READS_EPSN.name, READS_EPSN.hypothesis,
                      lambda: _no_rule_upto(3, view=d.View(counter=True, epsn=True))),
            Weakening(STAGED.name, STAGED.hypothesis,
                      lambda: _no_rule_upto(3, staged=True)),
        ),
    ),
    Theorem(
        name="trilemma.send_sliding",
        group="impossibility",
        statement="With two SENDs and a rule that sees only the requester (the Rocq "
                  "sender view), no rule delivers every notification exactly once: "
                  "replaying an executed SEND slides the receive queue.",
        formula="not exists rule(sender_view). forall worlds. notes exactly once /\\ live",
        check=_send_sliding,
        scope="two signaled SENDs; every failure world; every rule over A's completions",
        weakenings=(Weakening(
            "the rule sees B's counter",
            "the rule also sees B's count of completed receives (SHIFT's handshake)",
            lambda: _send_sliding(d.View(counter=True))),),
    ),
    Theorem(
        name="trilemma.atomic_dilemma",
        group="impossibility",
        statement="For one FADD or one CAS, no decision rule over both hosts' software "
                  "views both never applies the atomic twice and always re-executes it "
                  "when it was lost (the Rocq development's Theorem 1, in these worlds).",
        formula="forall op in {FADD, CAS}. not exists rule. forall worlds. "
                "execs'(w) <= 1 /\\ execs'(w) >= 1 /\\ rule(...) != FAIL",
        check=_atomic_dilemma,
        scope="one WR (FADD or CAS, signaled or not); the failure worlds of "
              "transport.rc_prefix; every rule over A's completions and B's counter",
        weakenings=(Weakening(
            "the operation is idempotent",
            "the lone WR is a WRITE, which Rocq's safety lets the rule retry",
            lambda: _atomic_dilemma(("WRITE",))),),
    ),
]
