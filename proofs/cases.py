"""The authors' cases (taooceros/shift-verification, Lemma 2 and the variants of
Theorem 1), with memory: why replaying is unsafe for each operation, and why a read-only
probe of the responder's memory (consensus number 1) cannot tell T1 from T2 either.

Each probe theorem gives the rule one more observation than `trilemma.*`: the value the
failover layer reads back from the target region over the backup path after the failure.
The rule is an uninterpreted function of that value; Z3 shows no such function is right
in both worlds, for every initial value and every operand.
"""

from __future__ import annotations

import z3
from shift.proofs.core import ProofVerdict, Theorem, Weakening, unsat, valid
from shift.proofs.decisions import FAIL, REPLAY

INT = z3.IntSort()


def _fadd_not_idempotent(nonzero: bool = True) -> ProofVerdict:
    m, delta = z3.Ints("m delta")
    once_mem, once_ret = m + delta, m
    twice_mem, twice_ret = once_mem + delta, once_mem
    return valid(z3.And(twice_mem != once_mem, twice_ret != once_ret),
                 assumptions=[delta != 0] if nonzero else [])


def _cas(m: z3.ArithRef, e: z3.ArithRef, n: z3.ArithRef,
         compares: bool = True) -> tuple[z3.ArithRef, z3.BoolRef]:
    """exec_cas of the Rocq development: the new memory and the success flag. Without
    `compares`, a blind swap: it writes n and reports success whatever m held."""
    if not compares:
        return n, z3.BoolVal(True)
    return z3.If(m == e, n, m), m == e


def _cas_idempotent_iff(compares: bool = True) -> ProofVerdict:
    m, e, n = z3.Ints("m e n")
    m1, ok1 = _cas(m, e, n, compares)
    m2, ok2 = _cas(m1, e, n, compares)
    idempotent = z3.And(m1 == m2, ok1 == ok2, m == m1)  # same memory, same (ok, old)
    return valid(idempotent == z3.Or(m != e, e == n))


def _probe_unsat(*constraints: z3.BoolRef) -> ProofVerdict:
    return unsat(*constraints, proved="unsat: no function of the probed value is right in both",
                 refuted="a probe-based rule exists")


def _fadd_probe(initial_known: bool = False) -> ProofVerdict:
    """T1(x): FADD lost, probe reads x. T2(x): FADD applied, ACK lost, probe reads x+d.
    Safety: the region ends at x + d (applied exactly once); liveness: no FAIL. The rule
    must be right whatever x the region held; `initial_known` fixes x = 0."""
    rule = z3.Function("rule", INT, INT)
    x, delta = z3.Ints("x delta")

    def ok(initial: z3.ArithRef, applied: bool) -> z3.BoolRef:
        probe = initial + delta if applied else initial
        dec = rule(probe)
        final = probe + z3.If(dec == REPLAY, delta, 0)
        return z3.And(dec != FAIL, final == initial + delta)
    if initial_known:
        return _probe_unsat(delta != 0, ok(z3.IntVal(0), False), ok(z3.IntVal(0), True))
    return _probe_unsat(delta != 0, z3.ForAll([x], z3.And(ok(x, False), ok(x, True))))


def _cas_aba_probe(third_party: bool = True) -> ProofVerdict:
    """T1: CAS(e->n) lost, probe reads e. T2: CAS applied (e->n), a third party's
    CAS(n->e) restores e (ABA), ACK lost, probe reads e. Safety: the sender's CAS
    succeeds exactly once; liveness: no FAIL. Without `third_party`, T2's probe reads n."""
    rule = z3.Function("rule", INT, INT)
    e, n = z3.Ints("e n")

    def ok(applied: bool) -> z3.BoolRef:
        # T1: untouched; T2: e -> n by the sender, n -> e by the third party (if any)
        mem = n if applied and not third_party else e
        succeeded = 1 if applied else 0
        dec = rule(mem)
        _, again = _cas(mem, e, n)
        total = succeeded + z3.If(z3.And(dec == REPLAY, again), 1, 0)
        return z3.And(dec != FAIL, total == 1)
    return _probe_unsat(e != n, ok(False), ok(True))


def _write_reuse_probe(reuse: bool = True) -> ProofVerdict:
    """T1(x): WRITE v lost, probe reads the old x. T2(u): WRITE v applied, then the
    receiver reuses the buffer (writes u != v), ACK lost, probe reads u. Safety: the
    region ends with its newest value (v in T1, u in T2: no stale overwrite). Without
    `reuse`, T2's probe reads v."""
    rule = z3.Function("rule", INT, INT)
    x, u, v = z3.Ints("x u v")

    def t1(old: z3.ArithRef) -> z3.BoolRef:
        dec = rule(old)
        return z3.And(dec != FAIL, z3.If(dec == REPLAY, v, old) == v)

    def t2(reused: z3.ArithRef) -> z3.BoolRef:
        dec = rule(reused)
        return z3.Implies(reused != v,
                          z3.And(dec != FAIL, z3.If(dec == REPLAY, v, reused) == reused))
    if not reuse:  # T2 reads v; replayed or not, the region keeps v
        return _probe_unsat(z3.ForAll([x], t1(x)), rule(v) != FAIL)
    return _probe_unsat(z3.ForAll([x], t1(x)), z3.ForAll([u], t2(u)))


THEOREMS = [
    Theorem(
        name="lemma2.fadd_not_idempotent",
        group="cases",
        statement="An FADD with a nonzero delta applied twice leaves different memory and "
                  "returns a different old value than applied once.",
        formula="forall m, d != 0. m + d + d != m + d /\\ m + d != m",
        check=_fadd_not_idempotent,
        scope="one memory cell, unbounded integers (Rocq: naturals)",
        weakenings=(Weakening("delta may be 0", "the FADD may add 0",
                              lambda: _fadd_not_idempotent(nonzero=False)),),
    ),
    Theorem(
        name="lemma2.cas_idempotent_iff",
        group="cases",
        statement="A CAS applied twice has the effect and result of one exactly when it "
                  "fails or swaps a value for itself, so a succeeding CAS is not idempotent.",
        formula="forall m e n. (cas(cas(m)) = cas(m) /\\ ok2 = ok1) <=> (m != e \\/ e = n)",
        check=_cas_idempotent_iff,
        scope="one memory cell, unbounded integers; the result is the success flag and "
              "the old value",
        weakenings=(Weakening("the CAS does not compare",
                              "the responder's CAS writes its new value without comparing "
                              "(a blind swap)",
                              lambda: _cas_idempotent_iff(compares=False)),),
    ),
    Theorem(
        name="cases.fadd_probe",
        group="cases",
        statement="Even reading the target region back after the failure, no rule replays "
                  "an FADD with delta != 0 exactly when it was lost, whatever the region "
                  "held before.",
        formula="forall d != 0. not exists rule. forall x. ok(T1(x), rule(x)) /\\ "
                "ok(T2(x), rule(x + d))",
        check=_fadd_probe,
        scope="one FADD, one cell read back; every initial value; every rule of the value "
              "read",
        weakenings=(Weakening("the initial value is known",
                              "the rule need be right for one initial value of the region "
                              "only (x = 0), not for every one",
                              lambda: _fadd_probe(initial_known=True)),),
    ),
    Theorem(
        name="cases.cas_aba_probe",
        group="cases",
        statement="With a third party's CAS restoring the old value (ABA), reading the "
                  "region cannot tell a lost CAS from an applied one, so no rule makes the "
                  "sender's CAS succeed exactly once and stay live.",
        formula="forall e != n. not exists rule. ok(T1, rule(e)) /\\ ok(T2_ABA, rule(e))",
        check=_cas_aba_probe,
        scope="one CAS, one cell read back, one third-party CAS; every rule of the value "
              "read",
        weakenings=(Weakening("no third party",
                              "no other writer restores the old value: T2's probe reads the "
                              "CAS's new value",
                              lambda: _cas_aba_probe(third_party=False)),),
    ),
    Theorem(
        name="cases.write_reuse_probe",
        group="cases",
        statement="When the receiver reuses the buffer after a WRITE landed, reading it "
                  "cannot tell that WRITE from a lost one, so no rule both delivers lost "
                  "WRITEs and never puts a stale WRITE over the newer data.",
        formula="not exists rule. (forall x. rule(x) = REPLAY) /\\ "
                "(forall u != v. rule(u) != REPLAY /\\ rule(u) != FAIL)",
        check=_write_reuse_probe,
        scope="one WRITE, one cell read back, one store of the receiver; every rule of the "
              "value read",
        weakenings=(Weakening("no buffer reuse",
                              "the receiver does not write the region before the failover "
                              "decision: T2's probe reads the WRITE's value",
                              lambda: _write_reuse_probe(reuse=False)),),
    ),
]
