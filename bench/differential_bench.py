"""Steps per second of differential testing, and of its parts, in one run (not a test).

    python bench/differential_bench.py [--traces 200] [--repeat 5]

The same generated traces (the suite's generator, seeded) go through: the model alone
(`Model.run`), the C core alone (the same events through `Bridge`, nothing compared),
both together with every comparison (`run_trace`, what the suite and `shift fuzz` do),
and trace validation (`record` then `validate`: the core leads, the model judges). Events
per second, median and range of --repeat runs, per design at the `large` bound, one
process (one core). The table replaces the differential section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from shift.model.next import Model
from shift.vocabulary import Event

from shift.differential import DESIGNS, Bridge, gap, run_trace, trace_from_choices
from shift.validation import record, validate

DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
BEGIN, END = "<!-- differential:begin -->", "<!-- differential:end -->"
BOUND = "large"


def traces(model: Model, n: int) -> list[list[Event]]:
    rng = random.Random(2026)
    return [trace_from_choices(model, [rng.randrange(1 << 16) for _ in range(61)])
            for _ in range(n)]


def comparable(model: Model, events: list[Event]) -> list[Event]:
    """The prefix both sides can run step by step (up to a documented gap)."""
    s = model.init(events[0])
    for k, ev in enumerate(events[1:], 1):
        if gap(s, ev) is not None:
            return events[:k]
        s = model.step(s, ev)
    return events


def model_alone(model: Model, ts: list[list[Event]]) -> int:
    return sum(len(model.run(t)) - 1 for t in ts)


def impl_alone(model: Model, ts: list[list[Event]]) -> int:
    steps = 0
    for t in ts:
        s = model.init(t[0])
        bridge = Bridge(model.design.name, model.bound, s.program[0], s.program[1])
        try:
            for ev in t[1:]:
                bridge.apply(ev)
                bridge.observation()
                steps += 1
        finally:
            bridge.close()
    return steps


def together(model: Model, ts: list[list[Event]]) -> int:
    """Events both sides ran and compared (a divergence ends a run where it parts;
    docs/findings.md lists the open ones)."""
    steps = 0
    for t in ts:
        run = run_trace(model, t)
        steps += len(run.events) - 1
    return steps


def validation(model: Model, n: int) -> int:
    steps = 0
    for seed in range(n):
        rec = record(model, model.bound.workloads[seed % len(model.bound.workloads)], seed)
        verdict = validate(model, rec)
        assert verdict.ok, verdict.failure
        steps += verdict.checked
    return steps


def rate(repeat: int, fn: Callable[..., int], *args: object) -> tuple[float, float, float]:
    rates = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        steps = fn(*args)
        rates.append(steps / (time.perf_counter() - t0))
    return statistics.median(rates), min(rates), max(rates)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = ap.parse_args()
    rows = []
    for design in DESIGNS:
        model = Model.load(design, BOUND)
        ts = [comparable(model, t) for t in traces(model, args.traces)]
        cells = {
            "model alone": rate(args.repeat, model_alone, model, ts),
            "C core alone": rate(args.repeat, impl_alone, model, ts),
            "together, compared": rate(args.repeat, together, model, ts),
            "trace validation": rate(args.repeat, validation, model, args.traces),
        }
        rows.append((design, cells))
        print(f"{design}: " + ", ".join(f"{k} {v[0]:,.0f}/s" for k, v in cells.items()),
              file=sys.stderr, flush=True)
    kinds = list(rows[0][1])
    lines = [BEGIN, "## Differential testing: steps per second", "",
             f"`python bench/differential_bench.py --traces {args.traces} --repeat "
             f"{args.repeat}` on {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}: the suite's "
             f"generated traces (up to 60 events) at the `{BOUND}` bound, one process. "
             "Events per second, median (range) of the runs. *together* is what the suite "
             "and `shift fuzz` run (both sides, every comparison and invariant, the "
             "enabledness probes); its cost relative to the two sides alone is the price "
             "of the checks. *trace validation* records runs the core chooses and replays "
             "them through the model.", "",
             "| design | " + " | ".join(kinds) + " | together / model alone |",
             "|---|" + "---:|" * (len(kinds) + 1)]
    for design, cells in rows:
        ratio = cells["together, compared"][0] / cells["model alone"][0]
        lines.append(f"| {design} | " + " | ".join(
            f"{m:,.0f} ({lo:,.0f}–{hi:,.0f})" for m, lo, hi in cells.values())
            + f" | {ratio:.2f} |")
    lines.append(END)
    table = "\n".join(lines)
    print(table)
    if args.write:
        doc = DOC.read_text()
        if BEGIN in doc:
            doc = doc[:doc.index(BEGIN)] + table + doc[doc.index(END) + len(END):]
        else:
            doc = doc.rstrip("\n") + "\n\n" + table + "\n"
        DOC.write_text(doc)


if __name__ == "__main__":
    main()
