"""Helpers of the model's tests: designs and bounds by name, states reached by events."""

from __future__ import annotations

from functools import cache
from typing import Any

from shift.model.next import Model
from shift.model.state import State
from shift.vocabulary import Event, make

DESIGNS = ["Shift", "ShiftPrefix", "ShiftCounted", "NaiveReplay", "NoFailover",
           "ReceiverQuery", "Staging", "NcclResiliency"]


@cache
def model(design: str = "Shift", bound: str = "small") -> Model:
    return Model.load(design, bound)


def events(workload: int, *steps: tuple[Any, ...]) -> list[Event]:
    return [make("Init", workload)] + [make(*s) for s in steps]


def reach(m: Model, workload: int, *steps: tuple[Any, ...]) -> State:
    """The state the events lead to (NotEnabled if one cannot happen)."""
    return m.run(events(workload, *steps))[-1]


def step(m: Model, s: State, *event: Any) -> State:
    """The successor by one event, which must be enabled."""
    t = m.step(s, make(*event))
    assert t is not None, f"{event} is not enabled"
    return t


def changed(a: State, b: State) -> set[str]:
    """The variables that differ between two states."""
    return {f for f, x, y in zip(State._fields, a, b, strict=True) if x != y}
