"""Benchmark of the verbs stack on the simulated NICs (not a test): writes the "Verbs
programs on the simulated NICs" section of docs/performance.md and prints it.

    python bench/verbs_bench.py [--reps N] [--no-write]

In one run, interleaved, REPS times each (medians and ranges):
- Debian's `ib_write_bw` (64-byte WRITEs, 128 in flight) between two processes, one per
  host, through rdma-core 59's libibverbs, the provider and its socket wire;
- `ibv_rc_pingpong` (64 bytes): the round trip, microseconds per iteration;
- the reference: the same RC NIC driven in one process through simnic's C API, no
  libibverbs, no process boundary (`native_bench rate`, one WR per post), and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docsection import write_section  # noqa: E402
from shift.verbs import devices, rdma_core  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- verbs:begin -->", "<!-- verbs:end -->"
WRITES, ROUNDS = 20000, 5000


def pair(build: rdma_core.Build, argv: list[str]) -> str:
    """Server as host B, client as host A; the client's output."""
    port = str(devices.free_port())
    env = {"SHIFT_SIM_FABRIC": f"bench-{uuid.uuid4().hex[:8]}"}
    with devices.started(build, "B", [*argv, "-p", port], env=env) as server:
        while not devices.listening(int(port)):
            if server.poll() is not None:
                raise RuntimeError(f"{argv[0]} server ended: {server.communicate()}")
            time.sleep(0.02)
        client = devices.run(build, "A", [*argv, "-p", port, "localhost"],
                             capture_output=True, timeout=300, env=env)
        server.communicate(timeout=300)
    if client.returncode:
        raise RuntimeError(f"{argv[0]}: {client.stderr}")
    return client.stdout


def write_rate(build: rdma_core.Build) -> float:
    out = pair(build, ["ib_write_bw", "-d", "sim0", "-s", "64", "-n", str(WRITES)])
    m = re.search(rf"^\s*64\s+{WRITES}\s+[\d.]+\s+[\d.]+\s+([\d.]+)", out, flags=re.M)
    assert m, out
    return float(m.group(1)) * 1e6


def round_trip_us(build: rdma_core.Build) -> float:
    out = pair(build, ["ibv_rc_pingpong", "-d", "sim0", "-s", "64", "-n", str(ROUNDS)])
    m = re.search(r"([\d.]+) usec/iter", out)
    assert m, out
    return float(m.group(1))


def raw_rate() -> float:
    out = ROOT / "bench" / "out" / "native"
    subprocess.run(["make", "-s", "-C", str(ROOT / "native"), f"BUILD={out}",
                    f"{out}/native_bench"], check=True)
    line = subprocess.run([str(out / "native_bench"), "rate", "200000", "1", "1"],
                          check=True, capture_output=True, text=True).stdout
    return float(json.loads(line.splitlines()[-1])["raw_wr_per_s"])


def spread(v: list[float], fmt: str) -> str:
    return f"{format(statistics.median(v), fmt)} ({format(min(v), fmt)}–{format(max(v), fmt)})"


def section(reps: int, writes: list[float], rtts: list[float], raws: list[float]) -> str:
    ratio = [w / r for w, r in zip(writes, raws, strict=True)]
    return f"""{BEGIN}
## Verbs programs on the simulated NICs

`python bench/verbs_bench.py` ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores,
{reps} interleaved runs each; medians, ranges in brackets). Two processes, one per host,
through rdma-core 59's libibverbs, the provider (docs/verbs.md) and its socket wire; the
reference is the same RC NIC in one process through simnic's C API.

| what | figure |
|---|---|
| `ib_write_bw -s 64 -n {WRITES}` (Debian perftest 4.5), messages/s | {spread(writes, ",.0f")} |
| `ibv_rc_pingpong -s 64 -n {ROUNDS}`, µs per round trip | {spread(rtts, ".1f")} |
| simnic's C API in one process, one 8-byte WRITE per post, WRs/s | {spread(raws, ",.0f")} |
| ratio provider / C API (per run) | {spread(ratio, ".3f")} |

The process boundary dominates: every packet is a datagram between two processes and a
wake-up of the other side's progress thread; the NIC's own work per WR is the C API's.
{END}"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    build = rdma_core.ensure_built(lambda line: print(line, file=sys.stderr))
    writes, rtts, raws = [], [], []
    for i in range(args.reps):
        print(f"run {i + 1} of {args.reps}", file=sys.stderr)
        writes.append(write_rate(build))
        rtts.append(round_trip_us(build))
        raws.append(raw_rate())
    text = section(args.reps, writes, rtts, raws)
    print(text)
    if not args.no_write:
        write_section(DOC, BEGIN, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
