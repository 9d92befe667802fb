"""What `shift check` prints and writes: the trilemma table, counterexamples, JSON, JUnit."""

from __future__ import annotations

import json
import platform
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from shift.errors import ShiftError
from shift.narrate import tell
from shift.spec.catalog import HOLDS, VIOLATED, Bound, Catalog, Design
from shift.tlaplus.values import ModelValue, TlaFunction, TlaSet
from shift.tlc.check import CellVerdict
from shift.tlc.output import Trace


def cell(v: CellVerdict) -> str:
    if v.verdict == "error" or not v.checked:
        return v.verdict
    if v.verdict == v.expected:
        return "holds" if v.verdict == HOLDS else "violated (expected)"
    return "VIOLATED" if v.verdict != HOLDS else "HOLDS (expected violated)"


def design_seconds(verdicts: list[CellVerdict]) -> float:
    """TLC's time for a design: each run counted once, however many cells it decided."""
    return sum({v.run: v.seconds for v in verdicts}.values())


def table(catalog: Catalog, verdicts: list[CellVerdict]) -> str:
    """The verdicts, one row per design; designs with a property list of their own get a
    table of their own below, one per list."""
    designs = list(dict.fromkeys(v.design for v in verdicts))
    groups: dict[tuple[str, ...], list[str]] = {}
    for d in designs:
        groups.setdefault(tuple(catalog.properties_of(catalog.design(d))), []).append(d)
    return "\n\n".join(_table(list(props), ds, verdicts) for props, ds in groups.items())


def _table(properties: list[str], designs: list[str], verdicts: list[CellVerdict]) -> str:
    by = {(v.design, v.property): v for v in verdicts}
    head = ["design", *properties, "states", "seconds"]
    rows = []
    for d in designs:
        mine = [by[(d, p)] for p in properties]
        rows.append([d, *(cell(v) for v in mine), f"{max(v.states for v in mine):,}",
                     f"{design_seconds(mine):.1f}"])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, rows)])


def show(value: Any) -> str:
    """A value in TLA+ notation, as a designer reads it."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "<<" + ", ".join(map(show, value)) + ">>"
    if isinstance(value, dict):
        return "[" + ", ".join(f"{k} |-> {show(v)}" for k, v in value.items()) + "]"
    if isinstance(value, TlaSet):
        return "{" + ", ".join(map(show, value.members)) + "}"
    if isinstance(value, TlaFunction):
        return "(" + " @@ ".join(f"{show(k)} :> {show(v)}" for k, v in value.pairs) + ")"
    if isinstance(value, ModelValue):
        return value.name
    return str(value)


def diff(path: str, old: Any, new: Any) -> list[str]:
    """The changed leaves between two values, as `path: old -> new` lines."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict) and old.keys() == new.keys():
        return [line for k in old for line in diff(f"{path}.{k}", old[k], new[k])]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new) and old:
        return [line for i in range(len(old)) for line in diff(f"{path}[{i + 1}]", old[i], new[i])]
    return [f"{path}: {show(old)} -> {show(new)}"]


def event_text(state: dict[str, Any], fallback: str) -> str:
    ev = state.get("event")
    if isinstance(ev, list) and ev and isinstance(ev[0], str):
        return f"{ev[0]}({', '.join(show(a) for a in ev[1:])})" if len(ev) > 1 else ev[0]
    return fallback


def render_trace(catalog: Catalog, trace: Trace, limit: int = 160, detail: bool = True,
                 prop: str | None = None, narrated: bool = True) -> list[str]:
    """Numbered steps. Narrated (the trilemma designs, `shift.narrate`): each step in RDMA
    terms, and on the violating step why prop broke; with detail also the variable-level
    changes. Otherwise (designs with a state of their own): the event, what each
    application saw (designs.toml's observations), then (with detail) what else changed."""
    if narrated:
        states = [step.state for step in trace.steps]
        last = len(states) - 1
        breaks = {last: [prop]} if prop and trace.loop is None and not trace.stutters else {}

        def raw(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
            return [clip(line, limit) for var in b if var != "event"
                    for line in diff(var, a.get(var), b[var])]
        out = tell(states, breaks, raw if detail else None)
    else:
        out = _render_raw(catalog, trace, limit, detail)
    if trace.loop is not None:
        out.append(f"      ... and back to step {trace.loop + 1}, forever"
                   + (f": {prop} violated, the workload never finishes" if prop else ""))
    elif trace.stutters:
        out.append("      ... and nothing more happens, forever"
                   + (f": {prop} violated, the workload never finishes" if prop else ""))
    return out


def clip(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _render_raw(catalog: Catalog, trace: Trace, limit: int, detail: bool) -> list[str]:
    out: list[str] = []
    prev: dict[str, Any] | None = None
    for step in trace.steps:
        st = step.state
        n = step.index + 1
        if prev is None:
            first = "Init" if step.action == "Initial predicate" else step.action
            out.append(f"  {n:>2}. {event_text(st, first)}")
            if "program" in st:
                out.append(f"      program = {show(st['program'])}")
        else:
            out.append(f"  {n:>2}. {event_text(st, step.action)}")
            for var, caption in catalog.observations.items():
                old, new = prev.get(var), st.get(var)
                if isinstance(old, list) and isinstance(new, list) and new[:len(old)] == old:
                    out += [f"      {caption}: {show(e)}" for e in new[len(old):]]
                elif old != new:
                    out.append(f"      {caption}: {show(old)} -> {show(new)}")
            last = step is trace.steps[-1]  # the step that breaks the property: always shown
            for var in st if detail or last else ():
                if var in catalog.observations or var == "event":
                    continue
                out += ["      " + clip(line, limit) for line in diff(var, prev.get(var), st[var])]
        prev = st
    return out


def counterexample(catalog: Catalog, v: CellVerdict, detail: bool, bound: str = "") -> list[str]:
    kind = "as expected" if v.matches else "UNEXPECTED"
    why = catalog.design(v.design).at(bound).violates.get(v.property, "")
    head = [f"{v.design} violates {v.property} ({kind}{': ' + why if why else ''})"]
    if v.counterexample is not None:
        head.append(f"  trace: {v.counterexample}")
    if v.message:
        head.append(f"  note: {v.message}")
    narrated = not catalog.design(v.design).own_properties
    return head + (render_trace(catalog, v.trace, detail=detail, prop=v.property,
                                narrated=narrated) if v.trace else [])


@dataclass(frozen=True)
class RunInfo:
    """What a CI log needs beside the verdicts: which spec, bound and tools, when, how
    long (wall time: runs of different designs overlap)."""

    catalog: Catalog
    bound: Bound
    designs: list[Design]
    started: float  # time.time() at the start
    wall_seconds: float  # of the whole `shift check`
    design_walls: dict[str, float]  # design -> wall time of its checks

    def reason(self, v: CellVerdict) -> str:
        """Why the design is declared to violate the property ("" when declared to hold)."""
        d = next(d for d in self.designs if d.name == v.design)
        return d.violates.get(v.property, "")


def _tlc_version() -> str | None:
    from shift.tlc.java import find_jar
    try:
        with zipfile.ZipFile(find_jar()) as jar:
            manifest = jar.read("META-INF/MANIFEST.MF").decode()
    except (ShiftError, OSError, KeyError, zipfile.BadZipFile):
        return None
    fields = dict(line.split(": ", 1) for line in manifest.splitlines() if ": " in line)
    version = fields.get("Implementation-Version")
    rev = fields.get("X-Git-ShortRevision")
    return f"{version} ({rev})" if version and rev else version


def _java_version() -> str | None:
    from shift.tlc.java import find_java
    try:
        proc = subprocess.run([find_java(), "-version"], capture_output=True, text=True,
                              timeout=60)
    except (ShiftError, OSError, subprocess.SubprocessError):
        return None
    said = (proc.stderr or proc.stdout).strip().splitlines()
    return said[0] if said else None


def _z3_version() -> str | None:
    try:
        import z3
    except ImportError:
        return None
    return str(z3.get_version_string())


def versions() -> dict[str, str | None]:
    """The versions of shift and of what decided the verdicts (None: not found)."""
    return {"shift": metadata.version("shift-rdma"), "python": platform.python_version(),
            "tlc": _tlc_version(), "java": _java_version(), "z3": _z3_version()}


def as_json(verdicts: list[CellVerdict], run: RunInfo) -> dict[str, Any]:
    return {
        "bound": run.bound.name, "constants": run.bound.constants,
        "spec_dir": str(run.catalog.spec_dir), "spec_sha256": run.catalog.spec_hash(),
        "started": datetime.fromtimestamp(run.started, UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(run.wall_seconds, 3), "versions": versions(),
        "results": [
            {"design": v.design, "property": v.property, "engine": v.engine,
             "verdict": v.verdict, "expected": v.expected,
             **({"reason": run.reason(v)} if v.expected == VIOLATED else {}),
             "states": v.states, "run": v.run, "run_seconds": round(v.seconds, 3),
             "counterexample": str(v.counterexample) if v.counterexample else None,
             **({"message": v.message} if v.message else {})}
            for v in verdicts]}


def shares(verdicts: list[CellVerdict]) -> dict[tuple[str, str], float]:
    """Each cell's share of its run's time: a run that decided several cells is counted
    once among them, so that testcase times add up to the runs' times."""
    runs: dict[tuple[str, int], list[CellVerdict]] = {}
    for v in verdicts:
        runs.setdefault((v.design, v.run), []).append(v)
    return {(v.design, v.property): v.seconds / len(cells)
            for cells in runs.values() for v in cells}


def _testcase(suite: ET.Element, v: CellVerdict, run: RunInfo, seconds: float) -> None:
    bound = run.bound.name
    case = ET.SubElement(suite, "testcase", classname=f"shift.{bound}.{v.design}",
                         name=f"{v.property} [{bound}]", time=f"{seconds:.3f}")
    if v.verdict == "error":
        ET.SubElement(case, "error", message=v.message or "TLC error")
    elif not v.checked:
        ET.SubElement(case, "skipped", message=v.message)
    elif not v.matches:
        failure = ET.SubElement(case, "failure", message=f"{v.verdict}, expected {v.expected}")
        failure.text = str(v.counterexample or "")
    elif v.verdict == VIOLATED:
        out = ET.SubElement(case, "system-out")
        out.text = (f"violated, as declared: {run.reason(v)}\n"
                    f"counterexample: {v.counterexample or '(none written)'}")


def write_junit(path: Path, verdicts: list[CellVerdict], run: RunInfo) -> None:
    suites = ET.Element("testsuites", name=f"shift check --bound {run.bound.name}",
                        time=f"{run.wall_seconds:.3f}")
    share = shares(verdicts)
    for design in dict.fromkeys(v.design for v in verdicts):
        mine = [v for v in verdicts if v.design == design]
        suite = ET.SubElement(
            suites, "testsuite", name=f"{design} [{run.bound.name}]", tests=str(len(mine)),
            failures=str(sum(v.verdict != "error" and v.checked and not v.matches
                             for v in mine)),
            errors=str(sum(v.verdict == "error" for v in mine)),
            skipped=str(sum(not v.checked for v in mine)),
            time=f"{run.design_walls.get(design, design_seconds(mine)):.3f}")
        for v in mine:
            _testcase(suite, v, run, share[(v.design, v.property)])
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
