"""An application error behind WRs in flight is the application's, not the path's (issue
16, spec: FirstFault and AppError in Failover.tla): no failover on either host, the bad
WR completes with its own status, the WRs around it with flushes, in post order."""

from __future__ import annotations

import pytest
from impl_helpers import drive
from shift.impl import Fabric, RawSendWr, Status, Wr

WRITE = 0
SIGNALED = 2


@pytest.fixture
def conn():
    with Fabric(retries=1) as fab:
        yield fab.connect("Shift", regions=4, record=True)


def _bad(conn, wr_id: int, **kw: int) -> RawSendWr:
    base = {"wr_id": wr_id, "opcode": WRITE, "addr": conn._src.addr, "length": 8,
            "lkey": conn._src.lkey, "remote_addr": conn._dst.addr, "rkey": conn._dst.rkey,
            "send_flags": 0}
    base.update(kw)
    return RawSendWr(**base)


@pytest.mark.parametrize("bad, status", [
    ({"lkey": 0xBAD}, Status.LOC_PROT_ERR),
    ({"rkey": 0xBAD0}, Status.REM_ACCESS_ERR),
])
def test_a_bad_key_behind_a_write_in_flight_starts_no_failover(conn, bad, status):
    """Workloads 11 and 12 of Workloads.tla on the C core: a signaled WRITE in flight, a
    WRITE with a bad key, the notification; A's NIC transmits the first two before any
    ACK comes back."""
    conn.post_recv("B", 1)
    conn.post_send("A", Wr(1, "WRITE", region=1, value=1, signaled=True))
    conn.post_send("A", _bad(conn, 2, **bad))
    conn.post_send("A", Wr(3, "WRITE_IMM"))
    assert conn.transmit("A", 1) and conn.transmit("A", 1)
    drive(conn)
    seen = [(c.wr_id, c.status) for c in conn.completions if c.host == "A"]
    assert conn.stats("A").failovers == 0
    assert conn.host_state("A").send_state == "Error"
    if status == Status.LOC_PROT_ERR:
        # the send queue completes in post order: WR 1, in flight, flushed first; the
        # layer read past it to the QP's first fault, WR 2's own status
        assert seen == [(1, Status.WR_FLUSH_ERR), (2, status), (3, Status.WR_FLUSH_ERR)]
    else:
        # the NAK acknowledges WR 1; WR 2 fails with its own status
        assert seen == [(1, Status.SUCCESS), (2, status), (3, Status.WR_FLUSH_ERR)]
    assert conn.read("B", 1) == 1  # WR 1's value, never WR 2's
    # The peer is told (F6b, spec: PeerAppError): its QP pair is failed too, as plain
    # RC's would be. Its receive WR comes back flushed, and its layer is in no failover
    # (with a bad rkey its own QP failed first, and it may have started one on the
    # flushes it polled: the word ends it).
    b = conn.host_state("B")
    assert (b.send_state, b.recv_state) == ("Error", "Default")
    assert [(c.wr_id, c.status) for c in conn.completions if c.host == "B"] == [
        (1, Status.WR_FLUSH_ERR)]
    if status == Status.LOC_PROT_ERR:
        assert conn.stats("B").failovers == 0  # B's QP was healthy: nothing to fail over
    # each host's events say whose error it was
    assert _events(conn, "A") == [("APP_ERROR", 1, status.name)]
    assert _events(conn, "B")[-1:] == [("PEER_APP_ERROR", 2, "SUCCESS")]


def test_the_peer_that_failed_over_on_its_flushes_returns_to_normal(conn):
    """F6b on the C core: a bad rkey fails B's QP (B NAKs it), and B's layer, which reads
    only flushes, fails over before A's word arrives; A, dead of its application's
    error, answers B's counter with that word; B's failover ends: no replay, its receive
    WR back flushed, its layer out of Fallback."""
    conn.post_recv("B", 1)
    conn.post_send("A", Wr(1, "WRITE", region=1, value=1, signaled=True))
    conn.post_send("A", _bad(conn, 2, rkey=0xBAD0))
    assert conn.transmit("A", 1) and conn.transmit("A", 1)
    conn.deliver(1, "AtoB")  # WR 1 executes
    conn.deliver(1, "AtoB")  # WR 2 NAKed: B's QP 1 to ERR, its receive WR flushed
    assert conn.poll("B") == []  # B's layer takes the flush for a path failure ...
    assert conn.host_state("B").recv_state == "Moving"
    conn.progress("B")  # ... and sends its counter, asking
    assert conn.host_state("B").recv_state == "Fallback"
    drive(conn)
    assert [(c.wr_id, c.status) for c in conn.completions if c.host == "A"] == [
        (1, Status.SUCCESS), (2, Status.REM_ACCESS_ERR)]
    b = conn.host_state("B")
    assert conn.stats("B").failovers == 1
    assert (b.send_state, b.recv_state) == ("Error", "Default")
    assert [(c.wr_id, c.status) for c in conn.completions if c.host == "B"] == [
        (1, Status.WR_FLUSH_ERR)]
    # B's failover started on its flush and ended at A's word, never finished
    assert _events(conn, "B") == [("PATH_DOWN", 1, "WR_FLUSH_ERR"),
                                  ("FAILOVER_STARTED", 2, "WR_FLUSH_ERR"),
                                  ("PEER_APP_ERROR", 2, "SUCCESS")]
    assert _events(conn, "A") == [("APP_ERROR", 1, "REM_ACCESS_ERR")]


def _events(conn, host: str) -> list[tuple[str, int, str]]:
    return [(e.type.name, e.path, e.status.name) for e in conn.events(host)]


def test_a_path_failure_behind_a_flush_still_fails_over(conn):
    """Reading past a flush does not mistake a path failure for an application error:
    a NIC that dies under WRs in flight leaves only flushes, and SHIFT fails over."""
    conn.post_recv("B", 1)
    conn.post_send("A", Wr(1, "WRITE", region=1, value=1, signaled=True))
    conn.post_send("A", Wr(2, "WRITE_IMM"))
    assert conn.transmit("A", 1) and conn.transmit("A", 1)
    conn.nic_fail("A", 1)
    drive(conn)
    assert conn.stats("A").failovers == 1
    assert [(c.wr_id, c.status) for c in conn.completions if c.host == "A"] == [
        (1, Status.SUCCESS), (2, Status.SUCCESS)]
