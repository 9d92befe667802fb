"""`shift check`: model-check the designs with TLC and print the trilemma table."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

from shift import report
from shift.chart import Chart, build, render_svg, render_text
from shift.errors import ShiftError, UsageError
from shift.html_report import write_report
from shift.model.properties import INVARIANTS, TEMPORAL
from shift.spec.catalog import Bound, Catalog, Design, load_catalog, not_covered
from shift.spec.workloads import read_workloads
from shift.tlaplus.values import TlaSet, TlaValueError, parse_value
from shift.tlc import explorer, processes
from shift.tlc.check import CellVerdict, check_design
from shift.tlc.distributed import DistConfig
from shift.tlc.java import find_jar, find_java

ENGINES = ("auto", "tlc", "explorer", "all")


def tlc_can_run() -> str:
    """Why TLC cannot run here, or "" when it can. A SHIFT_JAVA that is set asks for TLC,
    so a broken one is an error rather than a silent fallback."""
    if os.environ.get("SHIFT_JAVA") is not None:
        return ""
    try:
        find_java()
        find_jar()
    except ShiftError as e:
        return str(e)
    return ""


def model_cannot(catalog: Catalog, design: Design) -> str:
    """Why the explorer cannot decide a design's cells, or "": the model does not cover
    the design, or has no predicate for one of its properties."""
    if not design.model:
        return not_covered(design.name)
    missing = [p for p in catalog.properties_of(design)
               if p not in INVARIANTS and p not in TEMPORAL]
    if missing:
        return (f"the Python model has no predicate for property {missing[0]} (add it to "
                "INVARIANTS in model/properties.py, beside Properties.tla's operator); "
                "TLC checks it with --engine tlc")
    return ""


def choose_engines(catalog: Catalog, designs: list[Design], bound: Bound, asked: str,
                   say: Callable[[str], None]) -> dict[str, str]:
    """The engine of each design: the one asked for, or with `auto` the explorer where
    the bound declares it (designs.toml: engine) and the explorer can decide the design
    on the packaged TLA+ modules, TLC elsewhere (the explorer when TLC cannot run)."""
    if asked != "auto":
        if asked != "tlc":
            for d in designs:
                why = model_cannot(catalog, d)
                if why:
                    raise UsageError(f"--engine {asked}: {d.name}: {why}" if d.model
                                     else f"{why} (--engine {asked})")
        return {d.name: asked for d in designs}
    no_tlc = tlc_can_run()
    packaged = catalog.is_packaged()
    out = {}
    for d in designs:
        cannot = model_cannot(catalog, d)
        if not cannot and (no_tlc or (bound.engine == "explorer" and packaged)):
            out[d.name] = "explorer"
        elif no_tlc:
            raise UsageError(f"{d.name}: {cannot}; and TLC cannot run: {no_tlc}")
        else:
            out[d.name] = "tlc"
    explored = [n for n, e in out.items() if e == "explorer"]
    if no_tlc:
        say(f"TLC cannot run ({no_tlc}); engine explorer")
    elif explored:
        why = f"bound {bound.name} declares it, on the packaged TLA+ modules"
        rest = [n for n, e in out.items() if e == "tlc"]
        say(f"engine explorer for {', '.join(explored)} ({why})"
            + (f"; TLC for {', '.join(rest)}" if rest else ""))
    elif bound.engine == "explorer" and not packaged:
        say(f"engine tlc: the TLA+ modules of {catalog.spec_dir} differ from the packaged "
            "ones the explorer follows")
    return out


def chart_of(v: CellVerdict) -> Chart:
    """The message sequence chart of a counterexample (the violating step marked)."""
    assert v.trace is not None
    states = [s.state for s in v.trace.steps]
    final = v.trace.loop is None and not v.trace.stutters
    return build(states, {len(states) - 1: [v.property]} if final else {})


def write_chart(v: CellVerdict) -> Path:
    """The chart as SVG beside the counterexample's ITF file (X.itf.json -> X.svg)."""
    assert v.counterexample is not None
    name = v.counterexample.name.removesuffix(".json").removesuffix(".itf")
    path = v.counterexample.with_name(name + ".svg")
    path.write_text(render_svg(chart_of(v), f"{v.design} violates {v.property}"))
    return path


def named_workloads_exist(catalog: Catalog, bound: Bound) -> None:
    """Before TLC meets it as `a CASE with no conditions true`: a workload the bound names
    that Program(k) has no arm for, in one line. What else the model could not read is for
    TLC to judge, and the explorer's check (`explorer.model_of`)."""
    try:
        named = parse_value(bound.constants.get("Workloads", ""))
        workloads = read_workloads(catalog.spec_dir)
    except (ShiftError, TlaValueError):
        return
    for k in named.members if isinstance(named, TlaSet) else ():
        if isinstance(k, int):
            workloads.program(k, bound.name)


def explorer_pool(jobs: int) -> Executor:
    """Where the explorer's designs run: a thread beside TLC, or processes of their own
    (spawned: a fork of a process with threads is unsafe)."""
    if jobs <= 1:
        return ThreadPoolExecutor(max_workers=1)
    return ProcessPoolExecutor(max_workers=jobs,
                               mp_context=multiprocessing.get_context("spawn"))


def print_progress(line: str) -> None:
    print(f"[check] {line}", file=sys.stderr, flush=True)


def explore_design(catalog: Catalog, d: Design, bound: Bound, out: Path,
                   quiet: bool) -> tuple[list[CellVerdict], float]:
    """One design's verdicts from the explorer, and its wall time (in a worker process:
    its arguments and results are pickled, its progress goes straight to stderr)."""
    t0 = time.monotonic()
    cells = explorer.check_design(catalog, d, bound, out, None if quiet else print_progress)
    return cells, time.monotonic() - t0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("check", help="model-check designs and print the trilemma table",
                       description=__doc__)
    p.add_argument("--design", action="append", metavar="NAME",
                   help="check only this design (repeatable; default: all)")
    p.add_argument("--bound", default="small", help="small (CI), default or large")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the verdicts as JSON")
    p.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML")
    p.add_argument("--out", type=Path, default=Path("shift-out"), metavar="DIR",
                   help="where counterexamples are saved as ITF JSON, each with its message "
                        "sequence chart beside it (.svg) (default: shift-out)")
    p.add_argument("--report", type=Path, metavar="DIR",
                   help="write an HTML report of the run: the table, each counterexample "
                        "with its chart and narration (DIR/index.html)")
    p.add_argument("--spec-dir", type=Path, metavar="DIR",
                   help="check this copy of the specification instead of the packaged one")
    p.add_argument("--jobs", type=int, default=2,
                   help="designs checked at once: TLC processes, or explorer processes when "
                        "no design runs on TLC (default 2)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="TLC workers per process (default: the cores shared among the "
                        "processes); 1 makes each counterexample a shortest one")
    p.add_argument("--heap", type=int, default=2048, metavar="MB",
                   help="Java heap of each TLC process (default 2048)")
    p.add_argument("--property", action="append", metavar="NAME",
                   help="check only this property (repeatable; default: all)")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="tlc, explorer (the Python model, no Java), all (both; any "
                        "disagreement is an error) or auto (default): the explorer where "
                        "the bound declares it faster and the spec is the packaged one, "
                        "else TLC")
    p.add_argument("--distributed", action="store_true",
                   help="run TLC in its distributed mode: a TLCServer and TLCWorker processes "
                        "(invariants only: temporal properties are not checked)")
    p.add_argument("--dist-workers", type=int, metavar="N",
                   help="local TLCWorker processes of each server (default 2); 0 waits for "
                        "workers started on other machines with the printed command")
    p.add_argument("--dist-host", metavar="HOST",
                   help="the server's address as workers reach it (default 127.0.0.1)")
    p.add_argument("--dist-timeout", type=float, metavar="S",
                   help="stop a distributed TLC run and its workers after S seconds")
    p.add_argument("--quiet", action="store_true", help="print no counterexamples or progress")
    p.add_argument("--verbose", action="store_true",
                   help="print every state change of expected counterexamples too")
    p.set_defaults(run=run)


def dist_config(args: argparse.Namespace) -> DistConfig | None:
    """The distributed run asked for, or None; a bad combination is a UsageError."""
    given = [flag for flag, value in (("--dist-workers", args.dist_workers),
                                      ("--dist-host", args.dist_host),
                                      ("--dist-timeout", args.dist_timeout)) if value is not None]
    if not args.distributed:
        if given:
            raise UsageError(f"{given[0]} needs --distributed")
        return None
    if args.engine not in ("auto", "tlc"):
        raise UsageError(f"--distributed runs TLC: it cannot be combined with "
                         f"--engine {args.engine}")
    workers = 2 if args.dist_workers is None else args.dist_workers
    if workers < 0:
        raise UsageError(f"--dist-workers {workers}: must be 0 or more")
    if args.dist_timeout is not None and args.dist_timeout <= 0:
        raise UsageError(f"--dist-timeout {args.dist_timeout:g}: must be positive")
    args.engine = "tlc"
    return DistConfig(workers, args.dist_host or "127.0.0.1", args.workers or 1,
                      args.dist_timeout)


def run(args: argparse.Namespace) -> int:
    dist = dist_config(args)
    processes.reset()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(args, dist)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM: stop every TLC process as Ctrl-C does


def _run(args: argparse.Namespace, dist: DistConfig | None) -> int:
    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: must be at least 1")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}: must be at least 1")
    started, clock = time.time(), time.monotonic()
    catalog = load_catalog(args.spec_dir.resolve() if args.spec_dir else None)
    if args.property:
        catalog = catalog.only(args.property)
    bound = catalog.bound(args.bound)
    designs = [catalog.design(name).at(bound.name) for name in (args.design or catalog.designs)]
    designs = [d for d in designs if catalog.properties_of(d)]
    if not designs:
        raise UsageError(f"--property {', '.join(args.property)}: no design named has it")
    lock = threading.Lock()

    def progress(line: str) -> None:
        if not args.quiet:
            with lock:
                print_progress(line)

    summary = bound.summary if not all(d.own_properties for d in designs) else \
        "each design's own constants: designs.toml"
    progress(f"{len(designs)} design(s) at bound {bound.name} ({summary})")
    engines = choose_engines(catalog, designs, bound, args.engine, progress)
    on_tlc = [d for d in designs if engines[d.name] in ("tlc", "all")]
    on_model = [d for d in designs if engines[d.name] in ("explorer", "all")]
    workers = args.workers or max(1, (os.cpu_count() or 1) // max(1, min(args.jobs,
                                                                          len(on_tlc))))
    if on_tlc and dist is not None:
        progress(f"TLC distributed for {', '.join(d.name for d in on_tlc)}: {args.jobs} at a "
                 f"time, each a TLCServer and "
                 + (f"{dist.workers} local TLCWorker process(es) of {dist.threads} thread(s)"
                    if dist.workers else "the workers that join it"))
    elif on_tlc:
        progress(f"engine {args.engine if args.engine != 'auto' else 'tlc'} for "
                 f"{', '.join(d.name for d in on_tlc)}: {args.jobs} TLC at a time, "
                 f"{workers} workers each")
    named_workloads_exist(catalog, bound)
    for d in designs:  # a design with constants of its own must have them at this bound
        catalog.constants_of(d, bound)
    for d in on_model:  # what the model cannot read is an error before TLC starts
        explorer.model_of(catalog, d, bound)
    walls: dict[str, float] = {}

    def timed(fn: Callable[..., list[CellVerdict]], d: Design, *rest: object,
              ) -> list[CellVerdict]:
        t0 = time.monotonic()
        out = fn(catalog, d, bound, args.out, *rest)
        walls[d.name] = walls.get(d.name, 0.0) + time.monotonic() - t0
        return out
    # The explorer runs in a thread of its own beside the TLC processes; alone, in up to
    # --jobs processes of its own (one design each: an exploration is single-threaded).
    explorer_jobs = 1 if on_tlc else min(args.jobs, len(on_model))
    with ThreadPoolExecutor(max_workers=args.jobs) as pool, \
            explorer_pool(explorer_jobs) as mine:
        futures = [pool.submit(timed, check_design, d, workers, args.heap, progress, dist)
                   for d in on_tlc]
        explored = [mine.submit(explore_design, catalog, d, bound, args.out, args.quiet)
                    for d in on_model]
        try:
            tlc: list[CellVerdict] = [v for f in futures for v in f.result()]
        except KeyboardInterrupt:
            processes.stop_all()  # the runs in the pool's threads end with their processes
            raise
        model: list[CellVerdict] = []
        for d, f in zip(on_model, explored, strict=True):
            cells, wall = f.result()
            walls[d.name] = walls.get(d.name, 0.0) + wall
            model += cells
    verdicts = explorer.merge(tlc, model)
    verdicts.sort(key=lambda v: [d.name for d in designs].index(v.design))
    for v in verdicts:
        if v.verdict == "violated" and v.trace is not None and v.counterexample is not None \
                and not catalog.design(v.design).own_properties:
            write_chart(v)
    if not args.quiet:
        for v in verdicts:
            if v.verdict == "violated":
                detail = args.verbose or not v.matches
                print("\n".join(report.counterexample(catalog, v, detail, bound.name)))
                if detail and v.trace is not None and not catalog.design(v.design).own_properties:
                    print("\n".join(render_text(chart_of(v))))
                print()
    trilemma = any(not d.own_properties for d in designs)
    print(f"{'Trilemma table' if trilemma else 'Verdicts'}, bound {bound.name}:")
    print(report.table(catalog, verdicts))
    for v in verdicts:
        if v.verdict == "error":
            print(f"error: {v.design} {v.property}: {v.message}")
    mismatches = [v for v in verdicts if v.checked and not v.matches]
    unchecked = [v for v in verdicts if not v.checked]
    checked = len(verdicts) - len(unchecked)
    print(f"\n{checked - len(mismatches)} of {checked} verdicts as declared"
          + (f"; {len(mismatches)} not" if mismatches else "")
          + (f"; {len(unchecked)} not checked ({unchecked[0].message.split(': ', 1)[1]})"
             if unchecked else ""))
    run = report.RunInfo(catalog, bound, designs, started, time.monotonic() - clock, walls)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report.as_json(verdicts, run), indent=1) + "\n")
    if args.junit:
        report.write_junit(args.junit, verdicts, run)
    if args.report:
        page = write_report(args.report, catalog, verdicts, run)
        progress(f"report: {page}")
    return 1 if mismatches else 0
