"""The explorer (shift.model) against one TLC worker: same design, same bound, one run.

    python bench/explorer_vs_tlc.py [--bounds small,default] [--designs Shift,NaiveReplay]
                                    [--repeat 3] [--heap 1024]

Both engines explore the whole state space checking every invariant the design declares
it keeps (spec/designs.toml), so neither stops early at a violation nor spends its time
printing traces. Each run is a process of its own; its peak resident memory is the largest
VmHWM read from /proc while it runs (sampled every 50 ms; VmHWM only grows). Seconds are
wall time of the whole process: JVM or interpreter start-up and parsing included. The
table (medians of --repeat runs, ratios explorer/TLC) replaces the explorer section of
docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from docsection import write_section
from shift.spec.catalog import load_catalog

from shift.tlc.java import find_jar, find_java
from shift.tlc.runner import write_cfg

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- explorer:begin -->", "<!-- explorer:end -->"

EXPLORE = """
import json, sys
from shift.model.explore import explore
from shift.model.next import Model
ex = explore(Model.load(sys.argv[1], sys.argv[2]), sys.argv[3:], keep_edges=False)
assert not ex.violations, ex.violations
print(json.dumps({"states": ex.distinct, "violated": sorted(ex.violations)}))
"""


def _hwm_kib(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(ln.split()[1]) for ln in status.splitlines()
                 if ln.startswith("VmHWM:")), 0)


def run(cmd: list[str], cwd: Path) -> tuple[str, float, float]:
    """(stdout, wall seconds, peak RSS in MiB) of one process."""
    peak = 0
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, \
            subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.DEVNULL) as proc:
        while proc.poll() is None:
            peak = max(peak, _hwm_kib(proc.pid))
            time.sleep(0.05)
        seconds = time.monotonic() - started
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])}... exited {proc.returncode}:\n{text[-2000:]}")
    return text, seconds, peak / 1024


def kept(design: str) -> list[str]:
    """The invariants the design declares it keeps."""
    catalog = load_catalog(None)
    d = catalog.design(design)
    return [p for p in catalog.invariants if d.expected(p) == "holds"]


def tlc_once(design: str, bound: str, heap: int) -> tuple[int, float, float]:
    catalog = load_catalog(None)
    b = catalog.bound(bound)
    with tempfile.TemporaryDirectory(prefix="shift-bench-") as tmp:
        work = Path(tmp)
        for tla in catalog.spec_dir.glob("*.tla"):
            shutil.copyfile(tla, work / tla.name)
        write_cfg(work / "MC.cfg", b.constants, kept(design), [])
        out, seconds, rss = run(
            [find_java(), "-XX:+UseParallelGC", f"-Xmx{heap}m", "-cp", find_jar(), "tlc2.TLC",
             "-deadlock", "-workers", "1", "-metadir", str(work / "states"),
             "-config", "MC.cfg", f"{catalog.design(design).module}.tla"], work)
    line = [ln for ln in out.splitlines() if "distinct states found" in ln][-1]
    states = int(line.split(" distinct states found")[0].rsplit(" ", 1)[1].replace(",", ""))
    return states, seconds, rss


def explorer_once(design: str, bound: str) -> tuple[int, float, float]:
    with tempfile.TemporaryDirectory(prefix="shift-bench-") as tmp:
        out, seconds, rss = run([sys.executable, "-c", EXPLORE, design, bound,
                                 *kept(design)], Path(tmp))
    return json.loads(out)["states"], seconds, rss


def measure(design: str, bound: str, repeat: int, heap: int) -> dict[str, float]:
    row: dict[str, float] = {}
    for engine in ("tlc", "explorer"):
        runs = []
        for k in range(repeat):
            runs.append(tlc_once(design, bound, heap) if engine == "tlc"
                        else explorer_once(design, bound))
            print(f"  {design} {bound} {engine} run {k + 1}/{repeat}: {runs[-1][0]:,} states, "
                  f"{runs[-1][1]:.1f} s, {runs[-1][2]:.0f} MiB", file=sys.stderr, flush=True)
        row[f"{engine}_states"] = runs[0][0]
        row[f"{engine}_s"] = statistics.median(r[1] for r in runs)
        row[f"{engine}_mib"] = statistics.median(r[2] for r in runs)
    if row["tlc_states"] != row["explorer_states"]:
        raise SystemExit(f"{design} {bound}: TLC found {row['tlc_states']:,} states, the "
                         f"explorer {row['explorer_states']:,}: the engines disagree")
    return row


def table(rows: dict[tuple[str, str], dict[str, float]], args: argparse.Namespace) -> str:
    head = (f"`python bench/explorer_vs_tlc.py --repeat {args.repeat}` on {platform.machine()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{time.strftime('%Y-%m-%d')}. Both engines explore every reachable state and "
            f"check every invariant the design keeps; TLC with one worker and "
            f"`-Xmx{args.heap}m`. Seconds and MiB are medians of {args.repeat} runs of the "
            "whole process (start-up included); "
            "rate = distinct states / seconds; ratio = explorer / TLC.")
    lines = [BEGIN, "## Explorer against TLC (one worker)", "", head, "",
             "| bound | design | distinct states | TLC s | explorer s | TLC states/s | "
             "explorer states/s | rate ratio | TLC MiB | explorer MiB |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (bound, design), r in rows.items():
        tr, er = r["tlc_states"] / r["tlc_s"], r["explorer_states"] / r["explorer_s"]
        lines.append(f"| {bound} | {design} | {int(r['tlc_states']):,} | {r['tlc_s']:.1f} | "
                     f"{r['explorer_s']:.1f} | {tr:,.0f} | {er:,.0f} | {er / tr:.2f} | "
                     f"{r['tlc_mib']:.0f} | {r['explorer_mib']:.0f} |")
    return "\n".join(lines) + "\n" + END


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bounds", default="small,default")
    ap.add_argument("--designs", default="Shift,NaiveReplay")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--heap", type=int, default=1024, help="TLC's Java heap, MiB")
    args = ap.parse_args()
    rows = {(b, d): measure(d, b, args.repeat, args.heap)
            for b in args.bounds.split(",") for d in args.designs.split(",")}
    section = table(rows, args)
    write_section(DOC, BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    main()
