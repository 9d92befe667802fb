"""How long `shift prove` takes: every theorem, N times, medians (not a timed test).

    python bench/prove_bench.py [--repeat 3]

Each repetition runs every theorem once in this process (Z3 is single-threaded). The
table (median and range of seconds per theorem, and of the total) replaces the prove
section of docs/performance.md; the issue's budget is 60 s in total on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import z3
from docsection import write_section
from shift.proofs.core import run
from shift.proofs.registry import THEOREMS

DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
BEGIN, END = "<!-- prove:begin -->", "<!-- prove:end -->"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    seconds: dict[str, list[float]] = {t.name: [] for t in THEOREMS}
    totals = []
    for k in range(args.repeat):
        total = 0.0
        for t in THEOREMS:
            r = run(t)
            if not r.as_expected:
                raise SystemExit(f"{t.name}: {r.verdict.status}, expected {t.expected}")
            seconds[t.name].append(r.seconds)
            total += r.seconds
        totals.append(total)
        print(f"run {k + 1}/{args.repeat}: {total:.1f} s", file=sys.stderr, flush=True)
    lines = [BEGIN, "## Proofs: `shift prove`", "",
             f"`python bench/prove_bench.py --repeat {args.repeat}` on {platform.machine()}, "
             f"{os.cpu_count()} cores, Python {platform.python_version()}, Z3 "
             f"{z3.get_version_string()}, {time.strftime('%Y-%m-%d')}. Seconds per theorem: "
             f"median and range of {args.repeat} runs (Z3 is single-threaded). Budget: 60 s "
             "in total.", "",
             "| theorem | expected | median s | range s |", "|---|---|---:|---:|"]
    for t in THEOREMS:
        xs = seconds[t.name]
        lines.append(f"| `{t.name}` | {t.expected} | {statistics.median(xs):.2f} | "
                     f"{min(xs):.2f}–{max(xs):.2f} |")
    lines.append(f"| **total** | | **{statistics.median(totals):.1f}** | "
                 f"{min(totals):.1f}–{max(totals):.1f} |")
    section = "\n".join(lines) + "\n" + END
    write_section(DOC, BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    main()
