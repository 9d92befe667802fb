"""ShiftCounted in the C core (SHIFT_DESIGN_SHIFT_COUNTED, native/src/kept.c): the
notifications completed on the default path are kept until a counter of the peer covers
them (docs/findings.md, F7), at most the last max_send_wr of them; what that costs is in
the statistics. The replay itself is checked against the model by the differential suite
and tests/test_hand_traces.py (F7's run under ShiftCounted)."""

from __future__ import annotations

from impl_helpers import drive
from shift.impl import Fabric, Wr


def _round_trips(conn, first: int, n: int) -> None:
    """n SENDs of A, each into a receive WR of B, completed and polled on both hosts."""
    for k in range(first, first + n):
        conn.post_recv("B", k)
        conn.post_send("A", Wr(k, "SEND_IMM", region=1, value=k))
    drive(conn)


def test_completed_notifications_are_kept_up_to_the_send_queue_size() -> None:
    with Fabric() as fab:
        conn = fab.connect("ShiftCounted", max_wr=4, record=True)
        _round_trips(conn, 1, 3)
        assert (conn.stats("A").kept_notes, conn.stats("A").notes_forgotten) == (3, 0)
        _round_trips(conn, 4, 3)
        # six completed, four kept: the two oldest forgotten (a failover cannot replay
        # them), counted so that the loss is never silent
        assert (conn.stats("A").kept_notes, conn.stats("A").notes_forgotten) == (4, 2)
        # B keeps none: it sent nothing
        assert conn.stats("B").kept_notes == 0
        assert [c.wr_id for c in conn.completions if c.host == "B"] == [1, 2, 3, 4, 5, 6]


def test_the_peer_counter_of_a_failover_releases_the_kept_notifications() -> None:
    """A failover's counter exchange: B's counter covers every SEND B's layer counted,
    so A forgets them; nothing is replayed twice into B's receive WRs."""
    with Fabric() as fab:
        conn = fab.connect("ShiftCounted", max_wr=8, record=True)
        _round_trips(conn, 1, 3)
        assert conn.stats("A").kept_notes == 3
        conn.nic_fail("A", 1)
        _round_trips(conn, 4, 1)  # a SEND on the dead path starts the failover
        a = conn.stats("A")
        assert a.failovers == 1 and a.kept_notes == 0
        assert [c.wr_id for c in conn.completions if c.host == "B"] == [1, 2, 3, 4]
        assert [(c.wr_id, c.status.name) for c in conn.completions if c.host == "A"] == [
            (k, "SUCCESS") for k in range(1, 5)]


def test_keeping_costs_memory_that_shift_prefix_does_not_pay() -> None:
    with Fabric() as fab:
        counted = fab.connect("ShiftCounted", max_wr=64).stats("A").backup_state_bytes
        prefix = fab.connect("ShiftPrefix", max_wr=64).stats("A").backup_state_bytes
    assert counted > prefix
