"""Every trace saved in tests/corpus/ (a divergence once found, or a documented difference
between the two sides) replays through model and implementation without a divergence."""

from __future__ import annotations

from pathlib import Path

import pytest
from diff_helpers import corpus_traces
from shift.model.events import load_trace
from shift.model.next import Model

from shift.differential import DESIGNS, report, run_trace

TRACES = corpus_traces()


def test_the_corpus_is_not_empty() -> None:
    assert len(TRACES) >= 3


def test_every_design_of_the_core_has_traces() -> None:
    """Each design both sides implement is replayed from its own folder of the corpus."""
    assert set(DESIGNS) <= {d for d, _, _ in TRACES}


@pytest.mark.parametrize(("design", "bound", "path"), TRACES,
                         ids=[f"{d}-{b}-{p.stem}" for d, b, p in TRACES])
@pytest.mark.parametrize("posts", ["direct", "copy"])
def test_corpus_trace_replays_without_divergence(design: str, bound: str, path: Path,
                                                 posts: str) -> None:
    model = Model.load(design, bound)
    events = load_trace(path)
    run = run_trace(model, events, copy_posts=posts == "copy")
    assert run.divergence is None, report(model, run)
    # the whole trace ran, or it stops at its last event for a documented reason
    assert len(run.events) >= len(events) - 1, run.gap
