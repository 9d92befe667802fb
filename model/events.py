"""The event vocabulary (docs/design.md, the event vocabulary): the one list of what can happen.

Every nondeterministic choice of the system is an event; given the initial workload and a
sequence of events, the model (and the C implementation) are deterministic. The names and
arguments are those of the specification's `event` variable: `Event("Transmit", ("A", 1))`
is TLA+'s <<"Transmit", "A", 1>>. A trace starts with `Init(workload)`, the choice Init makes
(`program = Program(workload)`), which the spec's <<"Init">> leaves implicit.

Event traces are JSON Lines, one object per event with named arguments:
    {"event": "Init", "workload": 2}
    {"event": "PostRecv", "host": "B", "recv": 1}
    {"event": "Deliver", "path": 1, "direction": "AtoB"}
`load_trace` checks every line and raises `TraceError` naming the line that is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from shift.errors import ShiftError

HOST_T, PATH_T, DIR_T, INT_T = "host", "path", "direction", "int"

# name -> its arguments (name, type), in the order of the spec's event tuple.
VOCABULARY: dict[str, tuple[tuple[str, str], ...]] = {
    "Init": (("workload", INT_T),),
    # the applications
    "PostSend": (("host", HOST_T), ("wr", INT_T)),
    "PostRecv": (("host", HOST_T), ("recv", INT_T)),
    "PollCq": (("host", HOST_T),),
    # NIC and wire
    "Transmit": (("host", HOST_T), ("path", PATH_T)),
    "Deliver": (("path", PATH_T), ("direction", DIR_T)),
    "Drop": (("path", PATH_T), ("direction", DIR_T)),
    "Timeout": (("host", HOST_T), ("path", PATH_T)),
    # faults
    "LinkDown": (("path", PATH_T),),
    "LinkUp": (("path", PATH_T),),
    "NicFail": (("host", HOST_T), ("nic", PATH_T)),
    "NicRecover": (("host", HOST_T), ("nic", PATH_T)),
    # the failover layer's background work
    "Progress": (("host", HOST_T),),
}

# Events the environment decides, not the system: no fairness, and what a test injects.
FAULT_EVENTS = frozenset({"Drop", "LinkDown", "LinkUp", "NicFail", "NicRecover"})


class Event(NamedTuple):
    """One event: its name and its arguments, as in the spec's event tuple."""

    name: str
    args: tuple[Any, ...] = ()

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.args))})" if self.args else self.name

    def to_tla(self) -> list[Any]:
        """The value of the spec's `event` variable (Init carries no workload there)."""
        return [self.name] if self.name == "Init" else [self.name, *self.args]

    def to_json(self) -> dict[str, Any]:
        return {"event": self.name,
                **{n: a for (n, _), a in zip(VOCABULARY[self.name], self.args, strict=True)}}


class TraceError(ShiftError):
    """A malformed event or trace file; the message names the file and line."""


def _check_arg(name: str, kind: str, value: Any) -> Any:
    if kind == HOST_T and value in ("A", "B"):
        return value
    if kind == PATH_T and value in (1, 2) and not isinstance(value, bool):
        return value
    if kind == DIR_T and value in ("AtoB", "BtoA"):
        return value
    if kind == INT_T and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    allowed = {HOST_T: '"A" or "B"', PATH_T: "1 or 2", DIR_T: '"AtoB" or "BtoA"',
               INT_T: "a non-negative integer"}[kind]
    raise ValueError(f"{name} = {json.dumps(value)}: expected {allowed}")


def make(name: str, *args: Any) -> Event:
    """An event, checked against the vocabulary (ValueError when it is not one)."""
    if name not in VOCABULARY:
        raise ValueError(f"unknown event {name!r}; events: {', '.join(VOCABULARY)}")
    spec = VOCABULARY[name]
    if len(args) != len(spec):
        raise ValueError(f"{name} takes {len(spec)} argument(s) "
                         f"({', '.join(n for n, _ in spec) or 'none'}), not {len(args)}")
    return Event(name, tuple(_check_arg(n, k, a) for (n, k), a in zip(spec, args, strict=True)))


def from_json(obj: Any) -> Event:
    """An event from its JSON object (or the list form of the spec's event tuple)."""
    if isinstance(obj, list) and obj and isinstance(obj[0], str):
        return make(obj[0], *obj[1:])
    if not isinstance(obj, dict):
        raise ValueError("an event is a JSON object such as {\"event\": \"PollCq\", "
                         "\"host\": \"A\"}")
    name = obj.get("event")
    if not isinstance(name, str):
        raise ValueError('an event object needs "event": NAME')
    if name not in VOCABULARY:
        raise ValueError(f"unknown event {name!r}; events: {', '.join(VOCABULARY)}")
    spec = VOCABULARY[name]
    extra = set(obj) - {"event"} - {n for n, _ in spec}
    if extra:
        raise ValueError(f"{name}: unexpected field(s) {', '.join(sorted(extra))} "
                         f"(it takes {', '.join(n for n, _ in spec) or 'none'})")
    missing = [n for n, _ in spec if n not in obj]
    if missing:
        raise ValueError(f"{name}: missing field(s) {', '.join(missing)}")
    return make(name, *(obj[n] for n, _ in spec))


def dumps_trace(events: Iterable[Event]) -> str:
    return "".join(json.dumps(e.to_json()) + "\n" for e in events)


def save_trace(path: Path, events: Iterable[Event]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps_trace(events))
    return path


def loads_trace(text: str, source: str = "<trace>") -> list[Event]:
    """Events from JSON Lines text; blank lines are skipped, the first event is Init."""
    events: list[Event] = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise TraceError(f"{source}:{no}: not JSON: {e.msg} (column {e.colno})") from None
        try:
            ev = from_json(obj)
        except ValueError as e:
            raise TraceError(f"{source}:{no}: {e}") from None
        if (ev.name == "Init") != (not events):
            where = "only as the first event" if events else "first"
            raise TraceError(f"{source}:{no}: a trace has Init {where} "
                             f"(got {ev.name})")
        events.append(ev)
    if not events:
        raise TraceError(f"{source}: empty trace (it starts with an Init event)")
    return events


def load_trace(path: Path) -> list[Event]:
    try:
        text = path.read_text()
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise TraceError(f"{path}: not a text file") from None
    return loads_trace(text, str(path))
