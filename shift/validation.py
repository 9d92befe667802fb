"""Trace validation: the implementation runs on its own, the model judges the recording.

The differential runner (`shift.differential`) lets the model choose every event, so it
only ever asks the implementation to do what the spec can do. Here the implementation
leads: a seeded random scheduler picks among the calls an application, the fabric and
the fault injector can make (posts, polls, `progress`, transmit, deliver, timeouts, drops,
link and NIC faults and recoveries), applies them to a `shift.impl.Connection`, and
records each call that did something, with the observation after it. The recording is
then checked against the model: every recorded step must be a step the model allows
from where it is, and leave the same observation (and memories); the design's kept
invariants (`shift.model.observable`) must hold on the implementation's observation, as
in a differential run.

The scheduler keeps to the environment of a bound, as the spec's environment does: the
fault and drop budgets and the faulty paths of `spec/designs.toml`, recoveries only where
the bound recovers, a retransmission timer that fires only on a quiet path (the
spec's timeout abstraction, docs/differential.md), control messages lost only where the
bound's `CtlLoss` allows, and a handshake timer that fires only once the exchange is lost
(`HandshakeTimeout`'s guard, docs/model.md); where the bound has them, receive
completions written after their ACK (`WriteCqe`) and the layer's reading of its NICs'
asynchronous events (`FatalEvent`). The completion timer is not scheduled: its guard (a
wait for ever) is the spec's knowledge of both hosts. Everything else is the
implementation's own choice. The documented differences of docs/differential.md end a
validation early (`gap`), as they end a differential run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from shift.differential import CHANNELS, Bridge, gap, judge, kept_invariants
from shift.model.next import Model
from shift.model.observable import notes
from shift.model.state import WRITERS, State, notes_before, num_notes
from shift.vocabulary import HOSTS, PATHS, Event

FAULT_SHARE = 0.1  # how often the scheduler reaches for a fault when one is possible


@dataclass
class Step:
    event: Event
    observation: dict[str, Any]
    memory: tuple[tuple[int, ...], tuple[int, ...]]  # A's regions, B's


@dataclass
class Recording:
    """One run of the implementation: the workload it ran and every step that did something."""

    design: str
    bound: str
    workload: int
    steps: list[Step]

    @property
    def events(self) -> list[Event]:
        return [Event("Init", (self.workload,))] + [s.event for s in self.steps]


@dataclass
class ValidationResult:
    """The model's judgement of a recording: where it parts from the model, if it does."""

    checked: int  # recorded steps checked
    failure: str | None = None
    gap: str | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


class Scheduler:
    """Picks the implementation's next call at random, within the bound's environment.
    Both hosts post their programs (A's Program(k), B's BProgram(k)) and the receive WRs
    their peer's notifications need."""

    def __init__(self, model: Model, bridge: Bridge, rng: random.Random):
        self.b, self.bridge, self.rng = model.bound, bridge, rng
        self.programs = bridge.programs
        self.posted, self.recv_posted = [0, 0], [0, 0]
        self.faults = self.drops = 0

    def candidates(self) -> tuple[list[Event], list[Event]]:
        """(ordinary calls, faults) possible now, as events of the vocabulary."""
        fab, b = self.bridge.fabric, self.b
        calls = [Event(n, (h,)) for n in ("PollCq", "Progress") for h in HOSTS]
        calls += [Event("Transmit", (h, p)) for h in HOSTS for p in PATHS]
        for i, h in enumerate(HOSTS):
            w = self.posted[i] + 1
            if w <= len(self.programs[i]) and self.may_post(i, w):
                calls.append(Event("PostSend", (h, w)))
            if self.recv_posted[i] < num_notes(self.programs[1 - i]):
                calls.append(Event("PostRecv", (h, self.recv_posted[i] + 1)))
        busy = {(p, d) for p, d in CHANNELS if fab.wire(p, d) > 0}
        calls += [Event("Deliver", c) for c in sorted(busy)]
        calls += [Event("Timeout", (h, p)) for h in HOSTS for p in PATHS
                  if (p, "AtoB") not in busy and (p, "BtoA") not in busy]
        if (2, "AtoB") not in busy and (2, "BtoA") not in busy:
            calls += [Event("HandshakeTimeout", (h,)) for h in HOSTS if self.exchange_lost(h)]
        if b.ack_before_cqe:
            calls += [Event("WriteCqe", (h, p)) for h in HOSTS for p in PATHS]
        if b.device_fatal:  # the layer reads its NICs' asynchronous events
            calls += [Event("FatalEvent", (h, p)) for h in HOSTS for p in PATHS]
        if b.recover:
            calls += [Event("LinkUp", (p,)) for p in PATHS]
            calls += [Event("NicRecover", (h, p)) for h in HOSTS for p in PATHS]
        faults: list[Event] = []
        if self.drops < b.max_drops:
            faults += [Event("Drop", c) for c in sorted(busy) if self.droppable(*c)]
        if self.faults < b.max_faults:
            for p in sorted(b.fault_paths):
                faults += [Event("LinkDown", (p,))]
                faults += [Event("NicFail", (h, p)) for h in HOSTS]
        return calls, faults

    def droppable(self, p: int, d: str) -> bool:
        """May the wire lose the head of channel (p, d) in this bound: a control message
        where CtlLoss, a request or an ACK on a fault path."""
        head = self.bridge.fabric.head_kind(p, d)  # (over libibverbs: a UD datagram)
        return self.b.ctl_loss if head in ("ctl", "ud") else p in self.b.fault_paths

    def exchange_lost(self, h: str) -> bool:
        """HandshakeTimeout's guard but the quiet path: h awaits the answer to its counter,
        the peer is not about to answer (it did not take h's counter, or it answered), and
        h's resend can leave (its QP 2 in RTS, its NIC 2 and link 2 up)."""
        obs, o = self.bridge.observation(), HOSTS[1 - HOSTS.index(h)]
        slow_peer = obs["peerSeq"][o] == obs["ctrSeq"][h] and not obs["sentCtr"][o]
        return (obs["asked"][h] and obs["sentCtr"][h] and not slow_peer
                and self.bridge.qp_ready(h, 2) and self.bridge.fabric.can_send(h, 2))

    def taken(self) -> tuple[int, ...]:
        """How many notifications each host's application took (A's, B's), as the
        implementation reports them: host i takes those of its peer's direction."""
        obs = self.bridge.conn.observe()
        return tuple(len(notes(obs.direction(1 - i))) for i in range(len(HOSTS)))

    def may_post(self, i: int, w: int) -> bool:
        """The application's own flow control, the spec's `CanPost`: a notification only
        once the peer posted its receive WR; a WR writing a region only once the peer's
        application took every notification posted before it (buffer reuse); a reply
        only once this host took the notifications it answers."""
        prog = self.programs[i]
        x = prog[w - 1]
        if x.note > 0 and self.recv_posted[1 - i] < x.note:
            return False
        taken = self.taken()
        if x.op in WRITERS and x.region != 0 and taken[1 - i] < notes_before(prog, w - 1):
            return False
        return taken[i] >= x.after

    def pick(self) -> Event:
        calls, faults = self.candidates()
        if faults and self.rng.random() < FAULT_SHARE:
            return self.rng.choice(faults)
        return self.rng.choice(calls)

    def apply(self, ev: Event) -> bool:
        """Make the call; whether the implementation did anything (posts always count:
        the application made them)."""
        c, n = self.bridge.conn, ev.name
        if n in ("PostSend", "PostRecv"):
            i = HOSTS.index(ev.args[0])
            if n == "PostSend":
                self.posted[i] += 1
                self.bridge.apply(ev)
            else:
                self.recv_posted[i] += 1
                c.post_recv(ev.args[0], ev.args[1])
            return True
        if n in ("PollCq", "Progress", "Transmit"):
            return self.bridge.acts(ev)
        if n == "Timeout":  # the NIC's retransmission timer
            return self.bridge.fabric.timeout(*ev.args)
        acted = bool(c.apply(ev))
        if acted and n == "Drop":
            self.drops += 1
        if acted and n in ("LinkDown", "NicFail"):
            self.faults += 1
        return acted


def record(model: Model, workload: int, seed: int, length: int = 60,
           attempts: int = 4, side: str = "core") -> Recording:
    """A run of the implementation of `model`'s design at its bound: up to `length`
    recorded steps, each chosen by a scheduler seeded with `seed`; side: the layer's
    backend (`Bridge`)."""
    bridge = Bridge(model.design.name, model.bound, model.bound.program(workload),
                    model.bound.bprogram(workload), side=side)
    rng = random.Random(seed)
    sched = Scheduler(model, bridge, rng)
    steps: list[Step] = []
    idle = 0
    try:
        while len(steps) < length and idle < attempts * 16:
            ev = sched.pick()
            if not sched.apply(ev):
                idle += 1
                continue
            idle = 0
            steps.append(Step(ev, bridge.observation(), bridge.memory()))
    finally:
        bridge.close()
    return Recording(model.design.name, model.bound.name, workload, steps)


def validate(model: Model, rec: Recording,
             kept: tuple[str, ...] | None = None) -> ValidationResult:
    """Check a recording against the model, step by step: each step must be one the
    model allows, and leave what the differential runner demands after a step (`judge`:
    the same observation and memory, the kept invariants on the implementation's;
    default: those the design declares at the bound)."""
    design = model.design.name
    if kept is None:
        kept = kept_invariants(design, model.bound.name, model.spec_dir)
    s: State = model.init(Event("Init", (rec.workload,)))
    for k, step in enumerate(rec.steps, 1):
        ev = step.event
        why = gap(s, ev, model.bound.implicit_nak)
        if why is not None:
            return ValidationResult(k - 1, gap=f"step {k}, {ev}: {why}")
        t = model.step(s, ev)
        if t is None:
            return ValidationResult(k - 1, f"step {k}, {ev}: not a step the model allows here")
        s = t
        j = judge(design, s, step.observation, step.memory, kept)
        if not j.ok:
            broken = f"the implementation's observation breaks {', '.join(j.violated)}"
            lines = [f"step {k}, {ev}: {'the observations differ' if j.fields else broken}"]
            lines += [f"  {name}: model {m!r}, impl {i!r}" for name, (m, i) in j.fields.items()]
            if j.fields and j.violated:
                lines.append(f"  {broken}")
            return ValidationResult(k, "\n".join(lines))
        if j.fixed:
            return ValidationResult(k, gap=f"step {k}, {ev}: the model breaks "
                                           f"{', '.join(j.fixed)}, which the implementation "
                                           "keeps on purpose (and does)")
    return ValidationResult(len(rec.steps))


def describe(rec: Recording) -> str:
    """The recording as numbered steps, for a failure message."""
    return "\n".join(f"{k:3}. {ev}" for k, ev in enumerate(rec.events))
