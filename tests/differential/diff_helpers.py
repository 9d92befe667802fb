"""Helpers of the differential tests: where the corpus lives and how a divergence is kept."""

from __future__ import annotations

import hashlib
from pathlib import Path

from shift.model.config import bound_from_constants
from shift.model.events import dumps_trace, save_trace
from shift.model.next import Model
from shift.spec.catalog import load_catalog
from shift.spec.workloads import read_workloads
from shift.vocabulary import Event

from shift.differential import Run, kept_invariants, report

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


def corpus_traces() -> list[tuple[str, str, Path]]:
    """Every saved trace as (design, bound, path): tests/corpus/DESIGN/BOUND/NAME.jsonl."""
    return [(p.parent.parent.name, p.parent.name, p)
            for p in sorted(CORPUS.glob("*/*/*.jsonl"))]


def keep(model: Model, events: list[Event]) -> Path:
    """Save a divergent trace in the corpus (named by its content) and return the path."""
    digest = hashlib.sha256(dumps_trace(events).encode()).hexdigest()[:10]
    path = CORPUS / model.design.name / model.bound.name / f"found-{digest}.jsonl"
    return save_trace(path, events)


def explain(model: Model, run: Run, path: Path) -> str:
    return f"{report(model, run)}\nsaved: {path}"


FOUR = ("AckBeforeCqe", "RnrNak", "RnrRetry", "DeviceFatal", "ImplicitNak")


def large_with_four(design: str) -> tuple[Model, tuple[str, ...]]:
    """`large` (two faults on either path) with faithful's four hardware settings, which no
    bound of designs.toml declares (TLC and the explorer would need hours:
    docs/performance.md), and the invariants the implementation must keep there: those
    the design declares at both `large` and `faithful`."""
    catalog = load_catalog(None)
    faithful = catalog.bound("faithful").constants
    constants = {**catalog.bound("large").constants, **{k: faithful[k] for k in FOUR}}
    m = Model.load(design, "large")
    model = Model(m.design, bound_from_constants("large", constants,
                                                 read_workloads(catalog.spec_dir)))
    kept = tuple(p for p in kept_invariants(design, "large")
                 if p in kept_invariants(design, "faithful"))
    return model, kept
