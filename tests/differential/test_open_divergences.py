"""Divergences between the model and the C core that are open (docs/findings.md says
which side is wrong, or that the spec does not decide). Each trace in tests/corpus-open/
must still part exactly where recorded: when one side is fixed, this fails, and the trace
moves to tests/corpus/ as a regression test."""

from __future__ import annotations

from pathlib import Path

import pytest
from shift.model.events import load_trace
from shift.model.next import Model

from shift.differential import run_trace

OPEN = Path(__file__).resolve().parents[1] / "corpus-open"
# trace -> (step, the first field that differs)
WHERE = {
    "flushed-receive-after-failback.jsonl": (36, "Deliver(1, BtoA) enabled"),
}


@pytest.mark.parametrize("path", sorted(OPEN.glob("*/*/*.jsonl")), ids=lambda p: p.stem)
def test_open_divergence_still_parts_where_recorded(path: Path) -> None:
    model = Model.load(path.parent.parent.name, path.parent.name)
    run = run_trace(model, load_trace(path))
    assert run.divergence is not None, f"{path.name} no longer diverges: move it to tests/corpus/"
    step, field = WHERE[path.name]
    assert run.divergence.step == step and field in run.divergence.fields, str(run.divergence)
