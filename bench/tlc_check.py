"""TLC's states and seconds per design and bound: `shift check` timed, one design at a time.

    python bench/tlc_check.py [--bounds small,default] [--designs Shift,...] [--repeat 3]

Each design is checked alone (one TLC process at a time, all cores to its workers), N times;
the table reports distinct states (the largest run of the design: the full state space when
any property holds) and the median wall time of the whole design check (every TLC run it
needs), and updates its section of docs/performance.md: rows of other bounds and designs
already there are kept, so a slow bound can be measured on its own.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
OUT = ROOT / "bench" / "out"
BEGIN, END = "<!-- tlc:begin -->", "<!-- tlc:end -->"
DESIGNS = ["Shift", "ShiftPrefix", "NaiveReplay", "NoFailover", "ReceiverQuery", "Staging",
           "NcclResiliency"]


def check_once(design: str, bound: str) -> tuple[int, int, float]:
    """(distinct states, TLC runs, wall seconds) of one `shift check --design`."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "shift", "check", "--design", design, "--bound",
                        bound, "--engine", "tlc", "--jobs", "1", "--quiet", "--json",
                        "r.json", "--out", "cex"],
                       cwd=tmp, check=False, capture_output=True)
        seconds = time.monotonic() - started
        report = (Path(tmp) / "r.json").read_text()
    # The verdicts of the latest timed run, for whoever wants to read them.
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{design}-{bound}.json").write_text(report)
    results = json.loads(report)["results"]
    states = max(r["states"] for r in results)
    # One run per violated invariant, one clean run if any invariant holds, one for Liveness.
    invariants = [r for r in results if r["property"] != "Liveness"]
    runs = (sum(r["verdict"] == "violated" for r in invariants)
            + any(r["verdict"] == "holds" for r in invariants) + 1)
    return states, runs, seconds


def old_rows(doc: str) -> dict[tuple[str, str], str]:
    """The table rows already in the section, by (bound, design)."""
    if BEGIN not in doc:
        return {}
    rows = {}
    for line in doc.split(BEGIN, 1)[1].split(END, 1)[0].splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 7 and cells[1] in DESIGNS:
            rows[(cells[0], cells[1])] = line
    return rows


def splice(doc: str, section: str) -> str:
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        return head + section + rest.split(END, 1)[1]
    return doc.rstrip() + "\n\n" + section + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bounds", default="small,default")
    ap.add_argument("--designs", default=",".join(DESIGNS))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    doc = DOC.read_text() if DOC.exists() else "# Performance\n"
    table = old_rows(doc)
    for bound in args.bounds.split(","):
        for design in args.designs.split(","):
            samples = [check_once(design, bound) for _ in range(args.repeat)]
            secs = [s[2] for s in samples]
            states, runs = samples[0][0], samples[0][1]
            table[(bound, design)] = (f"| {bound} | {design} | {states:,} | {runs} | "
                                      f"{statistics.median(secs):.1f} | "
                                      f"{min(secs):.1f}–{max(secs):.1f} | {args.repeat} |")
            print(table[(bound, design)], flush=True)
    order = {b: i for i, b in enumerate(["small", "default", "large"])}
    rows = [table[k] for k in sorted(table, key=lambda k: (order.get(k[0], 9),
                                                           DESIGNS.index(k[1])))]
    section = "\n".join([
        BEGIN,
        "## TLC: states and seconds per design and bound",
        "",
        f"`python bench/tlc_check.py` on {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}. "
        "Each design alone (TLC with all cores as workers); "
        "seconds are the median wall time of the whole check of that design, JVM start-ups "
        "included (one TLC run for its invariants, one more per violated invariant, one for "
        "Liveness). The machine is shared: read the medians, not single runs.",
        "",
        "| bound | design | distinct states | TLC runs | median s | range s | runs timed |",
        "|---|---|---:|---:|---:|---:|---:|",
        *rows,
        END,
    ])
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(splice(doc, section))


if __name__ == "__main__":
    main()
