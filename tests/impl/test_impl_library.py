"""The library a transport developer imports (issue 16): a checked poll loses no
completion, a refusal is visible on each WR it failed, statistics are per host, the
history (`record`) is off unless asked for, and completions speak verbs' opcodes."""

from __future__ import annotations

import pytest
from impl_helpers import IDEAL_RC, drive, post_round
from shift.impl import CompletionError, Connection, Fabric, Status, WcOpcode, Wr


@pytest.fixture
def plain(fabric: Fabric) -> Connection:
    """A connection as an application opens it: no history kept."""
    return fabric.connect("Shift", regions=4)


def _atomic_in_flight_then_nic_failure(conn: Connection) -> None:
    """WRITE 1 completes (not yet polled); FADD 2 and WRITE_IMM 3 are in flight when A's
    default NIC dies: A's next poll finds the flush, and the atomic makes it refuse."""
    conn.post_send("A", Wr(1, "WRITE", region=1, value=5))
    conn.pump()
    conn.post_recv("B", 1)
    conn.post_send("A", Wr(2, "FADD", region=2, value=1))
    conn.post_send("A", Wr(3, "WRITE_IMM"))
    conn.nic_fail("A", 1)


@pytest.mark.ideal_rc  # polls the dead NIC's flushes at once
def test_a_checked_poll_raises_with_every_completion_it_took(plain: Connection) -> None:
    _atomic_in_flight_then_nic_failure(plain)
    with pytest.raises(CompletionError) as e:
        plain.poll("A", check=True)
    taken = [(c.wr_id, c.status, c.refused) for c in e.value.completions]
    assert taken == [(1, Status.SUCCESS, False), (2, Status.WR_FLUSH_ERR, True),
                     (3, Status.WR_FLUSH_ERR, True)]
    assert e.value.completion.wr_id == 2 and e.value.errors == e.value.completions[1:]
    assert "WR 2: WR_FLUSH_ERR, refused" in str(e.value) and "3 completions" in str(e.value)
    assert plain.poll("A", check=True) == []  # nothing was left behind, nothing repeats


@pytest.mark.ideal_rc  # B's completions with their ACKs
def test_a_checked_poll_returns_what_it_took_when_all_succeeded(plain: Connection) -> None:
    for k in (1, 2):
        post_round(plain, k)
    plain.pump()
    got = plain.poll("A", check=True) + plain.poll("B", check=True)
    assert [(c.host, c.wr_id, c.opcode) for c in got] == [
        ("A", 2, WcOpcode.RDMA_WRITE), ("A", 4, WcOpcode.RDMA_WRITE),
        ("B", 1, WcOpcode.RECV_RDMA_WITH_IMM), ("B", 2, WcOpcode.RECV_RDMA_WITH_IMM)]
    assert [c.imm for c in got[2:]] == [2, 4] and all(c.is_recv for c in got[2:])
    assert all(c.qp_num > 0 for c in got)


@pytest.mark.ideal_rc  # polls the dead NIC's flushes at once
def test_a_checked_single_poll_carries_its_completion(plain: Connection) -> None:
    _atomic_in_flight_then_nic_failure(plain)
    assert plain.poll_cq("A", check=True).wr_id == 1  # the success polled before
    assert plain.poll_cq("A", check=True) is None  # the flush: a failover, refused
    with pytest.raises(CompletionError) as e:
        plain.poll_cq("A", check=True)
    assert e.value.completions == [e.value.completion] and e.value.completion.refused


def test_refused_wrs_are_flagged_and_later_flushes_are_not(plain: Connection) -> None:
    _atomic_in_flight_then_nic_failure(plain)
    drive(plain)
    plain.post_send("A", Wr(4, "WRITE", region=1, value=9))  # send side in Error: flushed
    got = plain.poll("A")
    assert [(c.wr_id, c.status, c.refused) for c in got] == [(4, Status.WR_FLUSH_ERR, False)]
    assert plain.stats("A").refused == 2 and plain.stats("B").refused == 0


@pytest.mark.ideal_rc  # polls the dead NIC's flushes at once
def test_an_ordinary_flush_is_not_a_refusal(fabric: Fabric) -> None:
    conn = fabric.connect("NoFailover", regions=4)
    post_round(conn, 1)
    conn.nic_fail("A", 1)
    conn.pump()
    with pytest.raises(CompletionError) as e:
        conn.poll("A", check=True)
    assert [(c.status, c.refused) for c in e.value.completions] == [
        (Status.WR_FLUSH_ERR, False), (Status.WR_FLUSH_ERR, False)]


def test_one_failover_counts_once_per_host(plain: Connection) -> None:
    post_round(plain, 1)
    plain.nic_fail("A", 1)
    post_round(plain, 2)
    drive(plain)
    stats = plain.stats_by_host()
    assert {h: (s.failovers, s.replayed) for h, s in stats.items()} == {
        "A": (1, 4), "B": (1, 0)}
    assert stats["A"] == plain.stats("A")
    with pytest.raises(ValueError, match="host"):
        plain.stats("C")


def test_the_history_is_kept_only_when_asked(plain: Connection) -> None:
    post_round(plain, 1)
    drive(plain)
    for what in ("observe", "completions"):
        with pytest.raises(RuntimeError, match=r"record=True"):
            getattr(plain, what)() if what == "observe" else plain.completions
    with pytest.raises(TypeError):
        plain._fabric.connect("Shift", record="yes")  # type: ignore[arg-type]


def test_a_fabric_runs_rc_as_hardware_does_unless_asked_otherwise() -> None:
    """Fabric()'s NICs are the spec's defaults (issue 17): B's receive completion reaches
    memory when its NIC writes it, a SEND without a receive WR is RNR-NAKed for ever, a
    dead NIC completes nothing until its host's layer reads its event. IDEAL_RC's flags
    give the idealised NIC: none of the three."""
    for flags, ideal in (({}, False), (IDEAL_RC, True)):
        with Fabric(**flags) as fab:
            conn = fab.connect("NoFailover", regions=2)
            conn.post_recv("B", 1)
            conn.post_send("A", Wr(1, "SEND_IMM"))
            conn.pump()
            assert [c.wr_id for c in conn.poll("A")] == [1]
            if not ideal:
                assert conn.poll("B") == [] and conn.write_cqes() == 1
            assert [c.wr_id for c in conn.poll("B")] == [1] and conn.write_cqes() == 0
            conn.post_send("A", Wr(2, "SEND_IMM"))  # no receive WR
            assert (conn.pump(1000) == 1000) is not ideal  # RNR-NAKed again and again
            conn.nic_fail("A", 1)
            if not ideal:
                assert conn.poll("A") == [] and conn.fatal_events("A") == 1
            assert [(c.wr_id, c.status) for c in conn.poll("A")] == [(2, Status.WR_FLUSH_ERR)]
            assert conn.fatal_events("A") == conn.fatal_events("B") == 0
