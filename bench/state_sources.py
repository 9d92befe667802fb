"""Where a design's states come from: which variables multiply them (issue 20, item 1).

    python bench/state_sources.py [--design Shift] [--bound small] [--per-workload]

The explorer's graph of the design at the bound (the same states TLC counts: the
conformance tests check it), then for each variable of Failover.tla the number of
distinct states left when that variable is projected away. Their ratio is how many
states differ in that variable alone, on average — what a `VIEW` without it would merge
at most (a VIEW also merges their successors, so the saving in a real run can be
larger). History variables the properties read (what the applications saw, the
executions) cannot be dropped without changing a verdict; the table says which ones
the properties read, so a reduction starts from the others. The table replaces the
sources section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

from docsection import write_section
from shift.model.explore import explore
from shift.model.next import Model
from shift.model.state import VARIABLES, State

DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
BEGIN, END = "<!-- sources:begin -->", "<!-- sources:end -->"

# What Properties.tla's invariants read besides the protocol's own state: history a VIEW
# must keep (program, posted and the queues are protocol state, kept anyway).
READ_BY_PROPERTIES = {"sndSeen", "rcvSeen", "execs", "mem", "bufs", "copies", "queried",
                      "refused", "stored"}


def projections(states: list[State]) -> dict[str, int]:
    """For each variable, the distinct states with it projected away."""
    out = {}
    for k, name in enumerate(VARIABLES):
        out[name] = len({s[:k] + s[k + 1:] for s in states})
        print(f"  {name}: {out[name]}", file=sys.stderr, flush=True)
    return out


def table(design: str, bound: str, states: list[State], seconds: float) -> list[str]:
    total = len(states)
    rest = projections(states)
    values = {name: len({s[k] for s in states}) for k, name in enumerate(VARIABLES)}
    rows = sorted(VARIABLES, key=lambda n: rest[n])
    lines = [f"### {design} at `{bound}`: {total:,} distinct states "
             f"(explorer, {seconds:.0f} s)", "",
             "| variable | values | states without it | states per class | read by a property |",
             "|---|---:|---:|---:|---|"]
    for name in rows:
        if rest[name] == total:
            continue
        lines.append(f"| `{name}` | {values[name]:,} | {rest[name]:,} | "
                     f"{total / rest[name]:.2f} | {'yes' if name in READ_BY_PROPERTIES else ''} |")
    same = [n for n in VARIABLES if rest[n] == total]
    lines += ["", "Determined by the others (dropping one merges no state): "
              + ", ".join(f"`{n}`" for n in same) + "."]
    return lines


def per_workload(states: list[State]) -> list[str]:
    by = Counter(s.program for s in states)
    lines = ["", "| workload (A's ops / B's ops) | states | share |", "|---|---:|---:|"]
    for prog, n in by.most_common():
        ops = " / ".join(",".join(w.op for w in side) or "-" for side in prog)
        lines.append(f"| {ops} | {n:,} | {100 * n / len(states):.0f}% |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", default="Shift")
    ap.add_argument("--bound", default="small")
    ap.add_argument("--per-workload", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="print, leave the docs alone")
    args = ap.parse_args()
    started = time.monotonic()
    ex = explore(Model.load(args.design, args.bound), [], keep_edges=False)
    seconds = time.monotonic() - started
    states = ex.graph.states
    print(f"{args.design} at {args.bound}: {len(states)} states in {seconds:.0f} s",
          file=sys.stderr, flush=True)
    lines = [BEGIN, "## Where the states come from", "",
             f"`python bench/state_sources.py --design {args.design} --bound {args.bound}"
             f"{' --per-workload' if args.per_workload else ''}` on {platform.machine()}, "
             f"{os.cpu_count()} cores, Python {platform.python_version()}, "
             f"{time.strftime('%Y-%m-%d')}. For each variable of Failover.tla, the distinct "
             "states left with it projected away; *states per class* (their ratio) is how "
             "many states differ in that variable alone, on average: what a `VIEW` without "
             "it would merge at most. A variable a property reads cannot go without "
             "changing a verdict.", ""]
    lines += table(args.design, args.bound, states, seconds)
    if args.per_workload:
        lines += per_workload(states)
    section = "\n".join(lines) + "\n" + END
    if args.no_write:
        print(section)
        return
    write_section(DOC, BEGIN, END, section)
    print(f"wrote {DOC}", file=sys.stderr)


if __name__ == "__main__":
    main()
