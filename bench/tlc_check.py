"""TLC's states and seconds per design and bound: `shift check` timed, one design at a time.

    python bench/tlc_check.py [--bounds small,default] [--repeat 3]

Each design is checked alone (one TLC process at a time, all cores to its workers), N times;
the table reports distinct states (the largest run of the design: the full state space when
any property holds) and the median wall time of the whole design check (every TLC run it
needs), and rewrites its section of docs/performance.md.
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
BEGIN, END = "<!-- tlc:begin -->", "<!-- tlc:end -->"
DESIGNS = ["Shift", "NaiveReplay", "NoFailover", "ReceiverQuery", "Staging", "NcclResiliency"]


def check_once(design: str, bound: str) -> tuple[int, int, float]:
    """(distinct states, TLC runs, wall seconds) of one `shift check --design`."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "shift", "check", "--design", design, "--bound",
                        bound, "--jobs", "1", "--quiet", "--json", "r.json", "--out", "cex"],
                       cwd=tmp, check=False, capture_output=True)
        seconds = time.monotonic() - started
        results = json.loads((Path(tmp) / "r.json").read_text())["results"]
    states = max(r["states"] for r in results)
    # One run per violated invariant, one clean run if any invariant holds, one for Liveness.
    invariants = [r for r in results if r["property"] != "Liveness"]
    runs = (sum(r["verdict"] == "violated" for r in invariants)
            + any(r["verdict"] == "holds" for r in invariants) + 1)
    return states, runs, seconds


def splice(doc: str, section: str) -> str:
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        return head + section + rest.split(END, 1)[1]
    return doc.rstrip() + "\n\n" + section + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bounds", default="small,default")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for bound in args.bounds.split(","):
        for design in DESIGNS:
            samples = [check_once(design, bound) for _ in range(args.repeat)]
            secs = [s[2] for s in samples]
            states, runs = samples[0][0], samples[0][1]
            rows.append(f"| {bound} | {design} | {states:,} | {runs} | "
                        f"{statistics.median(secs):.1f} | {min(secs):.1f}–{max(secs):.1f} |")
            print(rows[-1], flush=True)
    section = "\n".join([
        BEGIN,
        "## TLC: states and seconds per design and bound",
        "",
        f"`python bench/tlc_check.py --bounds {args.bounds} --repeat {args.repeat}` on "
        f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}. Each design alone (TLC with all cores as workers); "
        "seconds are the median wall time of the whole check of that design, JVM start-ups "
        "included (one TLC run for its invariants, one more per violated invariant, one for "
        "Liveness). The machine is shared: read the medians, not single runs.",
        "",
        "| bound | design | distinct states | TLC runs | median s | range s |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
        END,
    ])
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(splice(DOC.read_text() if DOC.exists() else "# Performance\n", section))


if __name__ == "__main__":
    main()
