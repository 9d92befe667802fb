"""Failover.tla's Next as events: one function per event, `step`, `successors`, `enabled`.

Every transition carries the event (the vocabulary, `shift.model.events`) and the TLA+
action that took it: the same except for Deliver, which is DeliverPacket for a request or
an ACK and DeliverControl for a control message. TLC labels its state graph's edges with
the action, and fairness is per action instance (`fairness_class`, `strongly_fair`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from shift.model import apps, faults, layer, transport
from shift.model.config import Constants, DesignRecord
from shift.model.config import bound as load_bound
from shift.model.config import design as load_design
from shift.model.events import TraceError
from shift.model.explain import why_not
from shift.model.state import State, initial
from shift.spec.catalog import load_catalog
from shift.vocabulary import DIRECTIONS, HOSTS, PATHS, Event, make

Action = Callable[..., State | None]


class Transition(NamedTuple):
    event: Event
    action: str  # the TLA+ action: the event's name, or DeliverPacket / DeliverControl
    target: State


def deliver(s: State, d: DesignRecord, b: Constants, p: int, direction: str) -> State | None:
    """Deliver(p, d): the head packet of the channel arrives, whatever its kind."""
    ch = s.wire[p - 1][0 if direction == "AtoB" else 1]
    if not ch:
        return None
    if ch[0].kind == "ctl":
        return layer.deliver_control(s, d, b, p, direction)
    return transport.deliver_packet(s, d, b, p, direction)


# One function per event of the vocabulary (Init aside): (state, design, bound, *args).
EVENT_FUNCTIONS: dict[str, Action] = {
    "PostSend": apps.post_send,
    "PostRecv": apps.post_recv,
    "AppWrite": apps.app_write,
    "PollCq": apps.poll_cq,
    "Transmit": transport.transmit,
    "Deliver": deliver,
    "Drop": transport.drop,
    "Timeout": transport.timeout,
    "WriteCqe": transport.write_cqe,
    "LinkDown": faults.link_down,
    "LinkUp": faults.link_up,
    "NicFail": faults.nic_fail,
    "NicRecover": faults.nic_recover,
    "Progress": layer.progress,
    "HandshakeTimeout": layer.handshake_timeout,
    "CompletionTimeout": layer.completion_timeout,
    "FatalEvent": layer.fatal_event,
}


def action_of(s: State, ev: Event) -> str:
    """The TLA+ action an enabled event of state s is an instance of."""
    if ev.name == "Deliver":
        p, direction = ev.args
        head = s.wire[p - 1][0 if direction == "AtoB" else 1][0]
        return "DeliverControl" if head.kind == "ctl" else "DeliverPacket"
    return ev.name


# The fair actions of FailoverFairness; Drop and the faults are not fair.
FAIR_ACTIONS = frozenset({"PostSend", "PostRecv", "AppWrite", "Transmit", "Timeout",
                          "WriteCqe", "DeliverPacket", "DeliverControl", "PollCq", "Progress",
                          "HandshakeTimeout", "CompletionTimeout", "FatalEvent"})
# Those of them strongly fair (SF_vars): a host's handshake timer runs on its own clock, so
# the peer's traffic, which disables it now and then, cannot hold it off for ever.
STRONG_ACTIONS = frozenset({"HandshakeTimeout"})


def strongly_fair(fair_class: tuple[Any, ...]) -> bool:
    """Is this conjunct of FailoverFairness SF_vars (else WF_vars)?"""
    return fair_class[0] in STRONG_ACTIONS


def fairness_class(action: str, ev: Event) -> tuple[Any, ...] | None:
    """The WF_vars(...) or SF_vars(...) conjunct a transition belongs to, or None when it
    is unfair.
    Transmit(h, p), Timeout(h, p), WriteCqe(h, p), FatalEvent(h, p), PollCq(h), Progress(h),
    HandshakeTimeout(h), CompletionTimeout(h),
    DeliverPacket(p, d) and DeliverControl(p, d) are one conjunct per argument; PostSend(h),
    PostRecv(h) and AppWrite(h) one per host (their other event arguments are not
    parameters of the action)."""
    if action not in FAIR_ACTIONS:
        return None
    if action in ("PostSend", "PostRecv", "AppWrite"):
        return (action, ev.args[0])
    return (action, *ev.args)


@cache
def _ev(name: str, *args: Any) -> Event:
    return Event(name, args)


# The events whose arguments do not depend on the state, in a fixed order.
_FIXED: list[tuple[Event, Action]] = (
    [(_ev("Transmit", h, p), transport.transmit) for h in HOSTS for p in PATHS]
    + [(_ev("Timeout", h, p), transport.timeout) for h in HOSTS for p in PATHS]
    + [(_ev("WriteCqe", h, p), transport.write_cqe) for h in HOSTS for p in PATHS]
    + [(_ev("FatalEvent", h, p), layer.fatal_event) for h in HOSTS for p in PATHS]
    + [(_ev("Drop", p, dr), transport.drop) for p in PATHS for dr in DIRECTIONS]
    + [(_ev("LinkDown", p), faults.link_down) for p in PATHS]
    + [(_ev("LinkUp", p), faults.link_up) for p in PATHS]
    + [(_ev("NicFail", h, p), faults.nic_fail) for h in HOSTS for p in PATHS]
    + [(_ev("NicRecover", h, p), faults.nic_recover) for h in HOSTS for p in PATHS]
    + [(_ev("PollCq", h), apps.poll_cq) for h in HOSTS]
    + [(_ev("HandshakeTimeout", h), layer.handshake_timeout) for h in HOSTS]
    + [(_ev("CompletionTimeout", h), layer.completion_timeout) for h in HOSTS]
)
_DELIVER = [(_ev("Deliver", p, dr), p, dr) for p in PATHS for dr in DIRECTIONS]
_PROGRESS = [(_ev("Progress", h), h) for h in HOSTS]


def successors(s: State, d: DesignRecord, b: Constants) -> list[Transition]:
    """Every (event, action, successor) of state s: TLC's successors, one per enabled
    action instance (a Progress with two enabled steps would give two)."""
    out: list[Transition] = []
    for h, host in enumerate(HOSTS):
        _apps(s, d, b, h, host, out)
    for ev, fn in _FIXED:
        t = fn(s, d, b, *ev.args)
        if t is not None:
            out.append(Transition(ev, ev.name, t))
    wire = s.wire
    for ev, p, dr in _DELIVER:
        ch = wire[p - 1][0 if dr == "AtoB" else 1]
        if ch:
            if ch[0].kind == "ctl":
                t, action = layer.deliver_control(s, d, b, p, dr), "DeliverControl"
            else:
                t, action = transport.deliver_packet(s, d, b, p, dr), "DeliverPacket"
            if t is not None:
                out.append(Transition(ev, action, t))
    for ev, h in _PROGRESS:
        for t in layer.progress_all(s, d, b, h):
            out.append(Transition(ev, "Progress", t))
    return out


def _apps(s: State, d: DesignRecord, b: Constants, h: int, host: str,
          out: list[Transition]) -> None:
    """The application events of one host: its next WR, receive WR and store."""
    w = s.posted[h] + 1
    t = apps.post_send(s, d, b, host, w)
    if t is not None:
        out.append(Transition(_ev("PostSend", host, w), "PostSend", t))
    r = s.recvPosted[h] + 1
    t = apps.post_recv(s, d, b, host, r)
    if t is not None:
        out.append(Transition(_ev("PostRecv", host, r), "PostRecv", t))
    if s.stored[h] < len(s.stores[h]):
        x = s.stores[h][s.stored[h]]
        t = apps.app_write(s, d, b, host, x.region, x.value)
        if t is not None:
            out.append(Transition(_ev("AppWrite", host, x.region, x.value), "AppWrite", t))


def enabled(s: State, d: DesignRecord, b: Constants) -> list[Event]:
    """The events that can happen in state s (each once)."""
    return list(dict.fromkeys(t.event for t in successors(s, d, b)))


def step(s: State, ev: Event, d: DesignRecord, b: Constants) -> State | None:
    """The successor of s by event ev, or None when ev is not enabled in s."""
    if ev.name == "Init":
        raise ValueError("Init starts a trace; it is not a step (see Model.init)")
    return EVENT_FUNCTIONS[ev.name](s, d, b, *ev.args)


class NotEnabled(TraceError):
    """A trace's event cannot happen in the state the previous events reached."""


@dataclass(frozen=True)
class Model:
    """A design at a bound: the executable counterpart of `Spec` in one design module."""

    design: DesignRecord
    bound: Constants
    spec_dir: Path | None = None  # the spec folder both were read from; None: the packaged one

    @classmethod
    def load(cls, design: str, bound: str = "small", spec_dir: Path | None = None) -> Model:
        """The design and bound of designs.toml by name (of spec_dir, else the packaged
        spec)."""
        catalog = load_catalog(spec_dir)
        return cls(load_design(design, catalog), load_bound(bound, catalog), spec_dir)

    def initial_states(self) -> list[tuple[Event, State]]:
        """Init: one state per workload of the bound, with the Init event that picks it."""
        b = self.bound
        return [(make("Init", k),
                 initial(b.programs_of(k), b.max_retries, b.stores_at(k), b.rnr_retry))
                for k in b.workloads]

    def init(self, ev: Event) -> State:
        if ev.name != "Init":
            raise NotEnabled(f"a trace starts with Init, not {ev}")
        if ev.args[0] not in self.bound.workloads:
            raise NotEnabled(f"{ev}: workload {ev.args[0]} is not in bound "
                             f"{self.bound.name} (Workloads = {set(self.bound.workloads)})")
        k = ev.args[0]
        b = self.bound
        return initial(b.programs_of(k), b.max_retries, b.stores_at(k), b.rnr_retry)

    def step(self, s: State, ev: Event) -> State | None:
        return step(s, ev, self.design, self.bound)

    def successors(self, s: State) -> list[Transition]:
        return successors(s, self.design, self.bound)

    def enabled(self, s: State) -> list[Event]:
        return enabled(s, self.design, self.bound)

    def not_enabled(self, n: int, s: State, ev: Event) -> str:
        """Event n of a trace, ev, cannot happen in s: what is enabled instead, and why
        not ev (the first guard of its action that fails, `explain.why_not`)."""
        enabled = ", ".join(map(str, self.enabled(s))) or "nothing"
        why = why_not(self, s, ev)
        return f"event {n}, {ev}, is not enabled (enabled: {enabled})" + \
            (f": {why}" if why else "")

    def run(self, events: Iterable[Event]) -> list[State]:
        """The states an event trace (Init first) goes through; NotEnabled names the
        first event that cannot happen."""
        it = iter(events)
        first = next(it, None)
        if first is None:
            raise NotEnabled("an empty trace (it starts with Init)")
        states = [self.init(first)]
        for n, ev in enumerate(it, 2):
            t = self.step(states[-1], ev)
            if t is None:
                raise NotEnabled(self.not_enabled(n, states[-1], ev))
            states.append(t)
        return states
