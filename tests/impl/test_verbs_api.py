"""The verbs-shaped API of shift.impl and libshift (issue 16, item 5): plain SEND beside
SEND_WITH_IMM, a qp_num that stays the application's across a failover, memory regions
that can be deregistered, and the layer's events an application polls."""

from __future__ import annotations

import pytest
from impl_helpers import assert_nccl_delivered, drive, post_round
from shift.impl import Status, WcOpcode, Wr
from shift.impl._native import ffi, lib


def _recv_completions(conn, host="B"):
    return [c for c in conn.completions if c.host == host and c.is_recv]


# ---------------------------------------------------------------- SEND, SEND_IMM ----

def test_a_plain_send_completes_its_receive_without_immediate_data(conn):
    conn.post_recv("B", 1)
    conn.post_recv("B", 2)
    conn.post_send("A", Wr(1, "SEND", value=11))
    conn.post_send("A", Wr(2, "SEND_IMM", value=22, imm=0xBEEF))
    drive(conn)
    plain, with_imm = _recv_completions(conn)
    assert (plain.wr_id, plain.status, plain.opcode) == (1, Status.SUCCESS, WcOpcode.RECV)
    assert plain.wc_flags & lib.SHIFT_WC_WITH_IMM == 0 and plain.imm is None
    assert (with_imm.wr_id, with_imm.status, with_imm.opcode) == (2, Status.SUCCESS,
                                                                  WcOpcode.RECV)
    assert with_imm.wc_flags & lib.SHIFT_WC_WITH_IMM and with_imm.imm == 0xBEEF
    assert [conn.received(r) for r in (1, 2)] == [11, 22]  # both carry their payload
    sends = [c for c in conn.completions if c.host == "A"]
    assert [(c.wr_id, c.opcode) for c in sends] == [(1, WcOpcode.SEND), (2, WcOpcode.SEND)]


def test_a_plain_send_takes_no_immediate_data(conn):
    with pytest.raises(ValueError, match="imm: SEND carries no immediate data"):
        conn.post_send("A", Wr(1, "SEND", value=1, imm=3))
    with pytest.raises(ValueError, match="imm: WRITE carries no immediate data"):
        conn.post_send("A", Wr(1, "WRITE", region=1, imm=3))


@pytest.mark.parametrize("copy_posts", [False, True])
def test_plain_sends_are_notifications_through_a_failover(fabric, copy_posts):
    """Plain SENDs executed at B whose ACKs die with A's NIC: the counter filter skips
    them (B counted them), so each lands exactly once, in order, in its own receive WR;
    a SEND posted after the failover takes the next receive WR (no queue sliding)."""
    conn = fabric.connect("Shift", regions=2, copy_posts=copy_posts, record=True)
    for r in range(1, 5):
        conn.post_recv("B", r)
    for k in range(1, 4):
        conn.post_send("A", Wr(k, "SEND", value=100 + k))
    while conn.transmit("A", 1):
        pass
    while conn.deliver(1, "AtoB"):  # B executes all three; their ACKs are on the wire
        pass
    conn.nic_fail("A", 1)  # ... and lost with A's NIC
    drive(conn)
    assert conn.state("A") == "Fallback"
    conn.post_send("A", Wr(4, "SEND", value=104))
    drive(conn)
    got = _recv_completions(conn)
    assert [(c.wr_id, c.status) for c in got] == [(r, Status.SUCCESS) for r in range(1, 5)]
    assert all(c.imm is None and not c.wc_flags & lib.SHIFT_WC_WITH_IMM for c in got)
    assert [conn.received(r) for r in range(1, 5)] == [101, 102, 103, 104]
    stats = conn.stats("A")
    assert (stats.failovers, stats.skipped, stats.replayed) == (1, 3, 0)
    sends = [c for c in conn.completions if c.host == "A"]
    assert [(c.wr_id, c.status) for c in sends] == [(k, Status.SUCCESS) for k in range(1, 5)]


# ---------------------------------------------------------------- qp_num ----------

def _qp_number(conn, host: str, path: int) -> int:
    """The number of host's simnic QP on path (the backup QP's, for path 2)."""
    qp = ffi.new("sn_qp *")
    assert lib.shift_sim_qp(conn.handle, "AB".index(host), path, qp) == 0
    attr = ffi.new("struct sn_qp_attr *")
    assert lib.sn_query_qp(qp[0], attr) == 0
    return attr.qp_num


@pytest.mark.parametrize("copy_posts", [False, True])
def test_qp_num_stays_the_application_s_across_a_failover_and_back(fabric, copy_posts):
    conn = fabric.connect("Shift", regions=4, copy_posts=copy_posts, record=True)
    qpn = {h: conn.qp_num(h) for h in "AB"}
    assert qpn == {h: _qp_number(conn, h, 1) for h in "AB"}  # the default QPs'
    assert all(_qp_number(conn, h, 2) != qpn[h] for h in "AB")
    post_round(conn, 1)
    drive(conn)
    post_round(conn, 2)
    conn.nic_fail("A", 1)
    drive(conn)
    assert conn.state("A") == "Fallback"
    post_round(conn, 3)  # on the backup QP
    drive(conn)
    conn.nic_recover("A", 1)
    drive(conn)
    post_round(conn, 4)  # the fence, then the default path again
    drive(conn)
    post_round(conn, 5)
    drive(conn)
    assert conn.stats("A").failbacks == 1
    assert_nccl_delivered(conn, 5)
    for h in "AB":
        got = [c for c in conn.completions if c.host == h]
        assert len(got) == 5 and {c.qp_num for c in got} == {qpn[h]}
    assert {h: conn.qp_num(h) for h in "AB"} == qpn


def test_a_refused_wr_s_completion_names_the_application_s_qp(fabric):
    conn = fabric.connect("Shift", regions=2, record=True)
    conn.post_send("A", Wr(1, "FADD", region=1, value=1))
    conn.nic_fail("A", 1)
    drive(conn)
    (c,) = [c for c in conn.completions if c.host == "A"]
    assert c.refused and c.qp_num == conn.qp_num("A") > 0
