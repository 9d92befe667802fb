"""The events (docs/design.md, the event vocabulary): the one list of what can happen.

Every nondeterministic choice of the system is an event; given the initial workload and a
sequence of events, the model (and the C implementation) are deterministic. The names and
arguments are those of the specification's `event` variable: `Event("Transmit", ("A", 1))`
is TLA+'s <<"Transmit", "A", 1>>. A trace starts with `Init(workload)`, the choice Init makes
(`program = Program(workload)`), which the spec's <<"Init">> leaves implicit.

An event has three written forms, and `parse` reads each of them:
    Event("Deliver", (1, "AtoB"))                          the model's value
    {"event": "Deliver", "path": 1, "direction": "AtoB"}   a line of a trace file
    ("Deliver", 1, "AtoB")                                 the spec's event tuple
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

# The system's shape: two hosts, A the requester and B the responder; path p joins NIC p
# of A, link p and NIC p of B (path 1 the default, path 2 the backup); a packet travels
# one way on a path.
HOSTS = ("A", "B")
PATHS = (1, 2)
DIRECTIONS = ("AtoB", "BtoA")

# The kinds of an event's arguments.
HOST_T, PATH_T, DIR_T, INT_T = "host", "path", "direction", "int"

Signature = tuple[tuple[str, str], ...]  # the arguments: (name, kind), in the tuple's order

VOCABULARY: dict[str, Signature] = {
    "Init": (("workload", INT_T),),
    # the applications
    "PostSend": (("host", HOST_T), ("wr", INT_T)),
    "PostRecv": (("host", HOST_T), ("recv", INT_T)),
    "PollCq": (("host", HOST_T),),
    # an application stores into its own region. The model has B's stores of a workload
    # (StoresOf(k)); on A it is the implementation's alone: it rewrites the source buffer
    # of a WR that may still be replayed, against SHIFT's assumption (a), which the spec
    # assumes and the implementation's tests break on purpose.
    "AppWrite": (("host", HOST_T), ("region", INT_T), ("value", INT_T)),
    # NIC and wire
    "Transmit": (("host", HOST_T), ("path", PATH_T)),
    "Deliver": (("path", PATH_T), ("direction", DIR_T)),
    "Drop": (("path", PATH_T), ("direction", DIR_T)),
    "Timeout": (("host", HOST_T), ("path", PATH_T)),
    # a NIC writes the oldest receive completion it made (and ACKed) into host memory
    # (AckBeforeCqe: the ACK leaves first)
    "WriteCqe": (("host", HOST_T), ("path", PATH_T)),
    # faults
    "LinkDown": (("path", PATH_T),),
    "LinkUp": (("path", PATH_T),),
    "NicFail": (("host", HOST_T), ("nic", PATH_T)),
    "NicRecover": (("host", HOST_T), ("nic", PATH_T)),
    # the failover layer's background work
    "Progress": (("host", HOST_T),),
    # the layer's handshake timer fires: a host that awaits the peer's answer resends its
    # counter (the wire may lose control messages)
    "HandshakeTimeout": (("host", HOST_T),),
    # the layer's completion timer fires: a WR on the default path waits for ever (RNR
    # NAKs retried for ever), which the layer takes as a failure of that path
    "CompletionTimeout": (("host", HOST_T),),
    # the layer reads the asynchronous event of its NIC's silent death (DeviceFatal:
    # IBV_EVENT_DEVICE_FATAL, no completions) and flushes that QP's WRs itself
    "FatalEvent": (("host", HOST_T), ("nic", PATH_T)),
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
        sig = VOCABULARY[self.name]
        return {"event": self.name, **{n: a for (n, _), a in zip(sig, self.args, strict=True)}}


def _signature(name: str, events: Mapping[str, Signature]) -> Signature:
    if name not in events:
        raise ValueError(f"unknown event {name!r}; events: {', '.join(events)}")
    return events[name]


def _names(sig: Signature) -> str:
    return ", ".join(n for n, _ in sig) or "none"


def parse(obj: Any, events: Mapping[str, Signature] = VOCABULARY) -> tuple[str, tuple[Any, ...]]:
    """The name and the arguments (in the signature's order) of an event in any of its
    written forms; ValueError naming what is wrong. The arguments' values are not checked
    (`make` checks them against their kinds)."""
    if isinstance(obj, Mapping):
        name = obj.get("event")
        if not isinstance(name, str):
            raise ValueError('an event object needs "event": NAME')
        sig = _signature(name, events)
        extra = set(obj) - {"event"} - {n for n, _ in sig}
        if extra:
            raise ValueError(f"{name}: unexpected field(s) {', '.join(sorted(extra))} "
                             f"(it takes {_names(sig)})")
        missing = [n for n, _ in sig if n not in obj]
        if missing:
            raise ValueError(f"{name}: missing field(s) {', '.join(missing)}")
        return name, tuple(obj[n] for n, _ in sig)
    if isinstance(obj, Event):
        name, args = obj.name, obj.args
    elif isinstance(obj, (list, tuple)) and obj and isinstance(obj[0], str):
        name, args = obj[0], tuple(obj[1:])
    else:
        raise ValueError('an event is a JSON object such as {"event": "PollCq", "host": "A"}')
    _arity(name, _signature(name, events), args)
    return name, args


def _arity(name: str, sig: Signature, args: tuple[Any, ...]) -> None:
    if len(args) != len(sig):
        raise ValueError(f"{name} takes {len(sig)} argument(s) ({_names(sig)}), "
                         f"not {len(args)}")


def _check_arg(name: str, kind: str, value: Any) -> Any:
    if kind == HOST_T and value in HOSTS:
        return value
    if kind == PATH_T and value in PATHS and not isinstance(value, bool):
        return value
    if kind == DIR_T and value in DIRECTIONS:
        return value
    if kind == INT_T and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    allowed = {HOST_T: '"A" or "B"', PATH_T: "1 or 2", DIR_T: '"AtoB" or "BtoA"',
               INT_T: "a non-negative integer"}[kind]
    raise ValueError(f"{name} = {json.dumps(value)}: expected {allowed}")


def make(name: str, *args: Any) -> Event:
    """An event of the model, checked against the vocabulary (ValueError when it is not one)."""
    sig = _signature(name, VOCABULARY)
    _arity(name, sig, args)
    return Event(name, tuple(_check_arg(n, k, a) for (n, k), a in zip(sig, args, strict=True)))


def from_json(obj: Any) -> Event:
    """An event from its JSON object (or the list form of the spec's event tuple)."""
    name, args = parse(obj)
    return make(name, *args)
