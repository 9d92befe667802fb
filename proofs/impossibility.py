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
from shift.proofs.core import ProofVerdict, Theorem, conclude, disj, solver


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


def _t1_t2() -> ProofVerdict:
    prog = [("WRITE", True)]
    r, core, s = clash(d.concrete(prog), d.View(counter=True), d.exactly_once_live)
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


def _no_rule(n: int) -> ProofVerdict:
    p = d.program(n)
    has_one_sided = disj([d.one_sided(o) for o in p.ops[1:]])
    r, core, s = clash(p, d.View(counter=True), d.exactly_once_live, p.wellformed(),
                       has_one_sided)
    return conclude(s, r, proved=f"unsat for every program of {n} WRs with a one-sided WR",
                    refuted="a rule exists")


def _no_rule_upto(n: int) -> ProofVerdict:
    for k in range(1, n + 1):
        v = _no_rule(k)
        if v.status != "proved":
            return v
    return ProofVerdict("proved", f"unsat for every program of 1..{n} WRs with a one-sided WR")


def _send_sliding() -> ProofVerdict:
    """Two SENDs, the rule sees only the requester (Rocq's sender_view): queue sliding."""
    prog = [("SEND", True), ("SEND", True)]
    r, core, s = clash(d.concrete(prog), d.View(counter=False), d.exactly_once_live)
    if r != z3.unsat:
        return ProofVerdict("refuted" if r == z3.sat else "unknown", str(r))
    names = [o for o, _ in prog]
    return ProofVerdict("proved", "unsat: a replayed SEND that had executed consumes the next "
                   "receive WR (sliding), one that had not is lost",
                   [f"U={w.u} E={w.e}: " + "; ".join(w.trace(names)) for w in core])


def impossible_with(view: d.View, n: int = 2, staged: bool = False) -> z3.CheckSatResult:
    """The impossibility query with the assumptions varied (for the weakening tests):
    sat means some rule gives exactly-once and liveness for some program with a
    one-sided WR."""
    p = d.program(n)
    r, _, _ = clash(p, view, d.exactly_once_live, p.wellformed(),
                    disj([d.one_sided(o) for o in p.ops[1:]]), staged=staged)
    return r


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
    ),
    Theorem(
        name="trilemma.send_sliding",
        group="impossibility",
        statement="With two SENDs and a rule that sees only the requester (the Rocq "
                  "sender view), no rule delivers every notification exactly once: "
                  "replaying an executed SEND slides the receive queue.",
        formula="not exists rule(sender_view). forall worlds. notes exactly once /\\ live",
        check=_send_sliding,
    ),
]
