"""The runner: one event trace through the model and the C implementation side by side.

The model is the oracle. Each event of a trace (Init first) is applied to the model and,
through the `Bridge`, to the implementation; after every step `judge` compares the
observable projections field by field (`COMPARED`, after `normalise`) and both hosts'
memories, and checks the design's kept invariants on the implementation's observation,
in both directions of traffic; then
`enabledness` compares what can happen next. A run stops at the first divergence, or
early, without a verdict on the rest, at a documented difference (`gaps`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shift.model.next import Model, NotEnabled
from shift.model.observable import broken
from shift.model.observe import Observation, observe
from shift.model.state import State
from shift.model.tla import to_tla
from shift.narrate import tell
from shift.vocabulary import DIRECTIONS, HOSTS, OBSERVATION_FIELDS, PATHS, Event

from .bridge import Bridge
from .gaps import fixed_here, gap, kept_invariants, normalise

# The fields of the observable projection (spec/State.tla's names) compared after every
# step, each for both hosts: all of them. Every C endpoint has both sides of the spec's
# host (its send side and its receive side) and its counter exchange, and both post sends
# and receives on the same QPs (two-way traffic: workloads where B posts WRs too).
COMPARED: tuple[str, ...] = OBSERVATION_FIELDS


def compare(model_obs: dict[str, Any], impl_obs: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The compared entries that differ: "name.host" -> (model, implementation)."""
    mo, io = normalise(model_obs), normalise(impl_obs)
    return {f"{k}.{h}": (model_obs[k][h], impl_obs[k][h]) for k in COMPARED for h in HOSTS
            if mo[k][h] != io[k][h]}


@dataclass
class Judgement:
    """One step of the implementation judged against the model's state after it."""

    fields: dict[str, tuple[Any, Any]]  # what differs: name -> (model, implementation)
    violated: list[str]  # invariants the implementation's observation breaks
    fixed: list[str]  # invariants the model breaks here and the implementation keeps on
    #                   purpose (IMPL_FIXES): the comparison ends at this step

    @property
    def ok(self) -> bool:
        return not self.fields and not self.violated


def broken_both(obs: Observation, s: State, names: Iterable[str]) -> list[str]:
    """The named observable invariants the observation breaks in either direction of
    traffic (A's WRs to B, B's WRs to A), each named once."""
    names = tuple(names)
    out: list[str] = []
    for h in range(len(HOSTS)):
        out += [p for p in broken(obs.direction(h), s.program[h], s.posted[h], names)
                if p not in out]
    return out


def judge(design: str, s: State, impl_obs: dict[str, Any],
          memory: tuple[tuple[int, ...], tuple[int, ...]], kept: Iterable[str]) -> Judgement:
    """The implementation's observation and both hosts' memories (A's, B's) after a step,
    against the model's state s after it. Where the model breaks an invariant the
    implementation fixes on purpose, that invariant must hold on the implementation's
    observation, which replaces equality; elsewhere the projections and the memories
    must be equal and the kept invariants hold on the implementation's observation."""
    obs = Observation.from_dict(impl_obs)
    fixed = fixed_here(design, s)
    if fixed:
        return Judgement({}, broken_both(obs, s, fixed), fixed)
    diff = compare(observe(s).as_dict(), impl_obs)
    for h, host in enumerate(HOSTS):  # an application can read its memory at any time
        if memory[h] != s.mem[h]:
            diff[f"mem.{host}"] = (s.mem[h], memory[h])
    return Judgement(diff, broken_both(obs, s, kept), [])


# Events whose enabledness is compared after every step (docs/differential.md): each one
# the model does not enable is applied to the implementation, which must do nothing; a
# Deliver is enabled in the model exactly when its channel holds a packet, and so must the
# implementation's channel. Timeout is not compared (the implementation's timers may fire
# while packets are in flight; the spec's only on a quiet wire), nor the faults (the
# bound's fault budget is the model's, not the fabric's).
PROBED = tuple(Event(n, a) for n, a in (
    [("Transmit", (h, p)) for h in HOSTS for p in PATHS] + [("PollCq", (h,)) for h in HOSTS]
    + [("Progress", (h,)) for h in HOSTS]))
CHANNELS = tuple((p, d) for p in PATHS for d in DIRECTIONS)


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


def run_trace(model: Model, events: Sequence[Event], kept: Iterable[str] | None = None,
              copy_posts: bool = False, side: str = "core") -> Run:
    """Drive both sides with the trace; stop at the first divergence. NotEnabled when an
    event cannot happen in the model (the trace is not one of the spec's behaviours).
    copy_posts: the layer keeps its own copy of each WR (the path of a backend that
    cannot give its send queue back) instead of reading the send queue at a failure.
    side: the C layer's backend (`Bridge`: "core" or "verbs")."""
    events = list(events)
    if not events:
        raise NotEnabled("an empty trace (it starts with Init)")
    design = model.design.name
    kept = tuple(kept_invariants(design, model.bound.name, model.spec_dir) if kept is None
                 else kept)
    s = model.init(events[0])
    states = [s]
    bridge = Bridge(design, model.bound, s.program[0], s.program[1], copy_posts,
                    side=side)
    try:
        for k, ev in enumerate(events[1:], 2):
            why = gap(s, ev, model.bound.implicit_nak)
            if why is not None:
                return Run(events[:k - 1], states, None, f"event {k}, {ev}: {why}")
            t = model.step(s, ev)
            if t is None:
                raise NotEnabled(f"in the model, {model.not_enabled(k, s, ev)}")
            s = t
            states.append(s)
            try:
                bridge.apply(ev)
            except Exception as e:  # noqa: BLE001 - any failure of the impl is a divergence
                return Run(events[:k], states, Divergence(k, ev, {}, error=repr(e)))
            j = judge(design, s, bridge.observation(), bridge.memory(), kept)
            if not j.ok:
                return Run(events[:k], states, Divergence(k, ev, j.fields, j.violated))
            if j.fixed:
                return Run(events[:k], states, None,
                           f"event {k}, {ev}: the model breaks {', '.join(j.fixed)}, "
                           "which the implementation keeps on purpose (and does)")
            diff = enabledness(model, s, bridge)
            if diff:
                return Run(events[:k], states, Divergence(k, ev, diff))
        return Run(events, states, None)
    finally:
        bridge.close()


def report(model: Model, run: Run) -> str:
    """A readable step-by-step account of a run: each event as the model took it (the
    narrator's lines), the events it did not reach, and where the sides part."""
    lines = [f"{model.design.name} at bound {model.bound.name}: {len(run.events)} events"]
    states = [to_tla(s, ev) for s, ev in zip(run.states, run.events, strict=False)]
    lines += tell(states, {}, init=str(run.events[0])) if states else []
    lines += [f"  {k:>2}. {ev}" for k, ev in enumerate(run.events, 1) if k > len(states)]
    if run.divergence:
        lines.append(str(run.divergence))
    return "\n".join(lines)
