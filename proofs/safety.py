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
from shift.proofs.core import ProofVerdict, Reproduction, Theorem
from shift.proofs.programs import WORKLOADS, Program, fixed, program
from shift.proofs.properties import PROPERTIES
from shift.proofs.protocol import SHIFT, SHIFT_PREFIX, ReplayPolicy, lossy_control_actions

N = 4
BASE = ("shape", "rc", "handshake", "replay")

# SHIFT with its counter filter removed (and nothing else changed): the ablation. On a
# program without atomics (workload 2) it is designs.toml's NaiveReplay, which replays every
# outstanding WR: the model reproduces the ablation's trace on that design.
SHIFT_NO_FILTER = ReplayPolicy("Shift without the counter filter", "none", True)


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


NCCL_SIMPLE = WORKLOADS[1]
TWO_SENDS = WORKLOADS[2]
BUFFER_REUSE = WORKLOADS[4]
SIGNALED_WRITE = WORKLOADS[5]  # <<WRITE signaled, WRITE_IMM>>

THEOREMS = [
    Theorem(
        name="shift.notification_integrity",
        group="shift",
        statement="In SHIFT, for every program of four WRs, B's application takes the "
                  "notifications in post order, none twice or lost in between, each in its "
                  "own receive WR.",
        formula="Init => Inv_NI,  Inv_NI /\\ Next => Inv_NI',  Inv_NI => "
                "NotificationIntegrity  (Inv_NI: shape, rc, handshake, replay, notes)",
        check=lambda: inductive(SHIFT, ["NotificationIntegrity"], ("notes",)),
    ),
    Theorem(
        name="shift.atomic_safety",
        group="shift",
        statement="In SHIFT, for every program of four WRs, no FADD or CAS is applied "
                  "twice: the layer refuses to fail over with an atomic outstanding.",
        formula="Init => Inv_AS,  Inv_AS /\\ Next => Inv_AS',  Inv_AS => AtomicSafety",
        check=lambda: inductive(SHIFT, ["AtomicSafety"], ("atomics",)),
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
    ),
    Theorem(
        name="shift.stale_data_with_reuse",
        group="shift",
        statement="With buffer reuse, SHIFT's replay of an executed WRITE puts stale data "
                  "under a notification B has received but not yet polled (finding F3).",
        formula="exists trace from Init of Program(4): not DataAtNotification",
        check=lambda: violation(SHIFT, "DataAtNotification", BUFFER_REUSE, 22,
                                BASE + ("notes", "memory")),
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
        expected="refuted",
        reproduce=Reproduction("NaiveReplay", 2, "NotificationIntegrity"),
    ),
]
