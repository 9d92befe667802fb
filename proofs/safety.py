"""SHIFT's safety properties, machine-checked over `protocol`'s encoding.

Proofs are inductive (`invariants.check_inductive`) for every program of `N` WRs (every
program of at most N WRs: pad with READs, which change nothing); expected violations are
shown by a trace from Init (`bmc.find_violation`) on a concrete program.
"""

from __future__ import annotations

import z3
from shift.proofs import bmc
from shift.proofs import invariants as iv
from shift.proofs.abstract_state import AbstractState
from shift.proofs.core import ProofVerdict, Reproduction, Theorem, Weakening
from shift.proofs.programs import WORKLOADS, Program, fixed, program
from shift.proofs.properties import PROPERTIES
from shift.proofs.protocol import (
    SHIFT,
    SHIFT_PREFIX,
    Actions,
    ReplayPolicy,
    Updates,
    action_indices,
    lossy_control_actions,
)

N = 4
BASE = ("shape", "rc", "handshake", "healthy", "replay")

# SHIFT with its counter filter removed (and nothing else changed): the ablation. On a
# program without atomics (workload 2) it is designs.toml's NaiveReplay, which replays every
# outstanding WR: the model reproduces the ablation's trace on that design.
SHIFT_NO_FILTER = ReplayPolicy("Shift without the counter filter", "none", True)
# SHIFT that forgets to refuse atomics (the C core's seeded bug of that name).
SHIFT_NO_REFUSAL = ReplayPolicy("Shift without the atomic refusal", "counter", False)


def inductive(d: ReplayPolicy, props: list[str], groups: tuple[str, ...],
              restrict: str = "") -> ProofVerdict:
    p = program(N)
    assume = p.wellformed()
    if "no_reuse" in restrict:
        assume = z3.And(assume, p.no_reuse())
    if "nccl" in restrict:
        assume = z3.And(assume, p.nccl_signaling())

    def prop(pp: Program, s: AbstractState) -> z3.BoolRef:
        return z3.And(*[PROPERTIES[name](pp, s) for name in props])
    return iv.check_inductive(p, d, prop, assume, BASE + groups)


def violation(d: ReplayPolicy, prop: str, workload: list[tuple[str, int, int, bool]],
              depth: int, hint_groups: tuple[str, ...] = BASE) -> ProofVerdict:
    """A trace from Init of at most `depth` steps that breaks `prop`. The search only
    visits states satisfying invariant groups proved elsewhere (`hint_groups`), and takes
    none of the lossy control plane's actions (a counter lost, the handshake timer, a
    resend delivered: `Actions.lossy_control`), so the violation it finds needs no lost
    control message. Each is a constraint that can remove traces but never add one, so a
    trace found is a trace of the relation; they make the search several times faster."""
    p = fixed(workload)

    def hint(s: AbstractState) -> z3.BoolRef:
        return z3.And(*[c for _, c in iv.invariant(p, d, s, hint_groups)])
    r, lines = bmc.find_violation(p, d, PROPERTIES[prop], depth, step=depth, hint=hint,
                                  timeout_ms=60_000, without=lossy_control_actions(p, d))
    if r == z3.sat:
        return ProofVerdict("refuted", f"{prop} violated in {len(lines) - 1} steps", lines)
    if r == z3.unsat:
        return ProofVerdict("proved", f"no violation within {depth} steps")
    return ProofVerdict("unknown", str(r))


def trace_from_init(d: ReplayPolicy, prop: str, workload: list[tuple[str, int, int, bool]],
                    depth: int, backup_fails: bool = False,
                    one_way: bool = False) -> ProofVerdict:
    """A trace from Init breaking `prop`, searched with no invariant as a hint (the
    invariants are SHIFT's, not those of a weakened design): refuted with the trace, or
    proved up to `depth`. `backup_fails`: in the relation whose backup QP may fail too;
    `one_way`: without the host-wide triggers (a one-way workload: the model has no such
    step)."""
    p = fixed(workload)

    def left_out(acts: Actions) -> list[tuple[str, z3.BoolRef, Updates]]:
        return acts.lossy_control() + (acts.host() if one_way else [])
    r, lines = bmc.find_violation(p, d, PROPERTIES[prop], depth, step=depth,
                                  timeout_ms=60_000,
                                  without=action_indices(p, d, left_out, backup_fails),
                                  backup_fails=backup_fails)
    if r == z3.sat:
        return ProofVerdict("refuted", f"{prop} violated in {len(lines) - 1} steps", lines)
    return ProofVerdict("proved" if r == z3.unsat else "unknown",
                        f"no violation of {prop} within {depth} steps" if r == z3.unsat
                        else f"{prop}: {r}")


NCCL_SIMPLE = WORKLOADS[1]
TWO_SENDS = WORKLOADS[2]
FADD_NOTE = WORKLOADS[3]  # <<FADD, WRITE_IMM>>
BUFFER_REUSE = WORKLOADS[4]
SIGNALED_WRITE = WORKLOADS[5]  # <<WRITE signaled, WRITE_IMM>>
PROTOCOL_SCOPE = ("every program of 4 WRs (every op, signaled flag, value, CAS compare "
                  "value; one region), one direction; one failover: faults on the default "
                  "path at any time, "
                  "backup path healthy, no fail-back; counters lost and resent on path 2; "
                  "transport as transport.rc_prefix's lemma")
ALL_FOUR = ["NotificationIntegrity", "DataAtNotification", "CompletionIntegrity",
            "AtomicSafety"]

THEOREMS = [
    Theorem(
        name="shift.notification_integrity",
        group="shift",
        statement="In SHIFT, for every program of four WRs, B's application takes the "
                  "notifications in post order, none twice or lost in between, each in its "
                  "own receive WR.",
        formula="Init => Inv_NI,  Inv_NI /\\ Next => Inv_NI',  Inv_NI => "
                "NotificationIntegrity  (Inv_NI: shape, rc, handshake, healthy, replay, notes)",
        check=lambda: inductive(SHIFT, ["NotificationIntegrity"], ("notes",)),
        scope=PROTOCOL_SCOPE,
        weakenings=(Weakening(
            "no counter filter",
            "the replay re-posts the notifications B's counter shows received: a trace "
            "from Init of program 2 (two SENDs) slides the queue, as "
            "ablation.no_counter_filter",
            lambda: violation(SHIFT_NO_FILTER, "NotificationIntegrity", TWO_SENDS, 16)),),
    ),
    Theorem(
        name="shift.atomic_safety",
        group="shift",
        statement="In SHIFT, for every program of four WRs, no FADD or CAS is applied "
                  "twice: the layer refuses to fail over with an atomic outstanding.",
        formula="Init => Inv_AS,  Inv_AS /\\ Next => Inv_AS',  Inv_AS => AtomicSafety",
        check=lambda: inductive(SHIFT, ["AtomicSafety"], ("atomics",)),
        scope=PROTOCOL_SCOPE,
        weakenings=(Weakening(
            "no atomic refusal",
            "the layer fails over with an FADD outstanding and replays it",
            lambda: trace_from_init(SHIFT_NO_REFUSAL, "AtomicSafety", FADD_NOTE, 14)),),
    ),
    Theorem(
        name="shift.data_at_notification",
        group="shift",
        statement="In SHIFT, for every program of four WRs in which at most one WR writes "
                  "the region (no buffer reuse), B's application reads at each notification "
                  "the data written before it.",
        formula="no_reuse(prog) => (Init => Inv_D,  Inv_D /\\ Next => Inv_D',  Inv_D => "
                "DataAtNotification)",
        check=lambda: inductive(SHIFT, ["DataAtNotification"], ("data",), "no_reuse"),
        scope=PROTOCOL_SCOPE + "; assumes no buffer reuse (at most one WR writes the region)",
        weakenings=(Weakening(
            "buffer reuse allowed",
            "two WRs may write the region (the trace: shift.stale_data_with_reuse, F3)",
            lambda: inductive(SHIFT, ["DataAtNotification"], ("data",))),),
    ),
    Theorem(
        name="shift.completion_integrity",
        group="shift",
        statement="In SHIFT, for every program of four WRs in which only notifications and "
                  "atomics are signaled (NCCL's Simple protocol), A's application sees each "
                  "WR complete at most once, in post order, and success only if executed.",
        formula="nccl_signaling(prog) => (Init => Inv_C,  Inv_C /\\ Next => Inv_C',  Inv_C "
                "=> CompletionIntegrity)",
        check=lambda: inductive(SHIFT, ["CompletionIntegrity"], ("order",), "nccl"),
        scope=PROTOCOL_SCOPE + "; assumes NCCL's signaling (only notifications and "
                               "atomics signaled)",
        weakenings=(Weakening(
            "any WR signaled",
            "a WRITE may be signaled (the trace: shift.completion_order_signaled_write, F5)",
            lambda: inductive(SHIFT, ["CompletionIntegrity"], ("order",))),),
    ),
    Theorem(
        name="shift.stale_data_with_reuse",
        group="shift",
        statement="With buffer reuse, SHIFT's replay of an executed WRITE puts stale data "
                  "under a notification B has received but not yet polled (finding F3).",
        formula="exists trace from Init of Program(4): not DataAtNotification",
        check=lambda: violation(SHIFT, "DataAtNotification", BUFFER_REUSE, 22,
                                BASE + ("notes", "memory")),
        scope="Workloads.tla's program 4; traces from Init of <= 22 steps of the relation "
              "(no lost control message), states restricted to proved invariants",
        weakenings=(Weakening(
            "no buffer reuse",
            "program 1 (one WRITE, then the notification): no second write to the region",
            lambda: violation(SHIFT, "DataAtNotification", NCCL_SIMPLE, 22,
                              BASE + ("notes", "memory"))),),
        expected="refuted",
        reproduce=Reproduction("Shift", 4, "DataAtNotification"),
    ),
    Theorem(
        name="shift.completion_order_signaled_write",
        group="shift",
        statement="With a signaled WRITE before a notification, SHIFT reports the skipped "
                  "notification complete before the replayed WRITE, out of post order, "
                  "even with a healthy backup path.",
        formula="exists trace from Init of <<WRITE signaled, WRITE_IMM>>: "
                "not CompletionIntegrity",
        check=lambda: violation(SHIFT, "CompletionIntegrity", SIGNALED_WRITE, 20,
                                BASE + ("notes",)),
        scope="Workloads.tla's program 5; traces from Init of <= 20 steps of the relation",
        weakenings=(Weakening(
            "the WRITE unsignaled",
            "program 1: the same WRITE and notification, the WRITE unsignaled (NCCL's "
            "signaling)",
            lambda: violation(SHIFT, "CompletionIntegrity", NCCL_SIMPLE, 20,
                              BASE + ("notes",))),),
        expected="refuted",
        reproduce=Reproduction("Shift", 5, "CompletionIntegrity"),
    ),
    Theorem(
        name="shift.exactly_once",
        group="shift",
        statement="SHIFT executes a WRITE twice when its ACK was lost before the failure "
                  "(the trilemma: it gives up exactly-once).",
        formula="exists trace from Init of Program(1): not ExactlyOnceExecution",
        check=lambda: violation(SHIFT, "ExactlyOnceExecution", NCCL_SIMPLE, 12),
        scope="Workloads.tla's program 1; traces from Init of <= 12 steps of the relation",
        weakenings=(Weakening(
            "notifications only",
            "program 2 (two SENDs): no one-sided WR, every WR filtered by B's counter",
            lambda: violation(SHIFT, "ExactlyOnceExecution", TWO_SENDS, 12)),),
        expected="refuted",
        reproduce=Reproduction("Shift", 1, "ExactlyOnceExecution"),
    ),
    Theorem(
        name="shift_prefix.all",
        group="shift",
        statement="In ShiftPrefix (SHIFT whose replay also skips every WR before the last "
                  "notification the peer counted), for every program of four WRs, "
                  "NotificationIntegrity, DataAtNotification, CompletionIntegrity and "
                  "AtomicSafety all hold, buffer reuse and signaled WRITEs included.",
        formula="Init => Inv,  Inv /\\ Next => Inv',  Inv => NI /\\ DaN /\\ CI /\\ AS",
        check=lambda: inductive(SHIFT_PREFIX, ["NotificationIntegrity",
                                                  "DataAtNotification",
                                                  "CompletionIntegrity", "AtomicSafety"],
                                ("notes", "atomics", "data", "order")),
        scope=PROTOCOL_SCOPE + "; buffer reuse and signaled WRITEs included",
        weakenings=(Weakening(
            "SHIFT's filter for the prefix",
            "the replay skips only the notifications B counted, not every WR before the "
            "last of them (SHIFT's rule)",
            lambda: inductive(SHIFT, ALL_FOUR, ("notes", "atomics", "data", "order"))),),
    ),
    Theorem(
        name="ablation.no_counter_filter",
        group="shift",
        statement="Without its counter filter SHIFT replays a received notification, which "
                  "consumes the next receive WR (queue sliding): NotificationIntegrity "
                  "fails on a trace from Init.",
        formula="exists trace from Init of Program(2) under skip = none: "
                "not NotificationIntegrity",
        check=lambda: violation(SHIFT_NO_FILTER, "NotificationIntegrity", TWO_SENDS, 16),
        scope="Workloads.tla's program 2; traces from Init of <= 16 steps of the relation",
        weakenings=(Weakening(
            "the counter filter restored",
            "SHIFT's replay, which skips the notifications B's counter covers",
            lambda: violation(SHIFT, "NotificationIntegrity", TWO_SENDS, 16)),),
        expected="refuted",
        reproduce=Reproduction("NaiveReplay", 2, "NotificationIntegrity"),
    ),
]
