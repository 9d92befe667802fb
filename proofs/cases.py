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
MEMORY = z3.ArraySort(INT, INT)  # the responder's whole memory: address -> value


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


def _observe(f: z3.FuncDeclRef, mem: z3.ArrayRef, executed: bool,
             opaque: bool) -> z3.ArithRef:
    """A read-only observer of the whole responder memory decides: any function of it and,
    when not `opaque`, of the responder NIC's expected PSN (2 if the WR executed, else 1)."""
    return f(mem) if opaque else f(mem, z3.IntVal(2 if executed else 1))


def _cas_mem(m: z3.ArrayRef, r: z3.ArithRef, e: z3.ArithRef,
             n: z3.ArithRef) -> z3.ArrayRef:
    return z3.If(m[r] == e, z3.Store(m, r, n), m)


def _memory_observer_case(op: str, opaque: bool, other_writer: bool) -> ProofVerdict:
    """T1: the WR lost, the memory as it was; T2: the WR executed (then, for CAS, a third
    party's CAS back; for WRITE, the receiver's reuse). The observer must REPLAY in T1 and
    not in T2. FADD needs no other writer: the initial memory is unknown, so T1 may start
    from the memory T2 ends in, M[r] + d (without `other_writer`: both start from M, known).
    CAS and WRITE start both from M; the other writer's store restores it (Z3 derives the
    equal arrays)."""
    arity = [MEMORY] if opaque else [MEMORY, INT]
    f = z3.Function("observe", *arity, INT)
    m, r, x = z3.Array("M", INT, INT), z3.Int("r"), z3.Int("x")
    t1 = m
    if op == "FADD":
        t2 = z3.Store(m, r, m[r] + x)
        t1 = t2 if other_writer else m
        facts = [x != 0]
    elif op == "CAS":  # CAS(r, e = M[r] -> x), then the third party's CAS(x -> M[r])
        t2 = _cas_mem(m, r, m[r], x)
        t2 = _cas_mem(t2, r, x, m[r]) if other_writer else t2
        facts = [x != m[r]]
    else:  # WRITE(r, x) over M[r] != x, then the receiver writes M[r] back
        t2 = z3.Store(z3.Store(m, r, x), r, m[r]) if other_writer else z3.Store(m, r, x)
        facts = [x != m[r]]
    return unsat(*facts, _observe(f, t1, False, opaque) == REPLAY,
                 _observe(f, t2, True, opaque) != REPLAY,
                 proved="unsat", refuted="an observer exists")


def _memory_observer(opaque: bool = True, other_writer: bool = True) -> ProofVerdict:
    for op in ("FADD", "CAS", "WRITE"):
        v = _memory_observer_case(op, opaque, other_writer)
        if v.status != "proved":
            v.detail = f"{op}: {v.detail}"
            return v
    return ProofVerdict("proved", "unsat for FADD, CAS with a third party, WRITE with reuse")


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
    Theorem(
        name="cases.memory_observer",
        group="cases",
        statement="A read-only observer of the whole responder memory cannot tell a lost WR "
                  "from an executed one, for every memory: an executed FADD leaves what a "
                  "lost one leaves from a memory one delta higher, a CAS undone by a third "
                  "party and a WRITE overwritten by buffer reuse leave the memory as before.",
        formula="forall M, r. not exists observe: Memory -> Decision. observe(T1) = REPLAY "
                "/\\ observe(T2) != REPLAY; FADD(d != 0): T1 lost from M[r += d], T2 "
                "executed from M; CAS(M[r] -> n != M[r]) then CAS(n -> M[r]), WRITE(v != "
                "M[r]) then the receiver's M[r]: T1 lost from M, T2 executed from M",
        check=_memory_observer,
        scope="one WR, the responder's whole memory (an array over all addresses, every "
              "content); every observer function of it; one other writer (third party, "
              "receiver) for CAS and WRITE",
        weakenings=(
            Weakening("the observer reads the expected PSN",
                      "the observer also reads the responder NIC's expected PSN (opacity "
                      "dropped)",
                      lambda: _memory_observer(opaque=False)),
            Weakening("no other writer",
                      "no third party and no buffer reuse, and the initial memory known "
                      "for FADD: T1 leaves M, T2 the WR's effect on M",
                      lambda: _memory_observer(other_writer=False)),
        ),
    ),
]
