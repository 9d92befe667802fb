"""SHIFT when its backup path fails too (issue 21, item 3): the relation with A's backup QP
failing at any moment (`Actions.backup_failure`), what SHIFT's invariants say then.

A failed backup path leaves SHIFT nothing to fail over to: A's layer goes to Error at the
first error completion it polls from path 2 and fails every later WR. NotificationIntegrity,
AtomicSafety and DataAtNotification still hold (`shift.backup_failure`): nothing executes
on a QP in the error state, and A stops. CompletionIntegrity does not
(`shift.completion_order_backup_failure`, finding F4): a notification the replay skipped
was reported complete before the replayed WRITE ahead of it failed.
"""

from __future__ import annotations

import z3
from shift.proofs import invariants as iv
from shift.proofs.core import ProofVerdict, Theorem, Weakening
from shift.proofs.programs import program
from shift.proofs.properties import PROPERTIES
from shift.proofs.protocol import SHIFT
from shift.proofs.safety import (
    BASE,
    NCCL_SIMPLE,
    SHIFT_NO_FILTER,
    TWO_SENDS,
    N,
    trace_from_init,
)

# The base invariant without `healthy`, with what a backup failure needs said
FAILING = tuple(g for g in BASE if g != "healthy") + ("flushed",)
KEPT = ["NotificationIntegrity", "AtomicSafety", "DataAtNotification"]


def survives(reuse: bool = False) -> ProofVerdict:
    """NotificationIntegrity, AtomicSafety and DataAtNotification are inductive in the
    relation whose backup QP may fail, for every program of N WRs (without buffer reuse,
    unless `reuse`: DataAtNotification's hypothesis)."""
    p = program(N)
    assume = p.wellformed() if reuse else z3.And(p.wellformed(), p.no_reuse())
    return iv.check_inductive(
        p, SHIFT, lambda pp, s: z3.And(*[PROPERTIES[k](pp, s) for k in KEPT]), assume,
        FAILING + ("notes", "atomics", "data"), backup_fails=True)


SCOPE = (f"every program of {N} WRs, one direction; one failover, then A's backup QP may "
         "fail at any moment (its NIC, or its retries on path 2); B's backup QP healthy, "
         "no fail-back")

THEOREMS = [
    Theorem(
        name="shift.backup_failure",
        group="shift",
        statement="When its backup path fails too, SHIFT still keeps NotificationIntegrity, "
                  "AtomicSafety and DataAtNotification (no buffer reuse): A's layer stops "
                  "at the first error of path 2 and fails every later WR.",
        formula="no_reuse(prog) => (Init => Inv,  Inv /\\ Next_bf => Inv',  Inv => NI /\\ "
                "AS /\\ DaN)  (Next_bf: Next with A's backup QP failing)",
        check=survives,
        scope=SCOPE + "; assumes no buffer reuse",
        weakenings=(
            Weakening("buffer reuse allowed",
                      "two WRs may write the region (F3, now with a failing backup path)",
                      lambda: survives(reuse=True)),
            Weakening("no counter filter",
                      "the replay re-posts the notifications B's counter shows received: "
                      "a trace from Init of program 2 (two SENDs) slides the queue",
                      lambda: trace_from_init(SHIFT_NO_FILTER, "NotificationIntegrity",
                                              TWO_SENDS, 16, backup_fails=True,
                                              one_way=True))),
    ),
    Theorem(
        name="shift.completion_order_backup_failure",
        group="shift",
        statement="When the backup path fails after the replay, SHIFT reports a skipped "
                  "notification complete before the replayed WRITE ahead of it fails: "
                  "completions out of post order with NCCL's signaling (finding F4).",
        formula="exists trace from Init of Program(1) under Next_bf: not CompletionIntegrity",
        check=lambda: trace_from_init(SHIFT, "CompletionIntegrity", NCCL_SIMPLE, 20,
                                      backup_fails=True, one_way=True),
        scope="Workloads.tla's program 1 (NCCL Simple); traces from Init of <= 20 steps of "
              "the relation with A's backup QP failing (TLC: `large`, F4)",
        weakenings=(Weakening(
            "backup path healthy",
            "A's backup QP never fails: shift.completion_integrity's setting",
            lambda: trace_from_init(SHIFT, "CompletionIntegrity", NCCL_SIMPLE, 20,
                                    one_way=True)),),
        expected="refuted",
    ),
]
