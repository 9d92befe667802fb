"""A verdict per (design, property): as few TLC runs as the violations allow.

One run checks every invariant; when TLC reports a violation of X, X is recorded with its
trace and the run is repeated without X. TLC does not say which temporal property failed,
so each temporal property gets a run of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from shift.spec.catalog import HOLDS, VIOLATED, Bound, Catalog, Design
from shift.tlc import processes
from shift.tlc.distributed import LIVENESS, DistConfig, run_distributed
from shift.tlc.itf import write_itf
from shift.tlc.output import Trace
from shift.tlc.runner import (
    ERROR,
    INVARIANT,
    OK,
    TEMPORAL,
    Progress,
    RunConfig,
    RunResult,
    run_tlc,
)

ERROR_VERDICT = "error"
NOT_CHECKED = "not checked"  # an engine that cannot check the property (distributed TLC)


@dataclass
class CellVerdict:
    """One cell of the trilemma table: a design's verdict on a property, against the
    declared one, with how it was reached (either engine: TLC or the explorer)."""

    design: str
    property: str
    verdict: str  # holds | violated | error | not checked
    expected: str  # holds | violated
    states: int
    seconds: float
    counterexample: Path | None = None
    trace: Trace | None = None
    message: str = ""
    engine: str = "tlc"
    run: int = 0  # which TLC run of its design decided it: cells of one run share its time

    @property
    def matches(self) -> bool:
        return self.verdict == self.expected

    @property
    def checked(self) -> bool:
        """False for a cell the engine could not decide by design (not an error)."""
        return self.verdict != NOT_CHECKED


Report = Callable[[str], None]  # one line about a finished run


def _verdict(design: Design, prop: str, verdict: str, run: RunResult, out_dir: Path,
             bound: Bound, run_no: int) -> CellVerdict:
    cex = None
    if verdict == VIOLATED and run.trace is not None:
        cex = write_itf(out_dir / f"{design.name}-{prop}.itf.json", run.trace, design.module,
                        f"{design.name} violates {prop} at bound {bound.name}")
    return CellVerdict(design.name, prop, verdict, design.expected(prop), run.distinct,
                   run.seconds, cex, run.trace, run.message, run=run_no)


def _run(cfg: RunConfig, invariants: list[str], temporal: list[str], progress: Progress,
         report: Report, name: str, dist: DistConfig | None = None) -> RunResult:
    """One TLC run, repeated once if TLC itself failed (an exception of its own, not a
    violation, a spec error or a signal): a transient failure should not decide a cell,
    and one that repeats is reported as the error it is. With `dist`, in TLC's
    distributed mode (invariants only)."""
    def once() -> RunResult:
        if dist is None:
            return run_tlc(cfg, invariants, temporal, progress)
        return run_distributed(cfg, dist, invariants, progress, lambda s: report(f"{name}: {s}"))
    run = once()
    if run.outcome == ERROR and run.crashed:
        if processes.cancelled():
            raise KeyboardInterrupt  # stopped by Ctrl-C or SIGTERM, not a failure of TLC's
        report(f"{name}: TLC failed ({run.message}); running it once more")
        run = once()
    return run


def not_checked(design: Design, props: list[str], report: Report) -> list[CellVerdict]:
    """The temporal cells of a distributed run: TLC's distributed mode has no liveness
    checker, so they are reported as not checked rather than as holding."""
    if props:
        report(f"{design.name}: {', '.join(props)} {LIVENESS}")
    return [CellVerdict(design.name, p, NOT_CHECKED, design.expected(p), 0, 0.0,
                        message=LIVENESS, engine="tlc-distributed", run=0) for p in props]


def counted(n: int, verdict: str) -> str:
    """"1 property holds", "5 properties hold", "2 properties error"."""
    if verdict == HOLDS:
        return "1 property holds" if n == 1 else f"{n} properties hold"
    return f"{n} {'property' if n == 1 else 'properties'} {verdict}"


def check_design(catalog: Catalog, design: Design, bound: Bound, out_dir: Path,
                 workers: int, heap_mb: int, report: Report,
                 dist: DistConfig | None = None) -> list[CellVerdict]:
    cfg = RunConfig(catalog.spec_dir, design.module, catalog.constants_of(design, bound), workers,
                    heap_mb)
    invariants, temporal = catalog.invariants_of(design), catalog.temporal_of(design)
    runs = 0  # the TLC runs so far: progress lines say which one they belong to

    def progress(distinct: int, queue: int) -> None:
        report(f"{design.name}, TLC run {runs}: {distinct:,} distinct states so far, "
               f"{queue:,} on the queue")
    verdicts: dict[str, CellVerdict] = {}
    remaining = list(invariants)
    while remaining:
        runs += 1
        run = _run(cfg, remaining, [], progress, report, design.name, dist)
        if run.outcome == INVARIANT and run.violated in remaining:
            verdicts[run.violated] = _verdict(design, run.violated, VIOLATED, run, out_dir, bound,
                                              runs)
            remaining.remove(run.violated)
            report(f"{design.name}, TLC run {runs}: {run.violated} violated after "
                   f"{run.distinct:,} states ({run.seconds:.1f} s)")
            continue
        verdict = HOLDS if run.outcome == OK else ERROR_VERDICT
        if run.outcome != OK and not run.message:
            run.message = f"unexpected TLC outcome {run.outcome}"
        # A run that died decides nothing: the design's other cells are errors too.
        undecided = remaining + (temporal if verdict == ERROR_VERDICT else [])
        for prop in undecided:
            verdicts[prop] = _verdict(design, prop, verdict, run, out_dir, bound, runs)
        report(f"{design.name}, TLC run {runs}: {counted(len(undecided), verdict)} over "
               f"{run.distinct:,} states ({run.seconds:.1f} s)"
               f"{': ' + run.message if run.message else ''}")
        if verdict == ERROR_VERDICT:
            return _engine([verdicts[p] for p in invariants + temporal], dist)
        break
    if dist is not None:
        verdicts.update((v.property, v) for v in not_checked(design, temporal, report))
        return _engine([verdicts[p] for p in invariants + temporal], dist)
    for prop in temporal:
        runs += 1
        run = _run(cfg, [], [prop], progress, report, design.name)
        verdict = {OK: HOLDS, TEMPORAL: VIOLATED}.get(run.outcome, ERROR_VERDICT)
        if run.outcome == INVARIANT:
            run.message = "an invariant failed in a temporal-only run"
        verdicts[prop] = _verdict(design, prop, verdict, run, out_dir, bound, runs)
        report(f"{design.name}, TLC run {runs}: {prop} {verdict} over {run.distinct:,} states "
               f"({run.seconds:.1f} s){': ' + run.message if run.message else ''}")
    return [verdicts[p] for p in invariants + temporal]


def _engine(cells: list[CellVerdict], dist: DistConfig | None) -> list[CellVerdict]:
    """Cells decided by a distributed run say so (JSON's `engine`)."""
    if dist is not None:
        for v in cells:
            v.engine = "tlc-distributed"
    return cells
