"""A control message is input from the network (issue 15, item 7): one the peer's layer
could not have sent - truncated, extended, of an unknown kind, stale, or carrying a
receive counter above the notifications this endpoint posted - is rejected and counted
(`Stats.ctl_rejected`), never acted on; the connection then completes its workload.
native/tests/driver.c feeds 110,000 random and mutated ones under ASan/UBSan."""

from __future__ import annotations

import struct

import pytest
from impl_helpers import assert_nccl_delivered, drive, post_round
from shift.impl import Connection, Fabric

MAGIC, COUNTER, FAILBACK = 0x53484654, 1, 2


def ctl(kind: int, seq: int, count: int, want_reply: int = 0) -> bytes:
    """A control message as src/layer.h lays it out (native byte order)."""
    return struct.pack("=IBBHIIq", MAGIC, kind, want_reply, 0, seq, 0, count)


@pytest.fixture
def conn():
    with Fabric(retries=1) as fab:
        yield fab.connect("Shift", regions=4, record=True)


def _failed_over(conn: Connection) -> None:
    """Two rounds delivered, A's default NIC dies, a third round goes by the backup path:
    both endpoints took the peer's first counter (number 1)."""
    for k in (1, 2):
        post_round(conn, k)
    drive(conn)
    conn.nic_fail("A", 1)
    post_round(conn, 3)
    drive(conn)
    a = conn.host_state("A")
    assert conn.stats("A").failovers == conn.stats("B").failovers == 1
    assert a.send_state == "Fallback"
    assert a.sends_posted == 3 and a.peer_ctr == 2  # B had counted rounds 1 and 2


def _rejected(conn: Connection, host: str, path: int, msg: bytes) -> None:
    """msg is rejected: counted once, and nothing else of the host's state moves."""
    before, stats = conn.host_state(host), conn.stats(host)
    assert conn.ctl_input(host, path, msg) is False
    after = conn.stats(host)
    assert after.ctl_rejected == stats.ctl_rejected + 1
    assert after.ctl_received == stats.ctl_received
    assert conn.host_state(host) == before


def test_out_of_range_and_truncated_counters_are_rejected_and_counted(conn):
    _failed_over(conn)
    a = conn.host_state("A")
    assert all(s.ctl_rejected == 0 for s in conn.stats_by_host().values())  # the peers' own
    # a new counter (number 2) above the 3 notifications A ever posted
    _rejected(conn, "A", 2, ctl(COUNTER, 2, a.sends_posted + 1, want_reply=1))
    # B posted no notification: A cannot have received one
    _rejected(conn, "B", 2, ctl(COUNTER, 2, 1))
    # A's last counter from B, truncated, then extended by a byte
    good = ctl(COUNTER, 1, a.peer_ctr)
    _rejected(conn, "A", 2, good[:-1])
    _rejected(conn, "A", 2, good + b"\0")
    _rejected(conn, "A", 2, b"")
    # negative, an unknown kind, the wrong path, stale (number 0), a shrinking counter
    _rejected(conn, "A", 2, ctl(COUNTER, 2, -1))
    _rejected(conn, "A", 2, ctl(7, 2, a.peer_ctr))
    _rejected(conn, "A", 1, ctl(COUNTER, 2, a.peer_ctr))
    _rejected(conn, "A", 2, ctl(COUNTER, 0, a.peer_ctr))
    _rejected(conn, "A", 2, ctl(COUNTER, 2, a.peer_ctr - 1))
    _rejected(conn, "B", 2, ctl(FAILBACK, 0, 0))  # a fail-back notice on the backup path
    assert conn.stats("A").ctl_rejected == 9
    assert conn.stats("B").ctl_rejected == 2
    # the peer's last counter again, no answer asked: taken, and changes nothing
    received = conn.stats("A").ctl_received
    assert conn.ctl_input("A", 2, good) is True
    assert conn.stats("A").ctl_received == received + 1
    assert conn.host_state("A") == a
    # the connection goes on: fail-back, and every round delivered once, in order
    conn.nic_recover("A", 1)
    drive(conn)
    for k in range(4, 8):
        post_round(conn, k)
        drive(conn)
    assert_nccl_delivered(conn, 7)
    assert conn.stats("A").failbacks == 1
    assert conn.observe().layer == {"A": "Default", "B": "Default"}


def test_ctl_input_checks_its_arguments(conn):
    with pytest.raises(TypeError):
        conn.ctl_input("A", 2, "not bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        conn.ctl_input("A", 3, ctl(COUNTER, 1, 0))
    assert conn.stats("A").ctl_rejected == conn.stats("B").ctl_rejected == 0
