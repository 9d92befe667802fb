"""Benchmark (not a test): the SHIFT layer's overhead over libibverbs, against raw verbs on
the same simulated provider, in one run; writes the "The layer over libibverbs" section of
docs/performance.md and prints it.

    python bench/layer_overhead.py [--reps N] [--wrs N] [--no-write]

bench/ibv_rate.c, in one process that is both hosts (the provider in lock-step, so both
sides do the same work on the wire and nothing else runs): host A WRITEs 64 bytes to host
B, each WR signaled, the wire pumped after each post, A's completions polled - by raw
verbs (one RC QP per host), or through the layer's endpoints over the libibverbs backend
(shift_ibv.h). Chains of 32 WRs per post and one WR per post; REPS interleaved runs of
each; medians, ranges, and the layer's rate over raw verbs' per run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docsection import write_section  # noqa: E402
from shift.verbs import devices, rdma_core  # noqa: E402

from shift import native  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- ibv-layer:begin -->", "<!-- ibv-layer:end -->"
CHAINS = (32, 1)


def compile_bench(build: rdma_core.Build) -> Path:
    out = ROOT / "bench" / "out" / "ibv_rate"
    out.parent.mkdir(parents=True, exist_ok=True)
    lib = native.lib_dir()
    subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Wpedantic",
                    "-Werror", "-O2", f"-I{native.include_dir()}", "-isystem",
                    str(build.tree / "include"), str(ROOT / "bench" / "ibv_rate.c"),
                    f"-L{lib}", "-lshift", f"-L{build.lib}", "-lshift_ibv", "-libverbs",
                    "-ldl", f"-Wl,-rpath,{lib}:{build.lib}", "-o", str(out)], check=True)
    return out


def rate(build: rdma_core.Build, exe: Path, mode: str, chain: int, wrs: int) -> float:
    proc = devices.run(build, devices.LOCKSTEP,
                       [str(exe), str(build.provider), mode, str(wrs), str(chain)],
                       capture_output=True, timeout=600)
    if proc.returncode:
        raise RuntimeError(f"ibv_rate {mode} {chain}: {proc.stderr}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["wr_per_s"])


def spread(v: list[float], fmt: str) -> str:
    return f"{format(statistics.median(v), fmt)} ({format(min(v), fmt)}–{format(max(v), fmt)})"


def section(reps: int, wrs: int, got: dict[tuple[str, int], list[float]]) -> str:
    rows = []
    for chain in CHAINS:
        raw, layer = got[("raw", chain)], got[("layer", chain)]
        ratio = [lay / r for lay, r in zip(layer, raw, strict=True)]
        over = [1 / x - 1 for x in ratio]
        what = "one WR per post" if chain == 1 else f"chains of {chain}"
        rows.append(f"| {what} | {spread(raw, ',.0f')} | {spread(layer, ',.0f')} | "
                    f"{spread(ratio, '.3f')} | {spread([100 * o for o in over], '.0f')} % |")
    table = "\n".join(rows)
    return f"""{BEGIN}
## The layer over libibverbs against raw verbs (issue 18)

`python bench/layer_overhead.py` ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores,
{reps} interleaved runs of {wrs:,} WRs each; medians, ranges in brackets). One process
that is both hosts, the provider in lock-step (bench/ibv_rate.c): 64-byte WRITEs from A
to B, each signaled, the wire pumped after each post, A's completions polled - by raw
verbs, or through the layer's endpoints over the libibverbs backend (`shift_ibv.h`). WRs
per second:

| posting | raw verbs | the layer over libibverbs | layer / raw (per run) | overhead |
|---|---|---|---|---|
{table}

**The goal (at most 3 %) is not met here**, and this setting is the one where it cannot
be: the simulated NIC is a function call (about 0.2 µs a WR, wire and both ends), so the
layer's own work per WR - its copy of the WR (the backend offers no `sq_pending`), one
completion taken at a time through its poll step, the backend's translation to and from
`ibv_*` structures - is a large share. Against a NIC whose work per message is
microseconds (the provider between two processes: 173k messages/s, 5.8 µs each; above)
the same work is a few per cent; measuring that needs the layer in two processes, which
issue 19's preload library gives.
{END}"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--wrs", type=int, default=1_000_000)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    build = rdma_core.ensure_built(lambda line: print(line, file=sys.stderr))
    exe = compile_bench(build)
    got: dict[tuple[str, int], list[float]] = {(m, c): [] for m in ("raw", "layer")
                                               for c in CHAINS}
    for i in range(args.reps):
        print(f"run {i + 1} of {args.reps}", file=sys.stderr)
        for chain in CHAINS:
            for mode in ("raw", "layer"):
                got[(mode, chain)].append(rate(build, exe, mode, chain, args.wrs))
    text = section(args.reps, args.wrs, got)
    print(text)
    if not args.no_write:
        write_section(DOC, BEGIN, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
