"""Shrinking a divergent trace found outside the test suite.

In the suite (tests/differential/test_differential.py) Hypothesis draws the numbers of
`generator.trace_from_choices` and shrinks a divergence itself, on those numbers; this
module plays no part there. It serves the two campaigns that run outside pytest:
`shift fuzz` and the seeded-bug script (tests/differential/seeded_bugs.py). They draw the
numbers from a seeded `random.Random`, so that `--seed` reproduces a campaign, `--workers`
splits it over processes, `--seconds` bounds it in time, and the kill table counts traces
round-robin over six designs and bounds until the first divergence; one Hypothesis run is
one process, one test and a number of examples, and does none of these. Such a campaign
must still hand back a small trace for the divergence it found, and Hypothesis shrinks
only the examples its own engine generated in the same run: it has no public way to
shrink a given one. Hence this greedy shrinker, on events rather than numbers: drop one
event at a time while the model still allows the rest and the trace still diverges.
"""

from __future__ import annotations

from collections.abc import Sequence

from shift.model.next import Model, NotEnabled
from shift.vocabulary import Event

from .runner import run_trace


def diverges(model: Model, events: Sequence[Event], side: str = "core") -> bool:
    """Does the trace diverge (False when it is not a behaviour of the model)?"""
    try:
        return run_trace(model, events, side=side).divergence is not None
    except NotEnabled:
        return False


def shrink(model: Model, events: Sequence[Event], budget: int = 2000,
           side: str = "core") -> list[Event]:
    """A shorter trace that still diverges: greedily drop events (the model must still
    allow every event left) until no single event can go or the budget of runs is spent.
    The first event (Init) stays first."""
    best = list(events)
    runs = 0
    changed = True
    while changed and runs < budget:
        changed = False
        k = len(best) - 1
        while k >= 1 and runs < budget:
            cand = best[:k] + best[k + 1:]
            runs += 1
            if diverges(model, cand, side):
                best, changed = cand, True
            k -= 1
        # everything after the divergence is irrelevant
        run = run_trace(model, best, side=side)
        if run.divergence is not None and len(run.events) < len(best):
            best, changed = run.events, True
    return best
