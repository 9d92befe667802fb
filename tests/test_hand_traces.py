"""Hand-written traces (tests/traces/): each a scenario a reader can follow step by step,
replayed through the model with its verdict, and through the C core where one applies.

A trace is named for what it shows; the table says which design and bound run it, which
properties the model's last state breaks, and what the implementation does with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from shift.model.events import load_trace
from shift.model.next import Model
from shift.model.properties import INVARIANTS
from shift.vocabulary import Event

from shift.differential import report, run_trace

TRACES = Path(__file__).parent / "traces"

# trace -> (design, bound, invariants the model breaks at the last event and not before)
VERDICTS: dict[str, tuple[str, str, frozenset[str]]] = {
    # F5: A's replay re-posts the signaled WRITE #1 and skips the WRITE_WITH_IMM #2 that B
    # counted; #2's success reaches A's application before #1's.
    "f5_signaled_write_completes_late": ("Shift", "small",
                                         frozenset({"CompletionIntegrity"})),
}


def broken(states: list) -> list[frozenset[str]]:
    return [frozenset(p for p, ok in INVARIANTS.items() if not ok(s)) for s in states]


def test_every_trace_has_a_verdict() -> None:
    assert sorted(p.stem for p in TRACES.glob("*.jsonl")) == sorted(VERDICTS)


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_the_model_breaks_what_the_trace_shows_at_its_last_event(name: str) -> None:
    design, bound, last = VERDICTS[name]
    states = Model.load(design, bound).run(load_trace(TRACES / f"{name}.jsonl"))
    seen = broken(states)
    assert last <= seen[-1] and not last & seen[-2]


def test_f5_the_c_core_holds_the_skipped_success_where_the_model_gives_it() -> None:
    model = Model.load("Shift", "small")
    events = load_trace(TRACES / "f5_signaled_write_completes_late.jsonl")
    run = run_trace(model, events)
    assert run.divergence is None, report(model, run)
    # equal up to the poll that takes #2's success, where the documented difference starts
    assert run.gap is not None and "(F5)" in run.gap
    assert run.events == events[:17] and events[17] == Event("PollCq", ("A",))
