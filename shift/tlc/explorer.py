"""The explorer (`shift.model`) as an engine of `shift check`: verdicts in the harness's terms.

One exploration per design decides every invariant (each violated one with its shortest
counterexample) and, on the same graph, Liveness. Counterexamples are written twice: as
ITF JSON with the harness's writer (`DESIGN-PROP.explorer.itf.json`, the same format TLC's
traces get) and as an event trace (`DESIGN-PROP.trace.jsonl`) that `shift replay` runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from shift.model.config import bound_from_constants
from shift.model.config import design as load_design
from shift.model.events import save_trace
from shift.model.explore import Counterexample, explore
from shift.model.liveness import check_liveness
from shift.model.next import Model
from shift.model.properties import INVARIANTS, TEMPORAL
from shift.model.tla import to_tla
from shift.spec.catalog import HOLDS, VIOLATED, Bound, Catalog, Design
from shift.spec.workloads import read_workloads
from shift.tlc.check import CellVerdict
from shift.tlc.itf import write_itf
from shift.tlc.output import Trace, TraceStep

ENGINE = "explorer"
Report = Callable[[str], None]


def to_trace(cx: Counterexample) -> Trace:
    """A counterexample as the TLC harness's Trace (states as TLC prints them)."""
    steps = [TraceStep(k, action, to_tla(s, ev))
             for k, (ev, action, s) in enumerate(zip(cx.events, cx.actions, cx.states,
                                                     strict=True))]
    return Trace(steps, loop=cx.loop, stutters=cx.stutters)


def save_counterexample(cx: Counterexample, out_dir: Path, design: str, bound: str,
                        module: str) -> tuple[Path, Path]:
    """Write the ITF JSON and the JSON Lines event trace of a counterexample."""
    itf = write_itf(out_dir / f"{design}-{cx.property}.explorer.itf.json", to_trace(cx),
                    module, f"{design} violates {cx.property} at bound {bound} (explorer)")
    jsonl = save_trace(out_dir / f"{design}-{cx.property}.trace.jsonl", cx.events)
    return itf, jsonl


def model_of(catalog: Catalog, design: Design, bound: Bound) -> Model:
    """The model of a design at a bound, read from the catalogue's spec folder (its D,
    the bound's constants and the programs of Workloads.tla); SpecError when the model
    cannot run them."""
    return Model(load_design(design.name, catalog),
                 bound_from_constants(bound.name, bound.constants,
                                      read_workloads(catalog.spec_dir)), catalog.spec_dir)


def check_design(catalog: Catalog, design: Design, bound: Bound, out_dir: Path,
                 report: Report | None = None) -> list[CellVerdict]:
    """Every property of the catalog for one design, decided by one exploration."""
    model = model_of(catalog, design, bound)
    live = [p for p in catalog.temporal_of(design) if p in TEMPORAL]
    ex = explore(model, catalog.invariants_of(design), keep_edges=bool(live))
    found = dict(ex.violations)
    seconds = ex.seconds
    for prop in live:
        cx = check_liveness(ex, prop)
        if cx is not None:
            found[prop] = cx
    verdicts = []
    for prop in catalog.properties_of(design):
        cx = found.get(prop)
        path = None
        if cx is not None:
            path, _ = save_counterexample(cx, out_dir, design.name, bound.name, design.module)
        verdicts.append(CellVerdict(design.name, prop, VIOLATED if cx else HOLDS,
                                design.expected(prop), ex.distinct, seconds, path,
                                to_trace(cx) if cx else None, engine=ENGINE, run=1))
    if report is not None:
        bad = [p for p in catalog.properties_of(design) if p in found]
        report(f"{design.name}: explorer, {ex.distinct:,} distinct states in {seconds:.1f} s; "
               f"violated: {', '.join(bad) or 'none'}")
    return verdicts


def merge(tlc: list[CellVerdict], explorer: list[CellVerdict]) -> list[CellVerdict]:
    """One verdict per cell. A cell both engines decided: TLC's when they agree, an error
    naming both answers when they do not (a disagreement means the model or the spec is
    wrong). A cell one engine decided: that engine's."""
    mine = {(v.design, v.property): v for v in explorer}
    theirs = {(v.design, v.property) for v in tlc}
    out = [v for v in explorer if (v.design, v.property) not in theirs]
    for v in tlc:
        e = mine.get((v.design, v.property))
        why = None if e is None else disagreement(v, e)
        if why is None:
            if e is not None:
                v.engine = "tlc+explorer"
            out.append(v)
            continue
        out.append(CellVerdict(v.design, v.property, "error", v.expected, v.states, v.seconds,
                           v.counterexample or e.counterexample, v.trace or e.trace,
                           f"engines disagree: {why}", engine="tlc+explorer", run=v.run))
    return out


def disagreement(tlc: CellVerdict, explorer: CellVerdict) -> str | None:
    """What the two engines disagree on in one cell, or None. Besides the verdict: an
    invariant both find holding was checked on the whole state graph by both, so the
    number of distinct states must be equal too (TLC counts under the spec's VIEW, as the
    explorer does); a change of the model or the spec that moves no verdict still moves
    the graph."""
    if tlc.verdict != explorer.verdict:
        return f"TLC says {tlc.verdict}, the explorer says {explorer.verdict}"
    if (tlc.verdict == HOLDS and tlc.property in INVARIANTS and tlc.states
            and tlc.states != explorer.states):
        return (f"both say holds, but TLC explored {tlc.states:,} distinct states and the "
                f"explorer {explorer.states:,} (the state graphs differ: "
                "tests/model/test_conformance.py shows where)")
    return None
