"""Differential testing: one event trace drives the model and the C implementation.

The model (`shift.model`) is the oracle: it equals the TLA+ specification. Each event of a
trace (Init first) is applied to the model and, translated by `Bridge`, to a
`shift.impl.Connection`; after every step the observable projections are compared field
by field (`COMPARED`), and the properties the design declares it keeps are checked on the
implementation's observation (`observed_violations`). This module is the only place where
the model and the implementation meet (docs/design.md, the layers); docs/differential.md explains
what is compared, what cannot be, and why.

Mapping of the model's abstract program (Workloads.tla) onto real work requests:
- WR w of the program is `Wr(id=w, op, region, value, signaled)`; notifications carry
  their WR id as immediate data, so B's completion names the sender's WR as `rcvSeen` does;
  inline payloads, so a replay carries the value posted (the model's WRs are values);
- region r is the r-th 8-byte slot of B's registered memory (the model has one region);
- `PostRecv(B, r)` posts receive WR id r; a receive completion names it (`recv`);
- the fabric runs with the bound's `MaxRetries`, the connection with `probe="instant"`
  (the spec's reconnect is its probe) and `ctl_retries=0`; every other event is the
  implementation's event of the same name and arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shift.impl import Fabric, Wr
from shift.model.events import Event
from shift.model.next import Model, NotEnabled
from shift.model.observe import observe
from shift.model.properties import INVARIANTS
from shift.model.state import (
    REGIONS,
    SUCCESS,
    State,
    note_wr,
    notes_before,
    value_after,
)
from shift.tlc.designs import load_catalog

# The fields of the observable projection (spec/State.tla's names) compared after every step.
COMPARED = ("sndSeen", "rcvSeen", "layer", "recvDone", "peerCtr", "sentCtr", "replayed",
            "fence")

# The designs both sides implement (spec/designs.toml and shift.impl.Design).
DESIGNS = ("Shift", "NaiveReplay", "NoFailover")

# Invariants that are functions of the observation alone, checked on the implementation's.
# ExactlyOnceExecution and AtomicSafety count executions at the responder NIC, which no
# application observes (opacity); Opacity and ZeroCopy are structural for a design.
OBSERVABLE_INVARIANTS = ("NotificationIntegrity", "DataAtNotification", "CompletionIntegrity")


def wr_of(program: Sequence[Any], w: int) -> Wr:
    """Program WR w (1-based) as the implementation's work request."""
    x = program[w - 1]
    return Wr(id=w, op=x.op, region=x.region, value=x.value, signaled=x.signaled)


class Bridge:
    """The implementation side of a trace: a fabric and a connection for one design."""

    def __init__(self, design: str, max_retries: int, program: Sequence[Any],
                 copy_posts: bool = False):
        self.program = tuple(program)
        self.fabric = Fabric(retries=max_retries)
        self.conn = self.fabric.connect(design, regions=len(REGIONS), max_wr=16,
                                        probe="instant", ctl_retries=0, copy_posts=copy_posts)

    def close(self) -> None:
        self.fabric.close()

    def apply(self, ev: Event) -> object:
        """Apply one model event (not Init) to the implementation; what the call returned."""
        c = self.conn
        n, a = ev.name, ev.args
        if n == "PostSend":
            return c.post_send(a[0], wr_of(self.program, a[1]))
        if n == "PostRecv":
            return c.post_recv(a[0], a[1])
        if n == "PollCq":
            return c.poll_cq(a[0])
        if n == "Progress":
            return c.progress(a[0])
        return c.apply((n, *a))

    def observation(self) -> dict[str, Any]:
        return self.conn.observe().as_dict()

    def wire_len(self, path: int, direction: str) -> int:
        return self.fabric.wire(path, direction)

    def acts(self, ev: Event) -> bool:
        """Apply ev and say whether the implementation did anything: for an event the
        model does not enable, it must not (PollCq: no completion and no failover state
        change; Progress: no step; Transmit: no packet)."""
        c = self.conn
        if ev.name == "PollCq":
            h = ev.args[0]
            before = c.host_state(h)
            return c.poll_cq(h) is not None or c.host_state(h) != before
        if ev.name == "Progress":
            return c.progress(ev.args[0]) != "none"
        if ev.name == "Transmit":
            return c.transmit(*ev.args)
        raise ValueError(f"no enabledness probe for {ev.name}")


# -- the properties, on an observation ------------------------------------------------

def _notes(obs: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in obs["rcvSeen"] if e["status"] == SUCCESS]


def observed_violations(obs: dict[str, Any], program: Sequence[Any], posted: int,
                        kept: Iterable[str]) -> list[str]:
    """Which of the kept observable invariants the observation breaks (Properties.tla's
    definitions restricted to what an application sees: CompletionIntegrity's post order
    and at-most-once; its "success only for an executed WR" needs the responder's state)."""
    prog = tuple(program)
    bad: list[str] = []
    kept = set(kept)
    if "NotificationIntegrity" in kept:
        limit = notes_before(prog, posted)
        for i, e in enumerate(_notes(obs), 1):
            if i > limit or e["wr"] != note_wr(prog, i) or e["recv"] != i:
                bad.append("NotificationIntegrity")
                break
    if "DataAtNotification" in kept and any(
            e["mem"][r] != value_after(prog, r, e["wr"] - 1)
            for e in _notes(obs) for r in REGIONS):
        bad.append("DataAtNotification")
    if "CompletionIntegrity" in kept:
        wrs = [e["wr"] for e in obs["sndSeen"]]
        if any(a >= b for a, b in zip(wrs, wrs[1:], strict=False)):
            bad.append("CompletionIntegrity")
    return bad


@functools.cache
def kept_invariants(design: str, bound: str) -> tuple[str, ...]:
    """The observable invariants the design declares it keeps at the bound (designs.toml,
    the packaged one: read once per process)."""
    d = load_catalog().design(design).at(bound)
    return tuple(p for p in OBSERVABLE_INVARIANTS if p not in d.violates)


# Findings the C core fixes on purpose (native/README.md): design -> invariants the model
# breaks (the design declares it at some bound) and the implementation keeps. A run stops
# at the step where the model first breaks one; there the implementation's observation
# must keep it, which is the check that replaces equality from then on.
IMPL_FIXES: dict[str, tuple[str, ...]] = {
    # F4: the C core holds a skipped notification's completion behind the replayed WRs
    # before it, and completes a replayed WR that preceded a received notification as the
    # success it was; the spec shows WR 2 SUCCESS then WR 1 WR_FLUSH_ERR.
    "Shift": ("CompletionIntegrity",),
}


# Events whose enabledness is compared after every step (docs/differential.md): each one
# the model does not enable is applied to the implementation, which must do nothing; a
# Deliver is enabled in the model exactly when its channel holds a packet, and so must the
# implementation's channel. Timeout is not compared (the implementation's timers may fire
# while packets are in flight; the spec's only on a quiet wire), nor the faults (the
# bound's fault budget is the model's, not the fabric's).
PROBED = tuple(Event(n, a) for n, a in (
    [("Transmit", ("A", p)) for p in (1, 2)] + [("PollCq", (h,)) for h in ("A", "B")]
    + [("Progress", (h,)) for h in ("A", "B")]))
CHANNELS = tuple((p, d) for p in (1, 2) for d in ("AtoB", "BtoA"))


def enabledness(model: Model, s: State, bridge: Bridge) -> dict[str, tuple[Any, Any]]:
    """Where the two sides disagree on what can happen next: name -> (model, impl)."""
    out: dict[str, tuple[Any, Any]] = {}
    for p, d in CHANNELS:
        m, i = len(s.wire[p - 1][0 if d == "AtoB" else 1]) > 0, bridge.wire_len(p, d) > 0
        if m != i:
            out[f"Deliver({p}, {d}) enabled"] = (m, i)
    for ev in PROBED:
        if model.step(s, ev) is None and bridge.acts(ev):
            out[f"{ev} enabled"] = (False, True)
            break  # the implementation moved: the rest would compare other states
    return out


# -- the runner -------------------------------------------------------------------------

@dataclass
class Divergence:
    """Where the two sides part: the step (1-based event index of the trace), the event,
    and what differs (the compared fields, or the invariants the implementation broke)."""

    step: int
    event: Event
    fields: dict[str, tuple[Any, Any]]  # name -> (model, implementation)
    violated: list[str] = field(default_factory=list)
    error: str | None = None  # the implementation raised

    def __str__(self) -> str:
        lines = [f"step {self.step}: {self.event}"]
        if self.error:
            lines.append(f"  the implementation raised: {self.error}")
        for name, (m, i) in self.fields.items():
            lines.append(f"  {name}: model {m!r}")
            lines.append(f"  {' ' * len(name)}  impl  {i!r}")
        if self.violated:
            lines.append(f"  the implementation's observation breaks {', '.join(self.violated)}")
        return "\n".join(lines)


@dataclass
class Run:
    events: list[Event]
    states: list[State]
    divergence: Divergence | None
    gap: str | None = None  # why the run stopped early without a verdict on the rest

    @property
    def ok(self) -> bool:
        return self.divergence is None


def normalise(obs: dict[str, Any]) -> dict[str, Any]:
    """The projection as compared: equal to `obs` except where the two sides differ by
    an abstraction, each case named here and in docs/differential.md.

    - Error is terminal on both sides and nothing reads the failover bookkeeping there:
      the spec's DeliverControl stores a counter arriving at a host in Error, the
      implementation discards every control message in Error; the spec keeps A's fence
      when the backup path fails in WaitDrained, the implementation reports a fence
      only in WaitDrained. A host's `peerCtr`, and A's `fence`, are not compared while
      that host is in Error.
    """
    out = dict(obs)
    out["peerCtr"] = {h: (None if obs["layer"][h] == "Error" else v)
                      for h, v in obs["peerCtr"].items()}
    if obs["layer"]["A"] == "Error":
        out["fence"] = None
    return out


def compare(model_obs: dict[str, Any], impl_obs: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    mo, io = normalise(model_obs), normalise(impl_obs)
    return {k: (model_obs[k], impl_obs[k]) for k in COMPARED if mo[k] != io[k]}


def gap(s: State, ev: Event) -> str | None:
    """Why event ev from model state s leaves the fragment where the two sides can be
    compared step by step, or None. A WR held behind a fence that failed (below), or a
    cumulative ACK that covers a READ or an atomic whose own response was lost. The spec
    completes it (with the value 0); an RC NIC, simnic included, takes the ACK as an
    implicit NAK and retransmits the READ or atomic to get its response, which takes a
    Timeout the spec does not enable then."""
    if ev.name == "Transmit" and ev.args[1] == 1 and s.layer[0] == "Error" and s.fence \
            and s.nxt[0] <= len(s.sq[0]) and s.sq[0][s.nxt[0] - 1] > s.fence:
        # docs/findings.md, "a WR held behind a failed fence": the spec's Transmit holds
        # the default path only in WaitDrained, so when the backup path fails under the
        # fence the held WRs go out; the C core keeps them held (its doorbell is never rung).
        return "a WR held behind a fence that failed: the spec transmits it, the core holds it"
    if ev.name == "Deliver" and ev.args[1] == "AtoB":
        ch = s.wire[ev.args[0] - 1][0]
        if ch and ch[0].kind == "ctl" and ch[0].what == "counter" \
                and s.layer[1] == "Fallback" and s.sentCtr[1] and s.peerCtr[1] >= 0:
            # docs/findings.md: A's second failover while B still sits in the first one
            # (the fail-back notice was lost): the spec's B stores the counter and never
            # answers; the C core sees a newer epoch, recounts and answers (native/README.md).
            return "A's counter of a second failover reaches B still in the first one"
    if ev.name != "Deliver" or ev.args[1] != "BtoA":
        return None
    i = ev.args[0] - 1
    ch = s.wire[i][1]
    if not ch or ch[0].kind != "ack" or s.qp[0][i] != "RTS" or ch[0].psn < s.una[i]:
        return None
    covered = s.sq[i][s.una[i] - 1:ch[0].psn - 1]  # every WR the ACK completes but its own
    if any(s.program[w - 1].op in ("READ", "FADD", "CAS") for w in covered):
        return "a cumulative ACK covers a READ/atomic whose response was lost (implicit NAK)"
    return None


def run_trace(model: Model, events: Sequence[Event], kept: Iterable[str] | None = None,
              copy_posts: bool = False) -> Run:
    """Drive both sides with the trace; stop at the first divergence. NotEnabled when an
    event cannot happen in the model (the trace is not one of the spec's behaviours).
    copy_posts: the layer keeps its own copy of each WR (the path of a backend that
    cannot give its send queue back) instead of reading the send queue at a failure."""
    events = list(events)
    if not events:
        raise NotEnabled("an empty trace (it starts with Init)")
    kept = tuple(kept_invariants(model.design.name, model.bound.name) if kept is None
                 else kept)
    s = model.init(events[0])
    states = [s]
    bridge = Bridge(model.design.name, model.bound.max_retries, s.program, copy_posts)
    try:
        for k, ev in enumerate(events[1:], 2):
            why = gap(s, ev)
            if why is not None:
                return Run(events[:k - 1], states, None, f"event {k}, {ev}: {why}")
            t = model.step(s, ev)
            if t is None:
                raise NotEnabled(f"event {k}, {ev}, is not enabled in the model")
            s = t
            states.append(s)
            try:
                bridge.apply(ev)
            except Exception as e:  # noqa: BLE001 - any failure of the impl is a divergence
                return Run(events[:k], states, Divergence(k, ev, {}, error=repr(e)))
            mo, io = observe(s).as_dict(), bridge.observation()
            fixed = [p for p in IMPL_FIXES.get(model.design.name, ())
                     if not INVARIANTS[p](s)]
            if fixed:
                bad = observed_violations(io, s.program, s.posted, fixed)
                if bad:
                    return Run(events[:k], states, Divergence(k, ev, {}, bad))
                return Run(events[:k], states, None,
                           f"event {k}, {ev}: the model breaks {', '.join(fixed)}, "
                           "which the implementation keeps on purpose (and does)")
            diff = compare(mo, io)
            bad = observed_violations(io, s.program, s.posted, kept)
            if not diff and not bad:
                mem = bridge.conn.memory()
                if mem != s.mem:  # B's application can read its memory at any time
                    diff = {"mem": (s.mem, mem)}
            if not diff and not bad:
                diff = enabledness(model, s, bridge)
            if diff or bad:
                return Run(events[:k], states, Divergence(k, ev, diff, bad))
        return Run(events, states, None)
    finally:
        bridge.close()


def report(model: Model, run: Run) -> str:
    """A readable step-by-step account of a run: each event, and where the sides part."""
    lines = [f"{model.design.name} at bound {model.bound.name}: {len(run.events)} events"]
    for k, ev in enumerate(run.events, 1):
        lines.append(f"  {k:>2}. {ev}")
    if run.divergence:
        lines.append(str(run.divergence))
    return "\n".join(lines)


# -- trace generation -------------------------------------------------------------------

def in_flight(s: State) -> bool:
    """Are WRs in flight: posted and not completed at A, or packets on a wire?"""
    return bool(s.pending) or any(ch for path in s.wire for ch in path)


# The chance that a step is a fault (when one is enabled): while WRs are in flight, so
# that faults land where they hurt, and rarely at rest. Out of 1000.
FAULT_SHARE_BUSY = 150
FAULT_SHARE_REST = 100
# Recoveries (LinkUp, NicRecover) are ordinary events: a fail-back needs one, and the
# bound already limits them to what failed.
FAULT_NAMES = frozenset({"Drop", "LinkDown", "NicFail"})


def options(model: Model, s: State) -> tuple[list[Event], list[Event]]:
    """The enabled events as (faults, the others), without those that leave the
    comparable fragment (`gap`)."""
    faults: list[Event] = []
    others: list[Event] = []
    for ev in model.enabled(s):
        if gap(s, ev) is None:
            (faults if ev.name in FAULT_NAMES else others).append(ev)
    return faults, others


# Swarm testing: each trace slows some kinds of ordinary events down (the first number
# of a trace chooses which), so that orders a uniform choice rarely makes (an application
# that posts late, a host that polls late) come up often.
SWARM = ("PostSend", "PostRecv", "PollCq", "Transmit", "Deliver", "Progress", "Timeout")
SLOW_SHARE = 100  # out of 1000: how often a slowed event may be picked when others can


def pick(model: Model, s: State, c: int, slow: frozenset[str] = frozenset()) -> Event | None:
    """The event number c picks in state s (None when nothing is enabled): c % 1000 decides
    fault or not (a fault when it is among the top FAULT_SHARE_*), and for an ordinary
    event whether a slowed kind may be picked; c // 1000 picks which one. Zero picks the
    first ordinary event, so shrinking numbers removes faults first."""
    faults, others = options(model, s)
    share = FAULT_SHARE_BUSY if in_flight(s) else FAULT_SHARE_REST
    r, k = c % 1000, c // 1000
    if faults and (not others or r >= 1000 - share):
        return faults[k % len(faults)]
    if not others:
        return None
    fast = [ev for ev in others if ev.name not in slow]
    if fast and r >= SLOW_SHARE:
        return fast[k % len(fast)]
    return others[k % len(others)]


def swarm(c: int) -> frozenset[str]:
    """The kinds of events a trace slows down, from its first number (none for 0)."""
    return frozenset(n for b, n in enumerate(SWARM) if (c >> (8 + b)) & 1)


def trace_from_choices(model: Model, choices: Sequence[int]) -> list[Event]:
    """The trace a list of numbers picks: the first picks the workload (its low bits) and
    the kinds of events slowed down (`swarm`), each next one an event (`pick`); it ends
    early when nothing is enabled."""
    inits = model.initial_states()
    if not choices:
        return [inits[0][0]]
    ev0, s = inits[(choices[0] & 0xFF) % len(inits)]
    slow = swarm(choices[0])
    events = [ev0]
    for c in choices[1:]:
        ev = pick(model, s, c, slow)
        if ev is None:
            break
        t = model.step(s, ev)
        assert t is not None
        events.append(ev)
        s = t
    return events


# -- shrinking ----------------------------------------------------------------------

def diverges(model: Model, events: Sequence[Event]) -> bool:
    """Does the trace diverge (False when it is not a behaviour of the model)?"""
    try:
        return run_trace(model, events).divergence is not None
    except NotEnabled:
        return False


def shrink(model: Model, events: Sequence[Event], budget: int = 2000) -> list[Event]:
    """A shorter trace that still diverges: greedily drop events (the model must still
    allow every event left), then try smaller workloads, until nothing more goes or the
    budget of runs is spent. The first event (Init) stays first."""
    best = list(events)
    runs = 0
    changed = True
    while changed and runs < budget:
        changed = False
        k = len(best) - 1
        while k >= 1 and runs < budget:
            cand = best[:k] + best[k + 1:]
            runs += 1
            if diverges(model, cand):
                best, changed = cand, True
            k -= 1
        # everything after the divergence is irrelevant
        run = run_trace(model, best)
        if run.divergence is not None and len(run.events) < len(best):
            best, changed = run.events, True
    return best
