"""The model against the specification: TLC's full state graph against the explorer's.

TLC writes its graph with `-dump dot,actionlabels FILE`: one node per distinct state
(labelled with the state TLC first reached it by, `event` included; initial states are
`style = filled`) and one edge per generated successor, labelled with the action's name.
Under `VIEW View` TLC identifies states by the fingerprint of the View, i.e. every variable
but `event`; the explorer's states are exactly the View. So the comparison is over View
values: each TLC node's label is parsed (shift.tlaplus.values), `event` dropped, and mapped to
a canonical form (shift.model.tla.canonical); each explorer state is mapped to the same
form through `to_tla`. The graphs are equal when the initial states are the same set and
every explorer state's outgoing edges, as a multiset of (action, canonical target), equal
those of the TLC node with the same View (which also makes the state counts equal).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shift import report
from shift.errors import ShiftError
from shift.model.explore import Exploration
from shift.model.state import VARIABLES
from shift.model.tla import ViewCanon, canonical, to_tla
from shift.spec.catalog import Bound, Catalog, Design
from shift.tlaplus.values import parse_state, parse_value
from shift.tlc.java import find_jar, find_java
from shift.tlc.runner import write_cfg

_NODE = re.compile(r'^(-?\d+) \[label="(.*)"(,style = filled)?\];?\s*$')
_EDGE = re.compile(r'^(-?\d+) -> (-?\d+) \[label="([^"]*)"')
_NUMBERED = re.compile(r"^-?\d+ ")
_UNESCAPE = re.compile(r"\\(.)")
_VIEW = frozenset(VARIABLES)
# In a dot label, TLC's "\n/\\ " between conjuncts is escaped to "\\n/\\\\ ".
_FIRST, _SEP = "/\\\\ ", "\\n/\\\\ "


def _unescape(text: str) -> str:
    return _UNESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


@dataclass
class TlcGraph:
    """TLC's dumped graph with every node's View in canonical form."""

    path: Path
    view: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # fingerprint -> View
    by_view: dict[tuple[Any, ...], int] = field(default_factory=dict)
    initial: list[int] = field(default_factory=list)
    out: dict[int, list[tuple[int, str]]] = field(default_factory=dict)  # fp -> (fp, action)
    edges: int = 0


def parse_dot(path: Path) -> TlcGraph:
    """Read TLC's dot dump. Each label is split into its `var = value` texts by hand (the
    DOT escaping, `_SEP`, is not TLA+), so that a value printed the same way is parsed once
    (memo per variable): the labels repeat most values, and without the memo parsing
    would dominate the time."""
    g = TlcGraph(path)
    memo: dict[str, dict[str, Any]] = {v: {} for v in VARIABLES}
    last = ""
    with path.open() as f:
        for lineno, line in enumerate(f, 1):
            last = line.strip() or last
            if (e := _EDGE.match(line)) is not None:
                g.out.setdefault(int(e.group(1)), []).append((int(e.group(2)), e.group(3)))
                g.edges += 1
                continue
            if (n := _NODE.match(line)) is None:
                if _NUMBERED.match(line):  # a node or an edge, but not as TLC writes them
                    raise ShiftError(f"{path}:{lineno}: not a node or an edge of TLC's "
                                     f"dump: {line.strip()[:60]}")
                continue
            fp = int(n.group(1))
            values: dict[str, Any] = {}
            # Split the label as printed (still escaped): memo hits need no unescaping.
            raw = n.group(2)
            for part in raw[4:].split(_SEP) if raw.startswith(_FIRST) else ():
                var, _, text = part.partition(" = ")
                m = memo.get(var)
                if m is None:
                    continue  # `event`: not part of the View
                c = m.get(text)
                if c is None:
                    c = m[text] = canonical(parse_value(_unescape(text)))
                values[var] = c
            missing = _VIEW - values.keys()
            if missing:
                raise ShiftError(f"{path}: node {fp} lacks {', '.join(sorted(missing))}")
            view = tuple(values[v] for v in VARIABLES)
            g.view[fp] = view
            g.by_view[view] = fp
            if n.group(3):
                g.initial.append(fp)
    if last != "}":
        raise ShiftError(f"{path}: truncated (TLC's dump ends with the closing brace)")
    return g


def dump_graph(catalog: Catalog, design: Design, bound: Bound, out: Path,
               workers: int = 1, heap_mb: int = 1024, timeout: float = 600,
               invariants: Sequence[str] = ()) -> Path:
    """Run TLC on the design at the bound, dumping its state graph. The invariants (none
    of the table's: a violation would cut the graph short; TypeOK) are checked in the
    same run, and a violation is a ShiftError that names it."""
    with tempfile.TemporaryDirectory(prefix="shift-dump-") as tmp:
        work = Path(tmp)
        for tla in catalog.spec_dir.glob("*.tla"):
            shutil.copyfile(tla, work / tla.name)
        write_cfg(work / "MC.cfg", bound.constants, list(invariants), [])
        cmd = [find_java(), "-XX:+UseParallelGC", f"-Xmx{heap_mb}m", "-cp", find_jar(),
               "tlc2.TLC", "-deadlock", "-workers", str(workers), "-metadir",
               str(work / "states"), "-config", "MC.cfg", "-dump", "dot,actionlabels",
               str(out.resolve()), f"{design.module}.tla"]
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout,
                              check=False)
        if proc.returncode != 0 or "Model checking completed" not in proc.stdout:
            lines = proc.stdout.splitlines()
            # TLC's own verdict ("Error: Invariant TypeOK is violated.") comes before the
            # trace, which the tail shows.
            said = [ln for ln in lines if ln.startswith("Error:")][:3]
            tail = "\n".join(said + lines[-15:])
            raise ShiftError(f"TLC failed on {design.module} (status {proc.returncode}):\n{tail}")
    # TLC appends .dot unless the name already ends with it.
    return out if out.suffix == ".dot" else out.with_name(out.name + ".dot")


@dataclass
class Mismatch:
    """Where the graphs first differ, in words."""

    message: str

    def __str__(self) -> str:
        return self.message


def tlc_state(tlc: TlcGraph, fp: int) -> dict[str, Any]:
    """A node's state as TLC printed it, parsed (read again from the dump: rarely needed)."""
    prefix = f"{fp} [label="
    with tlc.path.open() as f:
        for line in f:
            if line.startswith(prefix) and (n := _NODE.match(line)) is not None:
                return parse_state(_unescape(n.group(2)))
    raise ShiftError(f"{tlc.path}: no node {fp}")


def _edge_lines(kind: str, src: dict[str, Any], edges: Counter,
                target: Callable[[int], dict[str, Any]], limit: int = 4) -> list[str]:
    out = []
    for (action, v), n in sorted(edges.items())[:limit]:
        dst = target(v)
        changed = [line for var in VARIABLES for line in report.diff(var, src[var], dst[var])]
        out.append(f"  {kind}: {action}{f' (x{n})' if n > 1 else ''}, changing:")
        out += [f"      {line}" for line in changed[:12]] or ["      nothing (a View stutter)"]
    return out


def compare(ex: Exploration, tlc: TlcGraph) -> Mismatch | None:
    """None when the explorer's graph and TLC's are equal under the View; else the first
    state (breadth-first) whose outgoing edges differ, with the differing edges."""
    g = ex.graph
    if g.edges is None:
        raise ValueError("compare needs the explorer's edges (keep_edges=True)")
    canon = ViewCanon()
    views = [canon(s) for s in g.states]
    mine_init = {views[v] for v in g.initial}
    tlc_init = {tlc.view[fp] for fp in tlc.initial}
    if mine_init != tlc_init:
        only_m = [v for v in g.initial if views[v] not in tlc_init]
        only_t = [fp for fp in tlc.initial if tlc.view[fp] not in mine_init]
        lines = [f"{ex.design} at bound {ex.bound}: the initial states differ "
                 f"({len(only_m)} only in the model, {len(only_t)} only in TLC)"]
        if only_m:
            lines += ["  model only:"] + [f"      {k} = {report.show(v)}"
                                          for k, v in to_tla(g.states[only_m[0]]).items()]
        if only_t:
            lines += ["  TLC only:"] + [f"      {k} = {report.show(v)}"
                                        for k, v in tlc_state(tlc, only_t[0]).items()]
        return Mismatch("\n".join(lines))
    # Name every state by its explorer id; a TLC node whose View the model never reached
    # gets a negative id, so it shows up as a differing edge where TLC reaches it.
    state_of = {view: u for u, view in enumerate(views)}
    tlc_id = {fp: state_of.get(view, -1 - k) for k, (fp, view) in enumerate(tlc.view.items())}
    view_of_tlc = {tlc_id[fp]: view for fp, view in tlc.view.items()}
    for u in range(len(g.states)):  # g.states is in BFS order: the first is the shallowest
        fp = tlc.by_view.get(views[u])
        if fp is None:  # only reachable through an edge already compared; kept for safety
            return Mismatch(f"state {u} of the model is not in TLC's graph")
        mine = Counter((g.labels[lid][1], v) for v, lid in g.edges[u])
        theirs = Counter((a, tlc_id[t]) for t, a in tlc.out.get(fp, []))
        if mine != theirs:
            src = to_tla(g.states[u])
            lines = [f"{ex.design} at bound {ex.bound}: the successors of a state differ",
                     f"  state reached by: {', '.join(map(str, g.events_to(u)))}"]
            lines += [f"      {k} = {report.show(v)}" for k, v in src.items()]
            lines += _edge_lines("model only", src, mine - theirs,
                                 lambda v: to_tla(g.states[v]))
            lines += _edge_lines("TLC only", src, theirs - mine,
                                 lambda v: tlc_state(tlc, tlc.by_view[view_of_tlc[v]]))
            return Mismatch("\n".join(lines))
    if len(g.states) != len(tlc.view) or g.generated - len(g.initial) != tlc.edges:
        return Mismatch(f"counts differ: model {len(g.states)} states, "
                        f"{g.generated - len(g.initial)} edges; TLC {len(tlc.view)} states, "
                        f"{tlc.edges} edges")
    return None
