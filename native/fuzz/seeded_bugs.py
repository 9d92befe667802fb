"""The fuzz target's kill table: each defect the fuzzer found, put back into a scratch copy
of native/, must be caught (a crash, a sanitizer report, a failed check or a hang): by the
committed regression inputs (what CI replays), and by fuzzing from the corpus within a
time budget. With --save, the first input fuzzing catches it with is kept in
native/fuzz/regressions/ under the defect's name.

    python3 native/fuzz/seeded_bugs.py [--seconds 300] [--only NAME ...] [--save]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

NATIVE = Path(__file__).resolve().parents[1]
CORPUS = NATIVE / "fuzz" / "corpus"
REGRESSIONS = NATIVE / "fuzz" / "regressions"


@dataclass(frozen=True)
class Mutant:
    name: str
    what: str
    file: str
    fixed: str
    buggy: str


MUTANTS = [
    Mutant("owned-qp-destroyed",
           "a connection's QPs are the caller's: sn_destroy_qp frees one (use after free)",
           "src/simnic_qp.c", "return (*out)->owned ? EBUSY : 0;", "return 0;"),
    Mutant("direct-cycle-hangs", "a cyclic chain in direct mode is walked without bound",
           "src/datapath.c", "for (; w && n <= e->pcap; w = w->next, n++) {",
           "for (; w; w = w->next, n++) {"),
    Mutant("err-recv-cycle-hangs", "a cyclic receive chain on a QP in ERR never fills it",
           "src/simnic_qp.c", "qp->rq_tail - qp->rq_head + flushed >= qp->rq_cap",
           "qp->rq_tail - qp->rq_head >= qp->rq_cap"),
    Mutant("sq-notes-believed", "the notifications the send queue reports are believed",
           "src/pending.c",
           "uint64_t done = e->notes_posted > nnotes ? e->notes_posted - nnotes : 0;",
           "uint64_t done = e->notes_posted - nnotes;"),
    Mutant("sq-wr-unchecked", "a WR read back from the send queue is not checked",
           "src/pending.c",
           "        if (shift_send_wr_check(&w, SHIFT_MAX_INLINE))\n            break;",
           "        if (0)\n            break;"),
    Mutant("poll-count-believed", "a poll count beyond what was asked is believed",
           "src/layer.h", "    return r > n ? n : r;", "    return r;"),
    Mutant("owned-cq-polled",
           "a connection's CQ, reached through a forged handle, is polled by the caller: "
           "the layer's completions are stolen",
           "src/simnic_fabric.c",
           "    if (cq->owned) /* (its completions are the layer's: a poll here would steal "
           "them) */",
           "    if (0) /* seeded */"),
    Mutant("fatal-err-qp-flushes",
           "a QP already in ERR when its NIC dies in fatal error still flushes each later "
           "post, which the layer, having read the event, flushes too: a duplicate",
           "src/simnic_wire.c",
           "        if (f->attr.device_fatal && qp->state != SHIFT_QPS_RESET) {",
           "        if (f->attr.device_fatal && qp->state != SHIFT_QPS_RESET &&\n"
           "            qp->state != SHIFT_QPS_ERR) {"),
    Mutant("negative-counter", "a negative (or any) new receive counter from the peer is taken",
           "src/failover.c",
           "    return m->count >= 0 && m->count >= e->peer_ctr &&\n"
           "           (!is_shift(e) || (uint64_t)m->count <= e->notes_posted);",
           "    return 1;"),
]


def _build(tree: Path) -> Path:
    r = subprocess.run(["make", "-s", "-C", str(tree), "build/fuzz/fuzz_api"],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"build failed in {tree}:\n{r.stderr[-2000:]}")
    return tree / "build" / "fuzz" / "fuzz_api"


def _replay(exe: Path) -> str | None:
    """The first regression input that catches the mutant, if any."""
    for reg in sorted(REGRESSIONS.iterdir()):
        try:
            r = subprocess.run([str(exe), "-timeout=5", str(reg)], capture_output=True,
                               text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return reg.name
        if r.returncode != 0:
            return reg.name
    return None


def _hunt(exe: Path, seconds: int, work: Path, corpus: Path) -> Path | None:
    """Fuzz from the corpus until something is caught; the input that caught it."""
    work.mkdir()
    art = work / "artifacts"
    art.mkdir()
    subprocess.run([str(exe), f"-max_total_time={seconds}", "-timeout=5",
                    f"-artifact_prefix={art}/", str(work), str(corpus)],
                   capture_output=True, text=True, timeout=seconds + 300)
    found = sorted(art.iterdir())
    return found[0] if found else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=300, help="budget per mutant")
    ap.add_argument("--only", nargs="*", help="mutant names")
    ap.add_argument("--save", action="store_true", help="keep each catching input")
    ap.add_argument("--corpus", type=Path, default=CORPUS,
                    help="where fuzzing starts (an empty directory: from nothing)")
    args = ap.parse_args()
    rows = []
    for m in MUTANTS:
        if args.only and m.name not in args.only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "native"
            shutil.copytree(NATIVE, tree, ignore=shutil.ignore_patterns("build"))
            src = tree / m.file
            text = src.read_text()
            if text.count(m.fixed) != 1:
                sys.exit(f"{m.name}: the fixed code is not in {m.file} exactly once")
            src.write_text(text.replace(m.fixed, m.buggy))
            exe = _build(tree)
            replayed = _replay(exe)
            t0 = time.monotonic()
            hit = _hunt(exe, args.seconds, Path(tmp) / "work", args.corpus)
            took = time.monotonic() - t0
            verdict = f"killed in {took:.0f} s ({hit.name.split('-')[0]})" if hit else "SURVIVED"
            by_reg = f"by `{replayed}`" if replayed else "SURVIVED"
            rows.append((m.name, m.what, by_reg, verdict))
            print(f"{m.name:22} regression inputs: {by_reg:32} fuzzing: {verdict}", flush=True)
            if hit and args.save:
                REGRESSIONS.mkdir(exist_ok=True)
                shutil.copy(hit, REGRESSIONS / m.name)
    print("\n| defect put back | the regression inputs | fuzzing from the corpus |")
    print("|---|---|---|")
    for name, what, by_reg, verdict in rows:
        print(f"| `{name}`: {what} | {by_reg} | {verdict} |")
    return 0 if all("SURVIVED" not in r[2] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
