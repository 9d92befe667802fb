"""Workloads.tla's programs in Z3: N WRs, symbolic (every op, signaled flag, region, value
and CAS compare value) or concrete, and what the protocol encoding (`protocol`) reads off
them: notifications, writers, the memory a prefix of the program leaves.

The concrete programs, `WORKLOADS`, are Program(k) of the packaged spec/Workloads.tla, read
by `shift.spec.workloads` (the reader the model uses too), not restated here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import z3
from shift.proofs.core import conj
from shift.proofs.decisions import CAS, FADD, OPS, READ, SEND, WRITE, WRITE_IMM
from shift.spec.catalog import packaged_spec_dir
from shift.spec.workloads import WR, read_workloads


@dataclass(frozen=True)
class Program:
    """N symbolic WRs, indexed 1..N (Workloads.tla's WR records)."""

    n: int
    op: list[z3.ArithRef]
    sig: list[z3.BoolRef]
    region: list[z3.ArithRef]
    value: list[z3.ArithRef]    # a CAS's swap value
    compare: list[z3.ArithRef]  # a CAS's compare value (0 for the other ops)

    def two_sided(self, w: int) -> z3.BoolRef:
        return z3.Or(self.op[w] == WRITE_IMM, self.op[w] == SEND)

    def atomic(self, w: int) -> z3.BoolRef:
        return z3.Or(self.op[w] == FADD, self.op[w] == CAS)

    def writer(self, w: int) -> z3.BoolRef:
        return z3.And(z3.Or(self.op[w] == WRITE, self.op[w] == WRITE_IMM,
                            self.op[w] == FADD, self.op[w] == CAS), self.region[w] != 0)

    def nb(self, k: int) -> z3.ArithRef:
        """NotesBefore(program, k)."""
        return z3.Sum([z3.IntVal(0)] + [z3.If(self.two_sided(w), 1, 0)
                                        for w in range(1, min(k, self.n) + 1)])

    def note(self, w: int) -> z3.ArithRef:
        """The WR's `note` field: its number among the notifications, 0 if one-sided."""
        return z3.If(self.two_sided(w), self.nb(w), 0)

    def at(self, table: Callable[[int], z3.ExprRef], k: z3.ArithRef, lo: int = 0,
           default: z3.ExprRef | None = None) -> z3.ExprRef:
        """table(k) for a symbolic k in lo..n (an ITE chain)."""
        out = default if default is not None else table(self.n)
        for i in range(self.n, lo - 1, -1):
            out = z3.If(k == i, table(i), out)
        return out

    def note_wr(self, j: z3.ArithRef) -> z3.ArithRef:
        """NoteWr(program, j): the WR carrying notification j (0 if none)."""
        out: z3.ArithRef = z3.IntVal(0)
        for w in range(self.n, 0, -1):
            out = z3.If(z3.And(self.two_sided(w), self.nb(w) == j), z3.IntVal(w), out)
        return out

    def payload(self, w: z3.ArithRef) -> z3.ArithRef:
        """What WR w places in the receive WR it consumes: a SEND its value, anything
        else nothing (0, as the buffer starts)."""
        return self.at(lambda i: z3.If(self.op[i] == SEND, self.value[i], 0) if i else
                       z3.IntVal(0), w, default=z3.IntVal(0))

    def apply(self, w: int, old: z3.ArithRef) -> z3.ArithRef:
        """Execute's memory update of region 1 by WR w (Workloads.tla's Applied)."""
        swapped = z3.If(old == self.compare[w], self.value[w], old)
        new = z3.If(z3.Or(self.op[w] == WRITE, self.op[w] == WRITE_IMM), self.value[w],
                    z3.If(self.op[w] == FADD, old + self.value[w],
                          z3.If(self.op[w] == CAS, swapped, old)))
        return z3.If(z3.And(self.writer(w), self.region[w] == 1), new, old)

    def value_after(self, k: int) -> z3.ArithRef:
        """ValueAfter(program, 1, k)."""
        v: z3.ArithRef = z3.IntVal(0)
        for w in range(1, k + 1):
            v = self.apply(w, v)
        return v

    def wellformed(self) -> z3.BoolRef:
        """Any op, signaled flag and value; region 0 or 1; a notification writes no
        region (as in Workloads.tla: DataAtNotification compares memory with the value
        *before* the notification, so a WRITE_WITH_IMM carrying data would break it by
        definition)."""
        return conj([z3.And(z3.Or(*[self.op[w] == o for o in OPS.values()]),
                            z3.Or(self.region[w] == 0, self.region[w] == 1),
                            z3.Implies(self.two_sided(w), self.region[w] == 0))
                     for w in range(1, self.n + 1)])

    def no_reuse(self) -> z3.BoolRef:
        """No buffer reuse: at most one WR writes the region."""
        return conj([z3.Not(z3.And(self.writer(v), self.writer(w)))
                     for v in range(1, self.n + 1) for w in range(v + 1, self.n + 1)])

    def nccl_signaling(self) -> z3.BoolRef:
        """Only notifications and atomics are signaled (NCCL's Simple protocol: bulk
        WRITEs unsignaled, the WRITE_WITH_IMM signaled)."""
        return conj([z3.Implies(self.sig[w], z3.Or(self.two_sided(w), self.atomic(w)))
                     for w in range(1, self.n + 1)])

    def num_notes(self) -> z3.ArithRef:
        return self.nb(self.n)


def program(n: int) -> Program:
    return Program(n, [z3.IntVal(-1)] + [z3.Int(f"op{w}") for w in range(1, n + 1)],
                   [z3.BoolVal(False)] + [z3.Bool(f"sig{w}") for w in range(1, n + 1)],
                   [z3.IntVal(0)] + [z3.Int(f"region{w}") for w in range(1, n + 1)],
                   [z3.IntVal(0)] + [z3.Int(f"value{w}") for w in range(1, n + 1)],
                   [z3.IntVal(0)] + [z3.Int(f"compare{w}") for w in range(1, n + 1)])


Wr = tuple[str, int, int, bool, int]  # (op, region, value, signaled, compare)
Wrs = list[Wr]


def fixed(prog: Wrs) -> Program:
    """A concrete program: (op, region, value, signaled, compare) per WR, as
    Workloads.tla's WR records (compare: a CAS's, 0 otherwise)."""
    return Program(len(prog), [z3.IntVal(-1)] + [z3.IntVal(OPS[w[0]]) for w in prog],
                   [z3.BoolVal(False)] + [z3.BoolVal(w[3]) for w in prog],
                   [z3.IntVal(0)] + [z3.IntVal(w[1]) for w in prog],
                   [z3.IntVal(0)] + [z3.IntVal(w[2]) for w in prog],
                   [z3.IntVal(0)] + [z3.IntVal(w[4]) for w in prog])


def encoded_region(wrs: Sequence[WR]) -> int:
    """The encoding has one region, region 1. It stands for the one region a direction's
    WRs use (workload 6's CAS: region 2), else for region 1."""
    regions = {w.region for w in wrs} - {0}
    return regions.pop() if len(regions) == 1 else 1


def _one_region(wrs: Sequence[WR]) -> Wrs:
    """The WRs as the encoding takes them: encoded_region renamed 1."""
    r = encoded_region(wrs)
    return [(w.op, 1 if w.region == r else w.region, w.value, w.signaled, w.compare)
            for w in wrs]


def _directions() -> dict[tuple[int, str], Wrs]:
    """Without the workloads with an application error (a WR with a bad key): the proofs'
    relation has no application errors."""
    spec = read_workloads(packaged_spec_dir())
    return {(k, h): _one_region(spec.program_of(k, h))
            for k in spec.programs for h in ("A", "B") if spec.program_of(k, h)
            if all(w.key == "OK" for w in spec.program(k) + spec.bprogram(k))}


# Each direction of every workload as a one-way program: host h's WRs to its peer (A's
# Program(k), B's BProgram(k)). Both hosts run the same protocol for their own WRs, so a
# two-way run is two runs of the relation, one per direction, each about its sender's
# WRs and the receiver's region 1, or the one region they write (tests/proofs/
# test_agreement.py checks that on the model's runs).
DIRECTIONS: dict[tuple[int, str], Wrs] = _directions()

# The workloads where B posts no WR: A's direction is the whole workload.
WORKLOADS: dict[int, Wrs] = {k: prog for (k, h), prog in DIRECTIONS.items()
                             if h == "A" and (k, "B") not in DIRECTIONS}

_ = READ  # every op of Workloads.tla is in OPS; READ changes nothing here
