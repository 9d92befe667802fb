"""The verbs-shaped API of shift.impl and libshift (issue 16, item 5): plain SEND beside
SEND_WITH_IMM, a qp_num that stays the application's across a failover, memory regions
that can be deregistered, and the layer's events an application polls."""

from __future__ import annotations

import errno

import pytest
from impl_helpers import assert_nccl_delivered, drive, post_round
from shift.impl import (
    ClosedError,
    CompletionError,
    EventType,
    Fabric,
    RawSendWr,
    Status,
    WcOpcode,
    Wr,
)
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


# ---------------------------------------------------------------- deregistration ----

def _keys(mr):
    return ffi.new("struct shift_mr_keys *", {
        "lkey": mr.lkey, "rkey": mr.rkey, "lkey_backup": mr.lkey_backup,
        "rkey_backup": mr.rkey_backup})


def test_a_deregistered_region_can_be_neither_used_nor_deregistered_again(conn):
    mr = conn.register("A", 16)
    mr.write(0, b"x" * 8)
    mr.deregister()
    assert not mr.registered
    for call in (lambda: mr.read(), lambda: mr.write(0, b"y"), mr.deregister):
        with pytest.raises(ClosedError, match="is deregistered"):
            call()
    # the C entry point: the same keys again, a forged key, NULL, a bad host
    assert lib.shift_sim_dereg_mr(conn.handle, 0, _keys(mr)) == errno.EINVAL
    other = conn.register("A", 16)
    forged = _keys(other)
    forged.rkey_backup ^= 1
    assert lib.shift_sim_dereg_mr(conn.handle, 0, forged) == errno.EINVAL
    assert lib.shift_sim_dereg_mr(conn.handle, 0, ffi.NULL) == errno.EINVAL
    assert lib.shift_sim_dereg_mr(conn.handle, 2, _keys(other)) == errno.EINVAL
    assert lib.shift_sim_dereg_mr(conn.handle, 1, _keys(other)) == errno.EINVAL  # A's
    other.deregister()  # unharmed by the bad calls


def _raw_write(conn, wr_id, src, dst_addr, dst_rkey):
    return RawSendWr(wr_id, lib.SHIFT_WR_RDMA_WRITE, addr=src.addr, length=8, lkey=src.lkey,
                     remote_addr=dst_addr, rkey=dst_rkey)


@pytest.mark.parametrize("copy_posts", [False, True])
def test_a_write_from_a_deregistered_region_is_loc_prot_err_not_a_failover(fabric,
                                                                           copy_posts):
    conn = fabric.connect("Shift", regions=2, copy_posts=copy_posts, record=True)
    src, dst = conn.register("A", 8), conn.register("B", 8)
    src.write(0, (7).to_bytes(8, "little"))
    conn.post_send("A", _raw_write(conn, 1, src, dst.addr, dst.rkey))
    drive(conn)
    assert dst.read() == (7).to_bytes(8, "little")
    src.deregister()
    conn.post_send("A", _raw_write(conn, 2, src, dst.addr + 0, dst.rkey))
    conn.pump()
    with pytest.raises(CompletionError) as e:
        conn.poll("A", check=True)
    assert (e.value.completion.wr_id, e.value.status_name) == (2, "LOC_PROT_ERR")
    assert not e.value.completion.refused
    drive(conn)
    assert [s.failovers for s in conn.stats_by_host().values()] == [0, 0]
    assert conn.state("A") == "Error"  # the application's error ends the connection
    # ... and is no path's failure: its own event, and the peer's, no failover's
    assert [(e.type.name, e.path, e.status.name) for e in conn.events("A")] == [
        ("APP_ERROR", 1, "LOC_PROT_ERR")]
    assert [e.type.name for e in conn.events("B")] == ["PEER_APP_ERROR"]


def test_a_write_to_a_region_the_peer_deregistered_is_rem_access_err(conn):
    src, dst = conn.register("A", 8), conn.register("B", 8)
    dst.deregister()
    conn.post_send("A", _raw_write(conn, 1, src, dst.addr, dst.rkey))
    conn.pump()
    (c,) = conn.poll("A")
    assert (c.wr_id, c.status) == (1, Status.REM_ACCESS_ERR)
    assert conn.stats("A").failovers == 0 and conn.state("A") == "Error"


# ---------------------------------------------------------------- events ------------

def _events(conn, host):
    return [(e.type.name, e.path, e.status.name, e.wrs) for e in conn.events(host)]


@pytest.mark.parametrize("copy_posts", [False, True])
@pytest.mark.parametrize("fault, repair, status", [
    (("NicFail", "A", 1), ("NicRecover", "A", 1), "WR_FLUSH_ERR"),
    (("LinkDown", 1), ("LinkUp", 1), "RETRY_EXC_ERR"),
])
def test_a_failover_and_fail_back_in_events(fabric, copy_posts, fault, repair, status):
    """A's layer sees the default path fail, fails over, replays, fails back; B's is
    woken by A's counter (it saw no failure) and moves its receive WRs back at A's
    notice. Each host's events say so, in order, with the paths concerned."""
    conn = fabric.connect("Shift", regions=4, copy_posts=copy_posts, record=True)
    post_round(conn, 1)
    drive(conn)
    assert _events(conn, "A") == _events(conn, "B") == []  # a failure-free round
    post_round(conn, 2)
    conn.apply(fault)
    drive(conn)
    replayed = conn.stats("A").replayed
    assert replayed == 2  # round 2's WRITE and WRITE_WITH_IMM
    assert _events(conn, "A") == [
        ("PATH_DOWN", 1, status, 0), ("FAILOVER_STARTED", 2, status, 0),
        ("FAILOVER_FINISHED", 2, "SUCCESS", replayed)]
    assert _events(conn, "B") == [
        ("FAILOVER_STARTED", 2, "SUCCESS", 0), ("FAILOVER_FINISHED", 2, "SUCCESS", 0)]
    conn.apply(repair)
    drive(conn)  # reconnect and probe: the layer waits for the fence
    post_round(conn, 3)  # its WRITE_WITH_IMM is the fence
    drive(conn)
    assert _events(conn, "A") == [("FAIL_BACK", 1, "SUCCESS", 0)]
    assert _events(conn, "B") == [("RECV_FAIL_BACK", 1, "SUCCESS", 0)]
    assert_nccl_delivered(conn, 3)
    assert conn.poll_event("A") is None and conn.poll_event("B") is None


def test_a_refused_failover_in_events(fabric):
    conn = fabric.connect("Shift", regions=2, record=True)
    conn.post_send("A", Wr(1, "WRITE", region=1, value=3, signaled=False))
    conn.post_send("A", Wr(2, "FADD", region=2, value=1))
    conn.nic_fail("A", 1)
    drive(conn)
    refused = conn.stats("A").refused
    assert refused == 2
    assert _events(conn, "A") == [
        ("PATH_DOWN", 1, "WR_FLUSH_ERR", 0), ("FAILOVER_STARTED", 2, "WR_FLUSH_ERR", 0),
        ("FAILOVER_REFUSED", 1, "WR_FLUSH_ERR", refused)]
    assert conn.state("A") == "Error"


def test_the_backup_path_failing_too_in_events(fabric):
    conn = fabric.connect("Shift", regions=4, fail_back=False, record=True)
    post_round(conn, 1)
    conn.nic_fail("A", 1)
    drive(conn)
    assert [e[0] for e in _events(conn, "A")] == [
        "PATH_DOWN", "FAILOVER_STARTED", "FAILOVER_FINISHED"]
    post_round(conn, 2)
    conn.nic_fail("A", 2)  # no third path: the error reaches the application
    drive(conn)
    assert _events(conn, "A") == [("PATH_DOWN", 2, "WR_FLUSH_ERR", 0)]
    assert conn.host_state("A").send_state == "Error"


@pytest.mark.parametrize("design", ["NaiveReplay", "ShiftPrefix"])
def test_the_other_failover_designs_tell_their_failover(fabric, design):
    """NaiveReplay fails over and never back; ShiftPrefix as Shift."""
    conn = fabric.connect(design, regions=4, record=True)
    post_round(conn, 1)
    conn.nic_fail("A", 1)
    drive(conn)
    conn.nic_recover("A", 1)
    drive(conn)
    post_round(conn, 2)
    drive(conn)
    assert_nccl_delivered(conn, 2)
    back = [("FAIL_BACK", 1)] if design == "ShiftPrefix" else []
    assert [e[:2] for e in _events(conn, "A")] == [
        ("PATH_DOWN", 1), ("FAILOVER_STARTED", 2), ("FAILOVER_FINISHED", 2), *back]
    assert conn.stats("A").failbacks == len(back)


def test_no_failover_has_no_events(fabric):
    conn = fabric.connect("NoFailover", regions=4, record=True)
    post_round(conn, 1)
    conn.nic_fail("A", 1)
    drive(conn)
    got = [c.status for c in conn.completions if c.host == "A"]
    assert got and set(got) == {Status.WR_FLUSH_ERR}  # the application has the error
    assert _events(conn, "A") == _events(conn, "B") == []


def test_the_event_queue_keeps_the_newest_and_counts_what_it_dropped(fabric):
    """Failovers and fail-backs nobody polls the events of: the queue keeps the last
    SHIFT_EVENT_QUEUE, in order, and counts the rest; the layer goes on unaffected."""
    conn = fabric.connect("Shift", regions=4, record=True)
    cycles = 10  # 4 events each on A (path down, started, finished, fail-back)
    for k in range(1, cycles + 1):
        post_round(conn, 2 * k - 1)
        conn.link_down(1)
        drive(conn)
        conn.link_up(1)
        drive(conn)
        post_round(conn, 2 * k)  # the fence
        drive(conn)
    assert conn.stats("A").failovers == conn.stats("A").failbacks == cycles
    assert_nccl_delivered(conn, 2 * cycles)
    kept = [e[0] for e in _events(conn, "A")]
    assert len(kept) == lib.SHIFT_EVENT_QUEUE
    assert kept == ["PATH_DOWN", "FAILOVER_STARTED", "FAILOVER_FINISHED", "FAIL_BACK"] * (
        lib.SHIFT_EVENT_QUEUE // 4)
    assert conn.stats("A").events_dropped == 4 * cycles - lib.SHIFT_EVENT_QUEUE


def test_polling_events_changes_nothing():
    def run(poll_events: bool):
        taken = []
        with Fabric(retries=1) as fabric:
            conn = fabric.connect("Shift", regions=4, record=True)
            for k in range(1, 5):
                post_round(conn, k)
                if k == 2:
                    conn.nic_fail("B", 1)
                if k == 3:
                    conn.nic_recover("B", 1)
                drive(conn)
                if poll_events:
                    taken += [*conn.events("A"), *conn.events("B")]
            return conn.observe().as_dict(), conn.stats_by_host(), len(taken)
    polled, unpolled = run(True), run(False)
    assert polled[2] >= 6 and unpolled[2] == 0  # a failover and a fail-back, both hosts
    assert polled[:2] == unpolled[:2]


def test_events_of_an_unknown_host_are_a_value_error_at_once(conn):
    with pytest.raises(ValueError, match="unknown host 'C'"):
        conn.events("C")
    with pytest.raises(ValueError, match="unknown host 'C'"):
        conn.poll_event("C")


def test_the_c_event_api_checks_its_arguments(conn):
    ev = ffi.new("struct shift_event *")
    assert lib.shift_poll_event(ffi.NULL, ev) == -errno.EINVAL
    ep = ffi.new("shift_ep *")
    assert lib.shift_sim_ep(conn.handle, 0, ep) == 0
    assert lib.shift_poll_event(ep[0], ffi.NULL) == -errno.EINVAL
    assert lib.shift_poll_event(ep[0], ev) == 0
    names = [lib.shift_event_name(t) for t in range(0, 10)]
    names = [ffi.string(n).decode() if n else None for n in names]
    assert names == [None, "PATH_DOWN", "FAILOVER_STARTED", "FAILOVER_FINISHED",
                     "FAILOVER_REFUSED", "FAIL_BACK", "RECV_FAIL_BACK", "APP_ERROR",
                     "PEER_APP_ERROR", None]
    assert [(t.name, t.value) for t in EventType] == [(n, i) for i, n in enumerate(names) if n]
