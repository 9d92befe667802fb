"""`shift check` for every design, wall time, as a user runs it: TLC against the default
engine (`auto`: the explorer where the bound declares it), side by side, in one run.

    python bench/check_wall.py [--bounds small,default] [--repeat 3] [--tlc-repeat N]

Each repetition runs `shift check --bound B --engine tlc` and `shift check --bound B` in
turn (alternating, so that the machine's load falls on both alike), checks that both
declare every verdict as expected, and updates the section of docs/performance.md with the
median and range of the wall times and their ratio.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- check:begin -->", "<!-- check:end -->"


def wall(bound: str, engine: str | None) -> float:
    """The wall time of one `shift check --bound B` (all designs); exits if a verdict is
    not as declared (a timing of a wrong answer means nothing)."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "shift", "check", "--bound", bound, "--quiet",
               "--out", "cex"] + (["--engine", engine] if engine else [])
        started = time.monotonic()
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[2:])}: exit {proc.returncode}\n{proc.stdout[-2000:]}")
    return seconds


def span(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f} | {min(xs):.1f}–{max(xs):.1f} | {len(xs)}"


def section(rows: list[str], repeat: int) -> str:
    head = (f"`python bench/check_wall.py` (latest: `--repeat {repeat}`) on {platform.machine()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, {date.today()}. "
            "Wall time of `shift check --bound B` for all seven trilemma designs (56 cells, "
            "every verdict as declared), started as a user starts it (a fresh process, JVM "
            "start-ups included): *TLC* is `--engine tlc` (every cell decided by TLC, as "
            "`shift check` did before the explorer became the default at `small` and "
            "`default`), *default* is `--engine auto`. The two alternate, so a load on the "
            "shared machine falls on both.")
    table = ["| bound | engine | median s | range s | runs |", "|---|---|---:|---:|---:|"]
    return "\n".join([BEGIN, "## `shift check`: all designs, wall time", "", head, "",
                      *table, *rows, END])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bounds", default="small,default")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tlc-repeat", type=int, help="TLC runs per bound (default: --repeat)")
    args = ap.parse_args()
    rows = []
    for bound in args.bounds.split(","):
        tlc: list[float] = []
        auto: list[float] = []
        for k in range(args.repeat):
            if k < (args.tlc_repeat or args.repeat):
                tlc.append(wall(bound, "tlc"))
            auto.append(wall(bound, None))
            print(f"{bound} #{k + 1}: tlc {tlc[-1]:.1f} s, default {auto[-1]:.1f} s",
                  file=sys.stderr, flush=True)
        ratio = statistics.median(tlc) / statistics.median(auto)
        rows += [f"| {bound} | TLC | {span(tlc)} |",
                 f"| {bound} | default (explorer) | {span(auto)} |",
                 f"| {bound} | TLC / default | {ratio:.1f}× | | |"]
    doc = DOC.read_text()
    measured = set(args.bounds.split(","))
    if BEGIN in doc:  # rows of bounds not measured this time stay
        kept = [line for line in doc.split(BEGIN, 1)[1].split(END, 1)[0].splitlines()
                if line.startswith("| ") and not line.startswith("| bound")
                and line.split("|")[1].strip() not in measured]
        rows = kept + rows
    new = section(rows, args.repeat)
    if BEGIN in doc:
        doc = doc.split(BEGIN)[0] + new + doc.split(END, 1)[1]
    else:
        doc = doc.rstrip("\n") + "\n\n" + new + "\n"
    DOC.write_text(doc)
    print(new)


if __name__ == "__main__":
    main()
