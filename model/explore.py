"""The explorer: breadth-first search of a design at a bound, as TLC does it.

States are the model's `State`s (the spec's View), so the graph is TLC's under `VIEW View`:
same distinct states, one edge per enabled action instance. Every invariant is checked on
every new state; the first state violating one (breadth-first, so no shorter trace reaches
a violation) becomes its counterexample. With `keep_edges`, the whole graph is kept for
Liveness (`shift.model.liveness`) and for the conformance test against TLC's dump.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from shift.model.next import Model
from shift.model.properties import INVARIANTS
from shift.model.state import State
from shift.vocabulary import Event

Label = tuple[Event, str]  # (event, TLA+ action)


@dataclass
class Graph:
    """The reachable states (by id, in BFS order) and, when kept, the labelled edges."""

    states: list[State] = field(default_factory=list)
    index: dict[State, int] = field(default_factory=dict)
    parent: list[int] = field(default_factory=list)  # BFS tree: -1 for an initial state
    via: list[int] = field(default_factory=list)  # label id of the BFS-tree edge into it
    depth: list[int] = field(default_factory=list)
    initial: list[int] = field(default_factory=list)
    # edges[u]: (target id, label id) per transition, when keep_edges
    edges: list[list[tuple[int, int]]] | None = None
    labels: list[Label] = field(default_factory=list)
    label_ids: dict[Label, int] = field(default_factory=dict)
    init_events: dict[int, Event] = field(default_factory=dict)
    generated: int = 0  # states generated, TLC's count: initial states plus transitions

    def label(self, ev: Event, action: str) -> int:
        key = (ev, action)
        lid = self.label_ids.get(key)
        if lid is None:
            lid = self.label_ids[key] = len(self.labels)
            self.labels.append(key)
        return lid

    def path_to(self, v: int) -> list[int]:
        """The BFS-tree path from an initial state to v (state ids)."""
        out = []
        while v >= 0:
            out.append(v)
            v = self.parent[v]
        return out[::-1]

    def events_to(self, v: int) -> list[Event]:
        """The event trace (Init first) of the BFS-tree path to v: a shortest one."""
        ids = self.path_to(v)
        return [self.init_events[ids[0]]] + [self.labels[self.via[u]][0] for u in ids[1:]]


@dataclass
class Counterexample:
    """A behaviour violating a property: its events (Init first) and states; for Liveness
    a lasso (`loop`: the 0-based state it returns to) or a final state that stutters."""

    property: str
    events: list[Event]
    states: list[State]
    actions: list[str]  # the TLA+ action of each step ("Init" first)
    loop: int | None = None
    stutters: bool = False


@dataclass
class Exploration:
    design: str
    bound: str
    graph: Graph
    seconds: float
    invariants: list[str]
    violations: dict[str, Counterexample] = field(default_factory=dict)

    @property
    def distinct(self) -> int:
        return len(self.graph.states)

    def counterexample(self, v: int, prop: str) -> Counterexample:
        g = self.graph
        ids = g.path_to(v)
        return Counterexample(prop, g.events_to(v), [g.states[u] for u in ids],
                              ["Init"] + [g.labels[g.via[u]][1] for u in ids[1:]])


Progress = Callable[[int, int], None]  # (distinct states, states left on the queue)


def explore(model: Model, invariants: list[str] | None = None, *, keep_edges: bool = True,
            stop_when_all_violated: bool = False, progress: Progress | None = None,
            max_states: int | None = None) -> Exploration:
    """Breadth-first search over every state reachable from Init; check each invariant
    (all of Properties.tla's by default) on every new state."""
    names = list(INVARIANTS) if invariants is None else list(invariants)
    unknown = [n for n in names if n not in INVARIANTS]
    if unknown:
        raise ValueError(f"the model has no invariant {', '.join(unknown)}")
    checks = [(n, INVARIANTS[n]) for n in names]
    started = time.monotonic()
    g = Graph(edges=[] if keep_edges else None)
    result = Exploration(model.design.name, model.bound.name, g, 0.0, names)
    index, states, parent, via, depth = g.index, g.states, g.parent, g.via, g.depth
    edges = g.edges

    def check(v: int, s: State) -> None:
        for n, pred in checks:
            if n not in result.violations and not pred(s):
                result.violations[n] = result.counterexample(v, n)

    for ev, s in model.initial_states():
        g.generated += 1
        if s in index:
            continue
        v = index[s] = len(states)
        states.append(s)
        parent.append(-1)
        via.append(-1)
        depth.append(0)
        g.initial.append(v)
        g.init_events[v] = ev
        if edges is not None:
            edges.append([])
        check(v, s)

    successors = model.successors
    label = g.label
    head = 0
    while head < len(states):
        if stop_when_all_violated and len(result.violations) == len(checks):
            break
        if max_states is not None and len(states) >= max_states:
            break
        u = head
        head += 1
        out = edges[u] if edges is not None else None
        d = depth[u] + 1
        for tr in successors(states[u]):
            g.generated += 1
            t = tr.target
            v = index.get(t)
            lid = label(tr.event, tr.action)
            if v is None:
                v = index[t] = len(states)
                states.append(t)
                parent.append(u)
                via.append(lid)
                depth.append(d)
                if edges is not None:
                    edges.append([])
                check(v, t)
            if out is not None:
                out.append((v, lid))
        if progress is not None and head % 20000 == 0:
            progress(len(states), len(states) - head)
    result.seconds = time.monotonic() - started
    return result
