"""SHIFT's properties (spec/Properties.tla) as predicates over the abstract state.

Each property is about the sequences the applications polled; the encoding keeps history
flags that the poll breaking it sets (`cbad`, `nbad`, `dbad`), and the executions per WR.
Since `posted` and `execs` only grow, "the flag is never set" is exactly the spec's
invariant.
"""

from __future__ import annotations

from collections.abc import Callable

import z3
from shift.proofs.abstract_state import AbstractState
from shift.proofs.core import conj
from shift.proofs.programs import Program

Property = Callable[[Program, AbstractState], z3.BoolRef]


def notification_integrity(p: Program, s: AbstractState) -> z3.BoolRef:
    return z3.Not(s.nbad)


def data_at_notification(p: Program, s: AbstractState) -> z3.BoolRef:
    return z3.Not(s.dbad)


def completion_integrity(p: Program, s: AbstractState) -> z3.BoolRef:
    return z3.Not(s.cbad)


def atomic_safety(p: Program, s: AbstractState) -> z3.BoolRef:
    return conj([z3.Implies(p.atomic(w), s.execs[w] <= 1) for w in range(1, p.n + 1)])


def exactly_once(p: Program, s: AbstractState) -> z3.BoolRef:
    return conj([s.execs[w] <= 1 for w in range(1, p.n + 1)])


PROPERTIES: dict[str, Property] = {
    "NotificationIntegrity": notification_integrity,
    "DataAtNotification": data_at_notification,
    "CompletionIntegrity": completion_integrity,
    "AtomicSafety": atomic_safety,
    "ExactlyOnceExecution": exactly_once,
}
