"""Running a trace through the model and judging it: which properties it violates, where.

A trace is an event trace (JSON Lines, `shift.model.events`) or a state trace in ITF JSON,
as `shift check` writes for TLC's counterexamples and the explorer's: the events are read
from its `event` variable (and the workload from `program`), and each state the model
reaches is compared with the one in the file, so an ITF trace is validated, not trusted.

Liveness is judged on the trace's shape: a lasso (its last state repeats an earlier one)
or a final state that stutters, never Done, a path healthy all along the repeated part,
every weakly fair action that stays enabled taken in it, and every strongly fair one
enabled anywhere in it taken in it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from shift.model.events import TraceError, load_trace
from shift.model.next import Model, NotEnabled, action_of, fairness_class, strongly_fair
from shift.model.properties import INVARIANTS, done, some_path_healthy
from shift.model.state import State
from shift.model.tla import FIELDS as TLA_FIELDS
from shift.model.tla import canonical, canonical_itf, to_tla
from shift.vocabulary import Event, make


@dataclass
class Judged:
    """A replayed trace: its states and what it shows."""

    events: list[Event]
    states: list[State]
    first_violation: dict[str, int] = field(default_factory=dict)  # invariant -> step index
    liveness: str | None = None  # why the trace violates Liveness, when it does
    loop: int | None = None  # the state index a lasso returns to
    stutters: bool = False


def _liveness(model: Model, states: list[State], events: list[Event]) -> tuple[str, int | None,
                                                                                bool] | None:
    if any(done(s) for s in states):
        return None
    last = states[-1]
    loop = next((k for k, s in enumerate(states[:-1]) if s == last), None)
    if loop is not None:
        cycle = states[loop:-1]
        if not all(some_path_healthy(s) for s in cycle):
            return None
        steps = zip(states[loop:-1], events[loop + 1:], strict=True)
        taken = {fairness_class(action_of(s, ev), ev) for s, ev in steps}
        enabled = [{fairness_class(t.action, t.event) for t in model.successors(s)} - {None}
                   for s in cycle]
        sometimes = {c for c in set().union(*enabled) if strongly_fair(c)}
        starved = (set.intersection(*enabled) | sometimes) - taken
        if starved:
            return None
        return (f"a fair cycle back to step {loop + 1} that never reaches Done", loop, False)
    if not some_path_healthy(last):
        return None
    fair = [t for t in model.successors(last) if fairness_class(t.action, t.event) is not None]
    if fair:
        return None
    return ("the last state is not Done and no fair action is enabled in it: the behaviour "
            "stutters there for ever with a path healthy", None, True)


def judge(model: Model, events: list[Event], invariants: list[str] | None = None,
          temporal: bool = True) -> Judged:
    """Replay the events (Init first) and find what the trace violates."""
    states = model.run(events)
    out = Judged(events, states)
    for name in invariants if invariants is not None else list(INVARIANTS):
        pred = INVARIANTS[name]
        bad = next((k for k, s in enumerate(states) if not pred(s)), None)
        if bad is not None:
            out.first_violation[name] = bad
    if temporal:
        live = _liveness(model, states, events)
        if live is not None:
            out.liveness, out.loop, out.stutters = live
    return out


def events_from_itf(doc: dict, source: str, model: Model) -> tuple[list[Event], list[dict]]:
    """The event trace of an ITF document written by `shift check`, and its states; the
    workload is the one of the model's bound whose program state 1 has."""
    states = doc.get("states")
    if not isinstance(states, list) or not states:
        raise TraceError(f"{source}: an ITF trace needs a non-empty \"states\" list")
    prog = canonical_itf(states[0].get("program"))
    b = model.bound
    workload = next((k for k in b.workloads
                     if canonical(TLA_FIELDS["program"](b.programs_of(k))) == prog), None)
    if workload is None:
        raise TraceError(f"{source}: state 1's program is none of the workloads of bound "
                         f"{model.bound.name} ({', '.join(map(str, model.bound.workloads))})")
    events = [make("Init", workload)]
    for k, st in enumerate(states[1:], 2):
        ev = st.get("event")
        try:
            events.append(make(ev[0], *ev[1:]) if isinstance(ev, list) and ev else make(ev))
        except (ValueError, TypeError) as e:
            raise TraceError(f"{source}: state {k}: event {ev!r}: {e}") from None
    return events, states


def load_any(path: Path, model: Model) -> tuple[list[Event], list[dict] | None]:
    """Events from a .jsonl event trace, or from an ITF JSON state trace of the model's
    design and bound (with its states for validation)."""
    if path.suffix == ".json" or path.name.endswith(".itf.json"):
        try:
            doc = json.loads(path.read_text())
        except OSError as e:
            raise TraceError(f"{path}: {e.strerror or e}") from None
        except json.JSONDecodeError as e:
            raise TraceError(f"{path}:{e.lineno}: not JSON: {e.msg}") from None
        if not isinstance(doc, dict):
            raise TraceError(f"{path}: not an ITF document")
        return events_from_itf(doc, str(path), model)
    return load_trace(path), None


def validate(states: list[State], itf_states: list[dict], source: str) -> None:
    """Check that the model went through the ITF trace's states, variable by variable."""
    if len(itf_states) != len(states):
        raise TraceError(f"{source}: {len(itf_states)} states, the model made {len(states)}")
    for k, (s, theirs) in enumerate(zip(states, itf_states, strict=True), 1):
        mine = to_tla(s)
        for var, value in mine.items():
            if var in theirs and canonical(value) != canonical_itf(theirs[var]):
                raise NotEnabled(f"{source}: state {k}: the model has {var} = "
                                 f"{json.dumps(value, default=str)}, the trace "
                                 f"{json.dumps(theirs[var])}")
