"""Every theorem `shift prove` runs, in order: the trilemma first, then the protocol."""

from __future__ import annotations

from shift.proofs import (
    achievability,
    backup,
    cases,
    consensus,
    impossibility,
    indistinguishability,
    progress,
    safety,
    transport,
)
from shift.proofs.core import Theorem

THEOREMS: list[Theorem] = [
    *transport.THEOREMS,
    *indistinguishability.THEOREMS,
    *impossibility.THEOREMS,
    *cases.THEOREMS,
    *consensus.THEOREMS,
    *achievability.THEOREMS,
    *safety.THEOREMS,
    *backup.THEOREMS,
    *progress.THEOREMS,
]


def by_name(name: str) -> Theorem | None:
    return next((t for t in THEOREMS if t.name == name), None)
