"""Benchmark (not a test): the SHIFT layer's overhead over libibverbs, against raw verbs on
the same simulated provider, in one run; writes the "The layer over libibverbs" section of
docs/performance.md and prints it.

    python bench/layer_overhead.py [--reps N] [--wrs N] [--pair-wrs N] [--no-write]

bench/ibv_rate.c: host A WRITEs 64 bytes to host B, each WR signaled, and polls its
completions - by raw verbs (one RC QP per host), or through the layer's endpoints over the
libibverbs backend (shift_ibv.h). Chains of 32 WRs per post and one WR per post, in two
settings: two processes, one per host, over the provider's socket wire (as perftest runs);
and one process that is both hosts, the provider in lock-step (the wire pumped after each
post: nothing but the two sides' own work). REPS interleaved runs of each; medians,
ranges, and the layer's rate over raw verbs' per run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
import uuid
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


def pair_rate(build: rdma_core.Build, exe: Path, mode: str, chain: int, wrs: int) -> float:
    """Two processes, one per host; what each prints of itself goes to the other."""
    argv = [str(exe), "--host", "?", mode, str(wrs), str(chain)]
    env = {"SHIFT_SIM_FABRIC": f"rate-{uuid.uuid4().hex[:8]}"}
    lines = 3 if mode == "layer" else 2  # per path (the layer: two), then the region
    with devices.started(build, "B", [*argv[:2], "B", *argv[3:]], env=env) as b, \
            devices.started(build, "A", [*argv[:2], "A", *argv[3:]], env=env) as a:
        assert a.stdin and a.stdout and b.stdin and b.stdout
        mine = ["".join(p.stdout.readline() for _ in range(lines)) for p in (a, b)]
        a.stdin.write(mine[1])
        a.stdin.flush()
        b.stdin.write(mine[0])
        b.stdin.flush()
        out = a.stdout.readline()
        if a.wait(timeout=600):
            raise RuntimeError(f"ibv_rate --host A {mode} {chain}: {a.communicate()[1]}")
        b.stdin.write("done\n")
        b.stdin.flush()
        b.wait(timeout=60)
    return float(json.loads(out)["wr_per_s"])


def spread(v: list[float], fmt: str) -> str:
    return f"{format(statistics.median(v), fmt)} ({format(min(v), fmt)}–{format(max(v), fmt)})"


def table(got: dict[tuple[str, str, int], list[float]], setting: str) -> str:
    rows = []
    for chain in CHAINS:
        raw, layer = got[(setting, "raw", chain)], got[(setting, "layer", chain)]
        ratio = [lay / r for lay, r in zip(layer, raw, strict=True)]
        over = [100 * (1 / x - 1) for x in ratio]
        what = "one WR per post" if chain == 1 else f"chains of {chain}"
        rows.append(f"| {what} | {spread(raw, ',.0f')} | {spread(layer, ',.0f')} | "
                    f"{spread(ratio, '.3f')} | {spread(over, '.1f')} % |")
    head = ("| posting | raw verbs | the layer over libibverbs | layer / raw (per run) | "
            "overhead |\n|---|---|---|---|---|\n")
    return head + "\n".join(rows)


def overhead(got: dict[tuple[str, str, int], list[float]], setting: str, chain: int) -> float:
    """The median overhead of the layer, per cent, from the per-run ratios."""
    ratio = [lay / r for lay, r in zip(got[(setting, "layer", chain)],
                                       got[(setting, "raw", chain)], strict=True)]
    return 100 * (1 / statistics.median(ratio) - 1)


def verdict(got: dict[tuple[str, str, int], list[float]]) -> str:
    """What the two-process figures say of the goal (at most 3 %), from the numbers."""
    over = {c: overhead(got, "pair", c) for c in CHAINS}
    within = all(o <= 3 for o in over.values())
    told = ", ".join(f"{o:.1f} % for {'one WR per post' if c == 1 else f'chains of {c}'}"
                     for c, o in over.items())
    widest = max(max(r) - min(r) for r in (
        [lay / raw for lay, raw in zip(got[("pair", "layer", c)], got[("pair", "raw", c)],
                                       strict=True)] for c in CHAINS))
    text = (f"Between two processes the layer's median overhead is {told}: "
            + ("within the goal of 3 %: the wire's cost (a datagram between processes and a "
               "wake-up of the peer's progress thread per message) hides the layer's."
               if within else "above the goal of 3 %."))
    if widest > 0.06:
        text += (f" But the runs spread far wider than 3 % (a ratio range of {widest:.2f}: "
                 "two processes and their progress threads on 2 shared cores), so this "
                 "says the layer costs no more than the noise here, not that it costs under "
                 "3 %.")
    return textwrap.fill(text, 90)


def section(reps: int, wrs: int, pair_wrs: int,
            got: dict[tuple[str, str, int], list[float]]) -> str:
    return f"""{BEGIN}
## The layer over libibverbs against raw verbs (issue 18)

`python bench/layer_overhead.py` ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores,
{reps} interleaved runs of each; medians, ranges in brackets). bench/ibv_rate.c: 64-byte
WRITEs from A to B, each signaled, A's completions polled after each post - by raw verbs,
or through the layer's endpoints over the libibverbs backend (`shift_ibv.h`). WRs per
second.

Two processes, one per host, over the provider's socket wire ({pair_wrs:,} WRs a run;
each post waits for its completions, so the rate is the round trip's):

{table(got, "pair")}

One process that is both hosts, the provider in lock-step, the wire pumped after each post
({wrs:,} WRs a run):

{table(got, "lockstep")}

{verdict(got)}
In lock-step the simulated NIC is a function call (about 0.2 µs a WR, wire and both ends),
so the layer's own work per WR shows whole: its copy of the WR (the backend offers no
`sq_pending`), one completion taken at a time through its poll step (the backend hands
them out of a batch it polls from the provider), the translation to and from `ibv_*`
structures.
{END}"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--wrs", type=int, default=5_000_000)
    ap.add_argument("--pair-wrs", type=int, default=200_000)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    build = rdma_core.ensure_built(lambda line: print(line, file=sys.stderr))
    exe = compile_bench(build)
    got: dict[tuple[str, str, int], list[float]] = {
        (s, m, c): [] for s in ("pair", "lockstep") for m in ("raw", "layer") for c in CHAINS}
    for i in range(args.reps):
        print(f"run {i + 1} of {args.reps}", file=sys.stderr)
        for chain in CHAINS:
            for mode in ("raw", "layer"):
                got[("pair", mode, chain)].append(
                    pair_rate(build, exe, mode, chain, args.pair_wrs))
                got[("lockstep", mode, chain)].append(rate(build, exe, mode, chain, args.wrs))
    text = section(args.reps, args.wrs, args.pair_wrs, got)
    print(text)
    if not args.no_write:
        write_section(DOC, BEGIN, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
