"""Benchmark of the native core (not a test): writes the "Native core" section of
docs/performance.md and prints it.

    python bench/native_bench.py [--quick] [--no-write]

- message rate of small (8-byte) RDMA WRITEs through simnic's C API and through the SHIFT
  layer on the failure-free path, in one run, interleaved (medians and their ratio); the
  layer both ways: direct (the default QP's send queue keeps the WRs to replay) and
  copying every WR (SHIFT_EP_COPY_POSTS, the path of a backend without sq_pending);
- instructions per WR for all three, from `valgrind --tool=callgrind` (the repeatable figure:
  the difference of two runs of different lengths, so set-up cancels out);
- failover time from the error completion to the first successful completion on the
  backup path: wall microseconds, and wire round trips (lock-step one-way latencies / 2);
- bytes of backup state per connection;
- the rate through the Python API (shift.impl), batched and one WR per call.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NATIVE = os.path.join(ROOT, "native")
OUT = os.path.join(ROOT, "bench", "out", "native")
DOC = os.path.join(ROOT, "docs", "performance.md")
BEGIN, END = "<!-- native:begin -->", "<!-- native:end -->"


def build() -> str:
    subprocess.run(["make", "-s", "-C", NATIVE, f"BUILD={OUT}", f"{OUT}/native_bench"],
                   check=True)
    return os.path.join(OUT, "native_bench")


def run_json(cmd: list[str]) -> list[dict]:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def callgrind_ir(exe: str, mode: str, n: int, batch: int) -> int:
    path = os.path.join(OUT, f"callgrind.{mode}.{n}.{batch}")
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={path}", exe, mode,
                    str(n), str(batch)], check=True, capture_output=True)
    with open(path) as f:
        for line in f:
            m = re.match(r"(?:summary|totals):\s+(\d+)", line)
            if m:
                return int(m.group(1))
    raise RuntimeError("no callgrind total")


def python_rates(reps: int, n: int) -> dict[str, float]:
    sys.path.insert(0, ROOT)
    from shift.impl import Fabric, Wr

    batch = 32
    wrs = [Wr(i, "WRITE", region=1 + i % 4, value=i, signaled=i == batch - 1)
           for i in range(batch)]
    out: dict[str, list[float]] = {"prepared": [], "batched": [], "single": []}
    # the idealised NIC, as the figures were first measured: for WRITEs on a healthy path
    # hardware's defaults (Fabric()) change nothing, and this keeps it so
    with Fabric(rnr_nak=False, ack_before_cqe=False, device_fatal=False) as fab:
        conn = fab.connect("Shift", regions=4, max_wr=256)  # record=False: no history
        chain = conn.prepare(wrs)
        for _ in range(reps):
            t = time.perf_counter()
            for _ in range(n // batch):
                conn.post_prepared(chain)
                conn.pump()
                conn.poll("A", 4)
            out["prepared"].append(n // batch * batch / (time.perf_counter() - t))
            t = time.perf_counter()
            m = n // 8
            for _ in range(m // batch):
                conn.post_send_many(wrs)
                conn.pump()
                conn.poll("A", 4)
            out["batched"].append(m // batch * batch / (time.perf_counter() - t))
            t = time.perf_counter()
            m = n // 8
            for _ in range(m // batch):
                for w in wrs:
                    conn.post_send("A", w)
                conn.pump()
                conn.poll("A", 4)
            out["single"].append(m // batch * batch / (time.perf_counter() - t))
    return {k: statistics.median(v) for k, v in out.items()}


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f} M WR/s" if x >= 1e6 else f"{x / 1e3:.0f} k WR/s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--no-write", action="store_true", help="do not touch docs/performance.md")
    a = ap.parse_args()
    exe = build()
    reps = 5 if a.quick else 31
    iters = 100_000 if a.quick else 400_000
    rounds = 1 if a.quick else 5
    rates = {}
    for batch in (32, 1):
        # several independent rounds (fresh processes): the median of each figure
        runs = [run_json([exe, "rate", str(iters if batch > 1 else iters // 4), str(batch),
                          str(reps)])[0] for _ in range(rounds)]
        rates[batch] = {k: statistics.median(r[k] for r in runs) for k in runs[0]
                        if k.endswith(("per_s", "ratio"))}
    ir: dict[str, float] = {}
    ir1: dict[str, float] = {}
    if shutil.which("valgrind"):
        n1, n2 = (8_000, 32_000) if a.quick else (16_000, 64_000)
        for mode in ("raw", "shift", "copy"):
            ir[mode] = (callgrind_ir(exe, mode, n2, 32) - callgrind_ir(exe, mode, n1, 32)) / (
                n2 - n1)
            ir1[mode] = (callgrind_ir(exe, mode, n2 // 4, 1) -
                         callgrind_ir(exe, mode, n1 // 4, 1)) / ((n2 - n1) // 4)
    fo = run_json([exe, "failover", "51" if a.quick else "201"])[0]
    state = run_json([exe, "state"])
    py = python_rates(3 if a.quick else 5, 16_000 if a.quick else 64_000)

    r32, r1 = rates[32], rates[1]
    # per-WR times from the raw median and the median ratios (absolute rates drift with
    # the shared machine's load; the interleaved ratios do not)
    ns_raw = 1e9 / r32["raw_wr_per_s"]
    ns_shift, ns_copy = ns_raw / r32["ratio"], ns_raw / r32["copy_ratio"]
    lines = [
        BEGIN,
        "## Native core (`native/`, `shift.impl`)",
        "",
        f"Measured by `python bench/native_bench.py` on {platform.machine()}, "
        f"{os.cpu_count()} cores, {platform.python_implementation()} "
        f"{platform.python_version()}, gcc -O2; {time.strftime('%Y-%m-%d')}. "
        "Workload: 8-byte RDMA WRITEs from A to B on path 1, posted as a chain of 32 "
        "(only the last signaled) or one at a time (each signaled), the wire pumped to "
        "quiescence, the completion polled. Raw = simnic's C API (`sn_post_send`, "
        "`sn_poll_cq`); SHIFT = the same through the failover layer (`shift_post_send`, "
        f"`shift_poll_cq`) with the backup QP pair built and idle: direct (the default, "
        "the WRs to replay are read back from the default QP's send queue at a failure) "
        "and copying (`SHIFT_EP_COPY_POSTS`: the layer copies every WR, as it must over a "
        f"backend without `sq_pending`). Medians of {rounds} rounds (separate processes) of "
        f"{reps} interleaved repetitions each; "
        "the ratios are medians of each repetition's ratio (the absolute rates drift with "
        "the shared machine's load, the ratios much less), and the layer's rates and times "
        "per WR follow from the raw median and those ratios.",
        "",
        "| measure | raw simnic | SHIFT, direct | SHIFT / raw | SHIFT, copying | copying / raw |",
        "|---|---:|---:|---:|---:|---:|",
        f"| message rate, chains of 32 | {fmt_rate(r32['raw_wr_per_s'])} | "
        f"{fmt_rate(r32['raw_wr_per_s'] * r32['ratio'])} | {r32['ratio']:.3f} | "
        f"{fmt_rate(r32['raw_wr_per_s'] * r32['copy_ratio'])} | {r32['copy_ratio']:.3f} |",
        f"| message rate, one WR per post | {fmt_rate(r1['raw_wr_per_s'])} | "
        f"{fmt_rate(r1['raw_wr_per_s'] * r1['ratio'])} | {r1['ratio']:.3f} | "
        f"{fmt_rate(r1['raw_wr_per_s'] * r1['copy_ratio'])} | {r1['copy_ratio']:.3f} |",
        f"| wall time per WR, chains of 32 | {ns_raw:.0f} ns | {ns_shift:.0f} ns | "
        f"+{ns_shift - ns_raw:.1f} ns | {ns_copy:.0f} ns | +{ns_copy - ns_raw:.1f} ns |",
    ]
    if ir:
        lines.append(f"| instructions per WR (callgrind), chains of 32 | {ir['raw']:.0f} | "
                     f"{ir['shift']:.0f} | {ir['shift'] / ir['raw']:.3f} "
                     f"(+{ir['shift'] - ir['raw']:.0f}) | {ir['copy']:.0f} | "
                     f"{ir['copy'] / ir['raw']:.3f} (+{ir['copy'] - ir['raw']:.0f}) |")
        lines.append(f"| instructions per WR (callgrind), one WR per post | {ir1['raw']:.0f} | "
                     f"{ir1['shift']:.0f} | {ir1['shift'] / ir1['raw']:.3f} "
                     f"(+{ir1['shift'] - ir1['raw']:.0f}) | {ir1['copy']:.0f} | "
                     f"{ir1['copy'] / ir1['raw']:.3f} (+{ir1['copy'] - ir1['raw']:.0f}) |")
    lines += [
        "",
        "| failover (NIC 1 of A fails under a stream of WRITE + WRITE_WITH_IMM rounds) | value |",
        "|---|---:|",
        f"| error completion polled → first successful completion from the backup path, wall "
        f"(median of {fo['reps']}) | {fo['median_us']:.1f} µs |",
        f"| the same in wire latencies (lock-step: each step delivers what is in flight) | "
        f"{fo['one_way_latencies']} one-way = {fo['round_trips']:.0f} round trips |",
        "",
        "| backup state per connection | per endpoint (layer) | backup QP in the NIC, per host |",
        "|---|---:|---:|",
    ]
    for s in state:
        lines.append(f"| {s['max_wr']} outstanding WRs | {s['layer_bytes_requester']:,} B "
                     f"({s['pend_entry']} B per tracked send WR) | "
                     f"{s['backup_qp_bytes_per_host']:,} B |")
    lines += [
        "",
        "| Python API (`shift.impl`), same workload | rate |",
        "|---|---:|",
        f"| `prepare` once, then `post_prepared` (one C call per chain of 32) + `pump` + "
        f"`poll` | {fmt_rate(py['prepared'])} |",
        f"| `post_send_many` (WRs checked and encoded in Python on every call) | "
        f"{fmt_rate(py['batched'])} |",
        f"| `post_send` one WR per call | {fmt_rate(py['single'])} |",
        "",
        "What the numbers say:",
        f"- The layer's cost on the failure-free path, chains of 32: "
        f"{100 * (1 - r32['ratio']):.1f}% of the message rate (wall, noisy on a shared "
        "machine) and "
        + (f"{100 * (ir['shift'] / ir['raw'] - 1):.1f}% of the instructions "
           f"({ir['shift'] - ir['raw']:.0f} per WR, the repeatable figure)" if ir else
           "(no valgrind: no instruction count)")
        + ". Goal: at most 3%. "
        + ("Met by both." if r32["ratio"] >= 0.97 and (not ir or ir["shift"] / ir["raw"] <= 1.03)
           else "Met by the instruction count, not by the wall rate (noise: see the "
                "instruction count, which does not depend on the machine's load)."
           if ir and ir["shift"] / ir["raw"] <= 1.03 else "Not met.")
        + " Direct, the layer does not copy a WR: the application's chain goes to the "
          "default QP as it is (the layer counts its notifications, a table look-up per "
          "WR) and its completions come back as they are; the WRs to replay are read back "
          "from the send queue only at a failure, as mlx5 keeps a WQE until its completion "
          "is polled. Copying every WR (the 80-byte WR, its sequence number and "
          "notification count in the layer's ring) costs "
          + (f"{ir['copy'] - ir['raw']:.0f} instructions per WR "
             f"({100 * (ir['copy'] / ir['raw'] - 1):.1f}%)" if ir else "more")
          + ", next to simnic's whole path per WR (post, transmit, execute, ACK, poll) "
          "of under a thousand."
        + " One WR per post (each signaled and polled): "
        + (f"{100 * (ir1['shift'] / ir1['raw'] - 1):.1f}% of the instructions "
           f"(+{ir1['shift'] - ir1['raw']:.0f} per WR) and " if ir1 else "")
        + f"{100 * (1 - r1['ratio']):.1f}% of the wall rate: the layer's two entry points "
          "and the backend's indirect calls are paid per WR instead of per chain."
        ,
        "- Failover takes two round trips from the error completion: the counter goes to "
        "the peer and comes back (one), the replayed WRs and their ACKs (two). The wall "
        "figure is CPU time of the simulator and the layer only: on hardware the error "
        "completion itself arrives after the NIC's retransmission timeouts "
        "(`retry_cnt` × the QP timeout), which dominate.",
        "- Backup state is linear in the queue depth: per outstanding send WR one "
        "pending-ring entry (the WR, its inline payload for replay, sequence and counters), "
        "per receive WR one entry, and a completion buffer; plus the pre-built backup QP.",
        "- The Python API pays for checking and encoding each WR in Python (a few "
        "microseconds); a chain prepared once and posted with one C call runs at "
        f"{100 * py['prepared'] / r32['shift_wr_per_s']:.0f}% of the C rate.",
        END,
    ]
    section = "\n".join(lines) + "\n"
    print(section)
    if not a.no_write:
        text = "# Performance\n\n"
        if os.path.exists(DOC):
            with open(DOC) as f:
                text = f.read()
        if BEGIN in text and END in text:
            text = text[:text.index(BEGIN)] + section.rstrip("\n") + text[text.index(END) +
                                                                          len(END):]
        else:
            text = text.rstrip("\n") + "\n\n" + section
        os.makedirs(os.path.dirname(DOC), exist_ok=True)
        with open(DOC, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
