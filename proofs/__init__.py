"""shift.proofs: the trilemma and SHIFT's invariants, machine-checked with Z3.

Every theorem is a `Theorem` (see `shift.proofs.core`) with a one-sentence statement in
plain English next to the formula that Z3 decides; `shift.proofs.registry.THEOREMS` lists
them in the order `shift prove` runs them. docs/proofs.md explains each one.
"""
