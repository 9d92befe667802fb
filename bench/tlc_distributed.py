"""One TLC process against TLC's distributed mode on loopback: `shift check` timed.

    python bench/tlc_distributed.py [--designs NoFailover,...] [--bound small] [--repeat 3]

For each design, its invariants only (distributed TLC checks no temporal property), N
rounds that alternate `--engine tlc --workers W` (one process, W worker threads) and
`--distributed --dist-workers 2` (a TLCServer and two TLCWorker processes of one thread
each), so that a load on the shared machine falls on both. Prints a Markdown table: distinct
states (equal, or the script fails), median and range of the wall time, JVM start-ups
included, and the distributed / single ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shift.spec.catalog import load_catalog

MODES = {"single": ["--engine", "tlc"], "distributed": ["--distributed", "--dist-workers", "2"]}


def check_once(design: str, bound: str, mode: str, workers: int) -> tuple[int, float]:
    """(distinct states, wall seconds) of one `shift check` of the design's invariants."""
    catalog = load_catalog()
    invariants = catalog.invariants_of(catalog.design(design).at(bound))
    props = [a for p in invariants for a in ("--property", p)]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "shift", "check", "--design", design,
                               "--bound", bound, *props, *MODES[mode], "--workers",
                               str(workers), "--jobs", "1", "--quiet", "--json", "r.json",
                               "--out", "cex"], cwd=tmp, capture_output=True, text=True)
        seconds = time.monotonic() - started
        if proc.returncode != 0:
            raise SystemExit(f"{design} {mode}: exit {proc.returncode}\n{proc.stdout}")
        results = json.loads((Path(tmp) / "r.json").read_text())["results"]
    return max(r["states"] for r in results), seconds


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--designs", default="NoFailover,NcclPortFailoverNoSlotGuard")
    p.add_argument("--bound", default="small")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workers", type=int, default=2,
                   help="worker threads of the single process (default 2: the 2 cores)")
    args = p.parse_args()
    print("| design | bound | mode | distinct states | median s | range s | runs |")
    print("|---|---|---|---:|---:|---:|---:|")
    for design in args.designs.split(","):
        times: dict[str, list[float]] = {m: [] for m in MODES}
        states: dict[str, set[int]] = {m: set() for m in MODES}
        for _ in range(args.repeat):
            for mode in MODES:
                n, s = check_once(design, args.bound, mode, args.workers if mode == "single"
                                  else 1)
                times[mode].append(s)
                states[mode].add(n)
        if len(states["single"] | states["distributed"]) != 1:
            raise SystemExit(f"{design}: state counts differ: {states}")
        for mode in MODES:
            t = times[mode]
            print(f"| {design} | {args.bound} | {mode} | {min(states[mode]):,} | "
                  f"{statistics.median(t):.1f} | {min(t):.1f}–{max(t):.1f} | {len(t)} |")
        ratio = statistics.median(times["distributed"]) / statistics.median(times["single"])
        print(f"| {design} | {args.bound} | distributed / single | | {ratio:.1f}× | | |")


if __name__ == "__main__":
    main()
