"""The consensus-number facts the trilemma's argument leans on (Herlihy's hierarchy), as
bounded Z3 statements: a read-only probe (or a register a process writes and the other
reads) cannot solve two-process consensus; FADD can; CAS can for any number of processes
(here: two and three).

A protocol is a fixed sequence of shared-memory steps per process; a *schedule* is an
interleaving of the processes' steps (every one is enumerated); a process decides from its
own input and what its steps returned. Consensus: in every schedule and for every input
pair, the processes decide the same value (agreement), one of the inputs (validity).
Inputs are integers; the register's empty value is -1 (no input is negative).

The impossibility is over every decision function (uninterpreted, one per process); the
possibilities are the textbook protocols written out and proved for every schedule and
every input.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import permutations

import z3
from shift.proofs.core import ProofVerdict, Theorem, Weakening, conj, disj, unsat, valid

EMPTY = -1
Step = tuple[int, int]  # (process, its step number)


def schedules(steps: Sequence[int]) -> list[list[Step]]:
    """Every interleaving of the processes' steps, each process's in its own order."""
    tokens = [p for p, k in enumerate(steps) for _ in range(k)]
    out = []
    for order in sorted(set(permutations(tokens))):
        seen = [0] * len(steps)
        sched = []
        for p in order:
            sched.append((p, seen[p]))
            seen[p] += 1
        out.append(sched)
    return out


def _consensus(decided: Sequence[z3.ArithRef], inputs: Sequence[z3.ArithRef]) -> z3.BoolRef:
    agree = conj([x == decided[0] for x in decided[1:]])
    return z3.And(agree, conj([disj([d == x for x in inputs]) for d in decided]))


def _inputs(n: int) -> tuple[list[z3.ArithRef], list[z3.BoolRef]]:
    xs = [z3.Int(f"x{i}") for i in range(n)]
    return xs, [x >= 0 for x in xs]


# -- registers: write your input, read the other's ------------------------------------------

def _register_runs(atomic_swap: bool) -> list[list[Step]]:
    return schedules([1, 1] if atomic_swap else [2, 2])


def _register_reads(sched: list[Step], xs: list[z3.ArithRef],
                    atomic_swap: bool) -> list[z3.ArithRef]:
    """What each process's read returns: the other's input once written, else empty. With
    `atomic_swap` the write and the read are one step on one shared register."""
    reads: list[z3.ArithRef] = [z3.IntVal(EMPTY), z3.IntVal(EMPTY)]
    written = [False, False]
    for p, k in sched:
        if atomic_swap:
            reads[p] = xs[1 - p] if written[1 - p] else z3.IntVal(EMPTY)
            written[p] = True
        elif k == 0:
            written[p] = True
        else:
            reads[p] = xs[1 - p] if written[1 - p] else z3.IntVal(EMPTY)
    return reads


def _register_two_process(atomic_swap: bool = False) -> ProofVerdict:
    """No decision functions f0, f1 of (own input, value read) give binary consensus in
    every schedule: Z3 shows the constraints of the 4 input pairs x 6 schedules unsat (an
    impossibility for binary inputs is one for any inputs)."""
    f = [z3.Function(f"decide{i}", z3.IntSort(), z3.IntSort(), z3.IntSort()) for i in range(2)]
    runs = []
    for pair in [(0, 0), (0, 1), (1, 0), (1, 1)]:
        xs = [z3.IntVal(x) for x in pair]
        for sched in _register_runs(atomic_swap):
            reads = _register_reads(sched, xs, atomic_swap)
            runs.append(_consensus([f[i](xs[i], reads[i]) for i in range(2)], xs))
    return unsat(*runs, proved="unsat: no decision functions work in every schedule",
                 refuted="decision functions exist")


# -- FADD: announce, fetch-and-add, read the other's announcement ---------------------------

def _fadd_decisions(sched: list[Step], xs: list[z3.ArithRef], atomic: bool) -> list[z3.ExprRef]:
    """Each process: announce its input, take a ticket from the counter (FADD 1, or a read
    then a write when not `atomic`), decide its own input on ticket 0, else the other's
    announcement (read after its ticket)."""
    counter, announced = 0, [False, False]
    ticket, seen, saw = [0, 0], [0, 0], [z3.IntVal(EMPTY), z3.IntVal(EMPTY)]
    read_at = 2 if atomic else 3
    for p, k in sched:
        if k == 0:
            announced[p] = True
        elif k == 1:
            seen[p] = counter
            if atomic:
                ticket[p], counter = counter, counter + 1
        elif k == 2 and not atomic:
            ticket[p], counter = seen[p], seen[p] + 1
        if k == read_at:
            saw[p] = xs[1 - p] if announced[1 - p] else z3.IntVal(EMPTY)
    return [xs[p] if ticket[p] == 0 else saw[p] for p in range(2)]


def _fadd_two_process(atomic: bool = True) -> ProofVerdict:
    xs, pos = _inputs(2)
    steps = [3, 3] if atomic else [4, 4]
    runs = [_consensus(_fadd_decisions(s, xs, atomic), xs) for s in schedules(steps)]
    return valid(conj(runs), assumptions=pos)


# -- CAS: compare-and-swap your input into an empty register, read it -----------------------

def _cas_decisions(sched: list[Step], xs: list[z3.ArithRef],
                   compares: bool) -> list[z3.ArithRef]:
    reg: z3.ArithRef = z3.IntVal(EMPTY)
    out: list[z3.ArithRef] = [z3.IntVal(EMPTY)] * len(xs)
    for p, k in sched:
        if k == 0:
            reg = z3.If(reg == EMPTY, xs[p], reg) if compares else xs[p]
        else:
            out[p] = reg
    return out


def _cas_any_process(compares: bool = True, upto: int = 3) -> ProofVerdict:
    for n in range(2, upto + 1):
        xs, pos = _inputs(n)
        runs = [_consensus(_cas_decisions(s, xs, compares), xs) for s in schedules([2] * n)]
        v = valid(conj(runs), assumptions=pos)
        if v.status != "proved":
            v.detail = f"{n} processes: {v.detail}"
            return v
    return ProofVerdict("proved", f"every schedule of 2..{upto} processes, every input")


THEOREMS = [
    Theorem(
        name="consensus.register_two_process",
        group="consensus",
        statement="Two processes that each write their input to a register and read the "
                  "other's cannot solve consensus, whatever each decides from its input and "
                  "what it read; a read-only probe, which reads a memory no one writes, is "
                  "the special case that ignores the read and cannot either.",
        formula="not exists f0, f1. forall x0, x1 in {0, 1}. forall schedule of <W0, R0>, "
                "<W1, R1>. f0(x0, r0) = f1(x1, r1) in {x0, x1}",
        check=_register_two_process,
        scope="two processes, one write then one read each, all 6 schedules, binary "
              "inputs (so any inputs); not Herlihy's theorem for any number of steps",
        weakenings=(Weakening(
            "the write and read are one atomic swap",
            "a process swaps its input into one shared register and gets the old value "
            "(read-modify-write, consensus number 2)",
            lambda: _register_two_process(atomic_swap=True)),),
    ),
    Theorem(
        name="consensus.fadd_two_process",
        group="consensus",
        statement="FADD solves two-process consensus: announce your input, take a ticket "
                  "with FADD(1), decide your own input on ticket 0 and the other's "
                  "announcement otherwise.",
        formula="forall x0, x1 >= 0. forall schedule of <announce, FADD, read> x 2. "
                "d0 = d1 in {x0, x1}",
        check=_fadd_two_process,
        scope="two processes, three steps each, all 20 schedules, every input",
        weakenings=(Weakening(
            "the ticket is a read then a write",
            "the counter is read and then written back plus one, two steps instead of one "
            "atomic FADD",
            lambda: _fadd_two_process(atomic=False)),),
    ),
    Theorem(
        name="consensus.cas_any_process",
        group="consensus",
        statement="CAS solves consensus for two and three processes: compare-and-swap your "
                  "input into an empty register, then decide the value it holds.",
        formula="forall n in {2, 3}. forall x >= 0. forall schedule of <CAS(R, empty, x_i), "
                "read R> x n. all decide the same input",
        check=_cas_any_process,
        scope="two and three processes, two steps each, all 6 and 90 schedules, every "
              "input; not every n (Rocq's final_register_is_winner is)",
        weakenings=(Weakening(
            "the CAS does not compare",
            "each process writes its input blindly (a register write)",
            lambda: _cas_any_process(compares=False)),),
    ),
]
