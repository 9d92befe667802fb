"""Helpers of the differential tests: where the corpus lives and how a divergence is kept."""

from __future__ import annotations

import hashlib
from pathlib import Path

from shift.model.events import dumps_trace, save_trace
from shift.model.next import Model
from shift.vocabulary import Event

from shift.differential import Run, report

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
