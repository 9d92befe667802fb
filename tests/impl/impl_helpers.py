"""Helpers for the shift.impl tests: an NCCL Simple-protocol workload and a driver that
runs wire, layers and applications until nothing moves (timers fire only when stuck);
for the library's guide, its example blocks and a C compiler."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from shift.impl import Connection, Wr

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "library.md"

# The idealised RC NIC (Fabric's defaults are RC as hardware runs it): a receive
# completion is in host memory with its ACK (no WriteCqe), a dead NIC flushes its WRs at
# once (no asynchronous event to read first), a request that finds no receive WR is
# dropped for the retransmission timer (no RNR NAK retried for ever). For the tests whose
# hand-placed steps or whose assertions rely on it; among them SHIFT's promises through a
# receiver NIC's death, which hold only there (on hardware's RC an ACKed notification can
# die with the NIC: docs/findings.md, F7).
IDEAL_RC = {"rnr_nak": False, "ack_before_cqe": False, "device_fatal": False}

# One step of a fixed round-robin scheduler: the order in which a test interleaves
# events before it injects a fault.
SCHEDULE = (
    ("Transmit", "A", 1), ("Deliver", 1, "AtoB"), ("Deliver", 1, "BtoA"), ("PollCq", "A"),
    ("PollCq", "B"), ("Progress", "A"), ("Progress", "B"), ("Transmit", "A", 2),
    ("Deliver", 2, "AtoB"), ("Deliver", 2, "BtoA"),
)


def post_round(conn: Connection, k: int, value: int | None = None) -> None:
    """NCCL Simple round k: B posts receive k; A WRITEs region r (unsignaled), then a
    signaled WRITE_WITH_IMM (WR id 2k) telling B the data is there."""
    conn.post_recv("B", k)
    r = (k - 1) % conn.regions + 1
    conn.post_send("A", Wr(2 * k - 1, "WRITE", region=r, value=100 + k if value is None
                           else value, signaled=False))
    conn.post_send("A", Wr(2 * k, "WRITE_IMM"))


def drive(conn: Connection, *, timeouts: bool = True, nic_events: bool = True,
          limit: int = 400) -> None:
    """Run until quiet: the wire and the NICs writing their receive completions, each
    layer reading its NICs' events (unless not nic_events: a host that never reads them),
    both applications poll everything, layers' progress; when stuck, the retransmission
    timers of both hosts' NICs (and then the layers') fire."""
    for _ in range(limit):
        moved = conn.pump() > 0
        moved |= conn.write_cqes() > 0
        for h in "AB":
            moved |= nic_events and conn.fatal_events(h) > 0
            before = conn.host_state(h)
            moved |= bool(conn.poll(h)) or conn.host_state(h) != before
        for h in "AB":
            while conn.progress(h) != "none":
                moved = True
        if not moved and timeouts:
            for h, p in (("A", 1), ("A", 2), ("B", 1), ("B", 2)):
                moved |= conn.timeout(h, p)
        if not moved:
            return
    raise AssertionError("the run did not settle")


def step(conn: Connection, i: int) -> None:
    conn.apply(SCHEDULE[i % len(SCHEDULE)])


def notes(conn: Connection) -> list:
    return [r for r in conn.observe().rcv_seen if r.status == "SUCCESS"]


def assert_nccl_delivered(conn: Connection, rounds: int) -> None:
    """Every notification once, in order, each in its own receive WR, with the data of
    its round in place when the receiver took it; the sender saw every WRITE_WITH_IMM
    succeed, in order."""
    got = notes(conn)
    assert [n.wr for n in got] == [2 * k for k in range(1, rounds + 1)]
    assert [n.recv for n in got] == list(range(1, rounds + 1))
    for k, n in enumerate(got, start=1):
        r = (k - 1) % conn.regions + 1
        assert n.mem[r - 1] == 100 + k, f"notification {k}: region {r} holds {n.mem[r - 1]}"
    snd = conn.observe().snd_seen
    assert [s.wr for s in snd] == [2 * k for k in range(1, rounds + 1)]
    assert all(s.status == "SUCCESS" for s in snd)


def c_compiler() -> str:
    """A C compiler: found, or installed from Debian's packages when root; never a skip."""
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    if shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(["apt-get", "install", "-y", "-q", "gcc"], check=False,
                       capture_output=True, timeout=600)
        if shutil.which("gcc"):
            return "gcc"
    pytest.fail("no C compiler found (cc/gcc/clang) and none could be installed")


def guide_block(first_line: str) -> str:
    """The fenced block of docs/library.md that starts with first_line."""
    blocks = re.findall(r"^```\w*\n(.*?)^```", GUIDE.read_text(), re.S | re.M)
    found = [b for b in blocks if b.startswith(first_line)]
    assert len(found) == 1, f"docs/library.md: {len(found)} blocks start with {first_line!r}"
    return found[0]
