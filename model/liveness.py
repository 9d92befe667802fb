"""Liveness on the explored graph: `<>[](PathHealthy(1) \\/ PathHealthy(2)) => <>Done`
under the designs' fairness (FailoverFairness in spec/Failover.tla: weak, strong for the
handshake timer).

A counterexample is a fair behaviour that never reaches Done and from some point on keeps
a path healthy. On a finite graph its infinite part either
- stays in a strongly connected set S of not-Done, healthy states, in which every weakly
  fair action instance that is enabled in *every* state of S, and every strongly fair one
  enabled in *some* state of S, is also taken inside S (a behaviour that runs through all
  of S then treats it fairly). For weak fairness a whole strongly connected component is
  the best such S; a strongly fair instance enabled in a component but never taken there
  rules out only the states that enable it, so the rest is split into components again
  and each is checked in turn (the usual refinement for Streett conditions), or
- stutters for ever in one not-Done, healthy state in which no fair action is enabled.
The prefix must avoid Done states too. Both shapes are searched and the one with the
shortest prefix is returned as a lasso of events.
"""

from __future__ import annotations

from collections import deque

from shift.model.explore import Counterexample, Exploration, Graph
from shift.model.next import fairness_class, strongly_fair
from shift.model.properties import done, some_path_healthy

FairClass = tuple


def _sccs(nodes: list[int], succ: list[list[int]], member: list[bool]) -> list[list[int]]:
    """Tarjan's strongly connected components of the subgraph induced by `member`,
    iteratively (the graphs are deep)."""
    n = len(member)
    idx = [-1] * n
    low = [0] * n
    on = [False] * n
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in nodes:
        if idx[root] != -1:
            continue
        work = [(root, 0)]
        idx[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on[root] = True
        while work:
            v, i = work[-1]
            nbrs = succ[v]
            if i < len(nbrs):
                work[-1] = (v, i + 1)
                w = nbrs[i]
                if not member[w]:
                    continue
                if idx[w] == -1:
                    idx[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on[w] = True
                    work.append((w, 0))
                elif on[w]:
                    low[v] = min(low[v], idx[w])
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == idx[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on[w] = False
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)
    return out


def _sccs_within(nodes: list[int], succ: list[list[int]]) -> list[list[int]]:
    """The strongly connected components of the subgraph on `nodes` alone."""
    local = {v: i for i, v in enumerate(nodes)}
    sub = [[local[w] for w in succ[v] if w in local] for v in nodes]
    comps = _sccs(list(range(len(nodes))), sub, [True] * len(nodes))
    return [[nodes[i] for i in comp] for comp in comps]


def _path(g: Graph, src: int, dst: int, inside: set[int]) -> list[tuple[int, int]]:
    """A shortest path src -> dst within `inside`, as (state, label) steps after src."""
    if src == dst:
        return []
    assert g.edges is not None
    prev: dict[int, tuple[int, int]] = {src: (-1, -1)}
    q = deque([src])
    while q:
        u = q.popleft()
        for v, lid in g.edges[u]:
            if v in inside and v not in prev:
                prev[v] = (u, lid)
                if v == dst:
                    steps = []
                    while v != src:
                        u2, l2 = prev[v]
                        steps.append((v, l2))
                        v = u2
                    return steps[::-1]
                q.append(v)
    raise AssertionError("no path inside a strongly connected component")


def check_liveness(ex: Exploration, prop: str = "Liveness") -> Counterexample | None:
    """A fair counterexample to Liveness on the explored graph, or None when it holds."""
    g = ex.graph
    if g.edges is None:
        raise ValueError("Liveness needs the whole graph: explore with keep_edges=True")
    n = len(g.states)
    not_done = [not done(s) for s in g.states]
    healthy = [some_path_healthy(s) for s in g.states]
    classes = [fairness_class(a, e) for e, a in g.labels]
    edges = g.edges

    # The prefix never visits Done: breadth-first through not-Done states only.
    pdepth = [-1] * n
    pprev: list[tuple[int, int]] = [(-1, -1)] * n
    q = deque()
    for v in g.initial:
        if not_done[v]:
            pdepth[v] = 0
            q.append(v)
    while q:
        u = q.popleft()
        for v, lid in edges[u]:
            if not_done[v] and pdepth[v] == -1:
                pdepth[v] = pdepth[u] + 1
                pprev[v] = (u, lid)
                q.append(v)
    member = [pdepth[v] >= 0 and healthy[v] for v in range(n)]
    cand = [v for v in range(n) if member[v]]
    enabled = [{classes[lid] for _, lid in edges[v]} - {None} for v in range(n)]

    best: tuple[int, int, list[int] | None] | None = None  # (prefix depth, entry, scc)
    for v in cand:  # stuttering where no fair action is enabled
        if not enabled[v] and (best is None or pdepth[v] < best[0]):
            best = (pdepth[v], v, None)
    succ = [[t for t, _ in es] for es in edges]
    todo = _sccs(cand, succ, member)
    while todo:
        comp = todo.pop()
        inside = set(comp)
        taken = {classes[lid] for u in comp for t, lid in edges[u] if t in inside}
        if len(comp) == 1 and not any(t == comp[0] for t, _ in edges[comp[0]]):
            continue  # no cycle here; stuttering was handled above
        if not set.intersection(*(enabled[u] for u in comp)) <= taken:
            continue  # a weakly fair instance starves in every cycle of comp
        starved = {c for u in comp for c in enabled[u] if strongly_fair(c)} - taken
        if starved:  # only cycles through states that do not enable it remain
            todo += _sccs_within([u for u in comp if not enabled[u] & starved], succ)
            continue
        entry = min(comp, key=lambda u: pdepth[u])
        if best is None or pdepth[entry] < best[0]:
            best = (pdepth[entry], entry, comp)
    if best is None:
        return None
    _, entry, comp = best

    # The prefix: back from the entry through not-Done states.
    steps: list[tuple[int, int]] = []
    v = entry
    while pprev[v][0] != -1:
        u, lid = pprev[v]
        steps.append((v, lid))
        v = u
    start = v
    steps.reverse()
    loop_at = len(steps)
    stutters = comp is None
    if comp is not None:
        inside = set(comp)
        # Thread a cycle through one witness per fair class enabled somewhere in the
        # component: an edge taking it, or a state where it is disabled.
        witnesses: list[tuple[int, int | None, int | None]] = []  # (at, label, to)
        for c in set().union(*(enabled[u] for u in comp)):
            edge = next(((u, lid, t) for u in comp for t, lid in edges[u]
                         if t in inside and classes[lid] == c), None)
            if edge is not None:
                witnesses.append(edge)
            else:
                witnesses.append((next(u for u in comp if c not in enabled[u]), None, None))
        cur = entry
        cycle: list[tuple[int, int]] = []
        for at, lid, to in sorted(witnesses, key=lambda w: w[0]):
            cycle += _path(g, cur, at, inside)
            cur = at
            if lid is not None and to is not None:
                cycle.append((to, lid))
                cur = to
        cycle += _path(g, cur, entry, inside)
        if not cycle:  # a single state with only a self-loop edge (no fair witness)
            lid = next(lid for t, lid in edges[entry] if t == entry)
            cycle = [(entry, lid)]
        steps += cycle
    ids = [start] + [v for v, _ in steps]
    return Counterexample(
        prop, [g.init_events[start]] + [g.labels[lid][0] for _, lid in steps],
        [g.states[u] for u in ids], ["Init"] + [g.labels[lid][1] for _, lid in steps],
        loop=None if stutters else loop_at, stutters=stutters)
