"""Theorems, their verdicts, and the few Z3 idioms every proof module uses.

A theorem is a claim Z3 decides with one or more solver calls. Its `check` function
returns a `ProofVerdict`: `proved` (the negation is unsat, or the refutation we expect is
found), `refuted` (a counterexample or witness exists where the claim says none does),
or `unknown`. Each theorem declares the status it is expected to reach; `shift prove`
fails on any other. Some theorems are *expected* refutations: the claim is the
counterexample (e.g. "SHIFT's replay can put stale data under a notification").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import z3

Status = Literal["proved", "refuted", "unknown"]


@dataclass
class ProofVerdict:
    """What one theorem came to: the status, and a witness or counterexample if any."""

    status: Status
    detail: str = ""
    witness: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Reproduction:
    """Where the executable model (`shift.model`) meets a refutation whose witness is a
    trace of SHIFT's relation: the design of spec/designs.toml, the workload of
    Workloads.tla (its program is the one Z3 searched) and the property of Properties.tla
    the trace breaks. Z3's trace is a candidate until the model's explorer finds one too
    (`shift.reproduce`, docs/proofs.md)."""

    design: str
    workload: int
    property: str


@dataclass(frozen=True)
class Weakening:
    """One of a theorem's hypotheses taken away — the proofs' own seeded bug. `hypothesis`
    says, in the domain's words, what is dropped (the counter filter, the staging buffer's
    memory, what the rule sees); `check` is the theorem's check with it dropped, which must
    come to the opposite of the theorem's expected status (`killed`): a proof must then be
    refuted, an expected counterexample must then be gone."""

    name: str
    hypothesis: str
    check: Callable[[], ProofVerdict]


@dataclass(frozen=True)
class Theorem:
    """A named claim: `statement` in one plain-English sentence, `formula` in symbols,
    `scope` its bounds and abstraction; `reproduce`, for a refutation that is a trace of
    the relation, says where the model reproduces it; `weakenings`, the hypotheses it
    rests on, each shown to matter (`Weakening`)."""

    name: str
    group: str
    statement: str
    formula: str
    check: Callable[[], ProofVerdict]
    expected: Status = "proved"
    reproduce: Reproduction | None = None
    scope: str = ""
    weakenings: tuple[Weakening, ...] = ()


@dataclass
class Result:
    """A theorem's verdict and how long Z3 took."""

    theorem: Theorem
    verdict: ProofVerdict
    seconds: float

    @property
    def as_expected(self) -> bool:
        return self.verdict.status == self.theorem.expected


def run(theorem: Theorem) -> Result:
    """Check one theorem, timing it."""
    start = time.perf_counter()
    try:
        verdict = theorem.check()
    except z3.Z3Exception as e:  # a solver failure is "unknown", not a crash
        verdict = ProofVerdict("unknown", f"z3: {e}")
    return Result(theorem, verdict, time.perf_counter() - start)


OPPOSITE: dict[Status, Status] = {"proved": "refuted", "refuted": "proved"}


def killed(theorem: Theorem, verdict: ProofVerdict) -> bool:
    """A weakening kills its theorem when the check comes to the opposite status: a
    counterexample where a proof was, no counterexample where one was expected. An
    `unknown` kills nothing."""
    return verdict.status == OPPOSITE.get(theorem.expected)


def solver(timeout_ms: int = 30_000, ctx: z3.Context | None = None) -> z3.Solver:
    """A fresh solver with a timeout, so that no theorem can hang `shift prove`."""
    s = z3.Solver(ctx=ctx)
    s.set("timeout", timeout_ms)
    return s


def conclude(s: z3.Solver, r: z3.CheckSatResult, proved: str = "",
             refuted: str = "a solution exists") -> ProofVerdict:
    """What a checked solver, holding the claim's negation, comes to: unsat proves the
    claim (`proved` says how), a model refutes it (`refuted`, the model as witness)."""
    if r == z3.unsat:
        return ProofVerdict("proved", proved)
    if r == z3.sat:
        return ProofVerdict("refuted", refuted, [str(s.model())])
    return ProofVerdict("unknown", s.reason_unknown())


def valid(claim: z3.BoolRef, *, assumptions: Sequence[z3.BoolRef] = (),
          timeout_ms: int = 30_000) -> ProofVerdict:
    """Prove `assumptions => claim` by showing its negation unsat; a model refutes it."""
    s = solver(timeout_ms)
    s.add(*assumptions)
    s.add(z3.Not(claim))
    return conclude(s, s.check(), refuted="counterexample")


def unsat(*constraints: z3.BoolRef, proved: str = "", refuted: str = "a solution exists",
          timeout_ms: int = 30_000) -> ProofVerdict:
    """Prove that the constraints have no solution (e.g. no decision rule exists)."""
    s = solver(timeout_ms)
    s.add(*constraints)
    return conclude(s, s.check(), proved, refuted)


def conj(xs: Sequence[z3.BoolRef]) -> z3.BoolRef:
    return z3.And(*xs) if xs else z3.BoolVal(True)


def disj(xs: Sequence[z3.BoolRef]) -> z3.BoolRef:
    return z3.Or(*xs) if xs else z3.BoolVal(False)
