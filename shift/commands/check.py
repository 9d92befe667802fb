"""`shift check`: model-check the designs with TLC and print the trilemma table."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from shift import report
from shift.errors import ShiftError, UsageError
from shift.spec.catalog import Bound, Catalog, load_catalog, not_covered
from shift.spec.workloads import read_workloads
from shift.tlaplus.values import TlaSet, TlaValueError, parse_value
from shift.tlc import explorer
from shift.tlc.check import CellVerdict, check_design
from shift.tlc.java import find_jar, find_java

ENGINES = ("tlc", "explorer", "all")


def default_engine() -> tuple[str, str]:
    """TLC where it can run; else the explorer, which needs no Java. A SHIFT_JAVA that is
    set asks for TLC, so a broken one is an error rather than a silent fallback."""
    if os.environ.get("SHIFT_JAVA") is not None:
        return "tlc", ""
    try:
        find_java()
        find_jar()
    except ShiftError as e:
        return "explorer", f"TLC cannot run ({e}); using the explorer"
    return "tlc", ""


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


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("check", help="model-check designs and print the trilemma table",
                       description=__doc__)
    p.add_argument("--design", action="append", metavar="NAME",
                   help="check only this design (repeatable; default: all)")
    p.add_argument("--bound", default="small", help="small (CI), default or large")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the verdicts as JSON")
    p.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML")
    p.add_argument("--out", type=Path, default=Path("shift-out"), metavar="DIR",
                   help="where counterexamples are saved as ITF JSON (default: shift-out)")
    p.add_argument("--spec-dir", type=Path, metavar="DIR",
                   help="check this copy of the specification instead of the packaged one")
    p.add_argument("--jobs", type=int, default=2, help="TLC processes at once (default 2)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="TLC workers per process (default: the cores shared among the "
                        "processes); 1 makes each counterexample a shortest one")
    p.add_argument("--heap", type=int, default=2048, metavar="MB",
                   help="Java heap of each TLC process (default 2048)")
    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="tlc, explorer (the Python model, no Java) or all (both; any "
                        "disagreement is an error); default: tlc where Java is available")
    p.add_argument("--quiet", action="store_true", help="print no counterexamples or progress")
    p.add_argument("--verbose", action="store_true",
                   help="print every state change of expected counterexamples too")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: must be at least 1")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}: must be at least 1")
    catalog = load_catalog(args.spec_dir.resolve() if args.spec_dir else None)
    bound = catalog.bound(args.bound)
    designs = [catalog.design(name).at(bound.name) for name in (args.design or catalog.designs)]
    workers = args.workers or max(1, (os.cpu_count() or 1) // min(args.jobs, len(designs)))
    lock = threading.Lock()

    def progress(line: str) -> None:
        if not args.quiet:
            with lock:
                print(f"[check] {line}", file=sys.stderr, flush=True)

    engine, why = (args.engine, "") if args.engine else default_engine()
    if why:
        progress(why)
    summary = bound.summary if not all(d.own_properties for d in designs) else \
        "each design's own constants: designs.toml"
    progress(f"{len(designs)} design(s) at bound {bound.name} ({summary}); engine "
             f"{engine}" + (f"; {args.jobs} TLC at a time, {workers} workers each"
                            if engine != "explorer" else ""))
    named_workloads_exist(catalog, bound)
    for d in designs:  # a design with constants of its own must have them at this bound
        catalog.constants_of(d, bound)
    if engine != "tlc":  # what the model cannot read is an error before TLC starts
        for d in designs:
            if not d.model:
                raise UsageError(not_covered(d.name) + f" (--engine {engine})")
            explorer.model_of(catalog, d, bound)
    # The explorer runs in a thread of its own, beside the TLC processes.
    with ThreadPoolExecutor(max_workers=args.jobs) as pool, \
            ThreadPoolExecutor(max_workers=1) as mine:
        futures = [pool.submit(check_design, catalog, d, bound, args.out, workers, args.heap,
                               progress) for d in designs] if engine != "explorer" else []
        explored = [mine.submit(explorer.check_design, catalog, d, bound, args.out, progress)
                    for d in designs] if engine != "tlc" else []
        tlc: list[CellVerdict] = [v for f in futures for v in f.result()]
        model: list[CellVerdict] = [v for f in explored for v in f.result()]
    verdicts = explorer.merge(tlc, model) if engine == "all" else tlc or model
    if not args.quiet:
        for v in verdicts:
            if v.verdict == "violated":
                detail = args.verbose or not v.matches
                print("\n".join(report.counterexample(catalog, v, detail, bound.name)) + "\n")
    trilemma = any(not d.own_properties for d in designs)
    print(f"{'Trilemma table' if trilemma else 'Verdicts'}, bound {bound.name}:")
    print(report.table(catalog, verdicts))
    for v in verdicts:
        if v.verdict == "error":
            print(f"error: {v.design} {v.property}: {v.message}")
    mismatches = [v for v in verdicts if not v.matches]
    print(f"\n{len(verdicts) - len(mismatches)} of {len(verdicts)} verdicts as declared"
          + (f"; {len(mismatches)} not" if mismatches else ""))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report.as_json(verdicts), indent=1) + "\n")
    if args.junit:
        report.write_junit(args.junit, verdicts)
    return 1 if mismatches else 0
