"""Bad input never crashes and never corrupts state: each gives the verbs status or the
errno a real NIC would, or a TypeError/ValueError before any C call from Python."""

from __future__ import annotations

import pytest
from impl_helpers import assert_nccl_delivered, drive, post_round
from shift.impl import (
    ClosedError,
    CompletionError,
    Fabric,
    PostError,
    RawRecvWr,
    RawSendWr,
    Status,
    Wr,
    _native,
)

WRITE, WRITE_IMM, SEND, READ, CAS, FADD = 0, 1, 2, 4, 5, 6
MAX_MSG = _native.lib.SHIFT_MAX_MSG  # the largest message: one more byte is malformed
SIGNALED = 2


@pytest.fixture
def conn():
    with Fabric(retries=1) as fab:
        yield fab.connect("Shift", regions=4, record=True)


def _raw(conn, **kw):
    base = {"wr_id": 1, "opcode": WRITE, "addr": conn._src.addr, "length": 8,
            "lkey": conn._src.lkey, "remote_addr": conn._dst.addr, "rkey": conn._dst.rkey}
    base.update(kw)
    return RawSendWr(**base)


def _status_after(conn, wr):
    conn.post_send("A", wr)
    drive(conn)
    return [c for c in conn.completions if c.host == "A"][-1]


@pytest.mark.parametrize("kw, status", [
    ({"lkey": 0xBAD}, Status.LOC_PROT_ERR),                         # invalid lkey
    ({"rkey": 0xBAD0}, Status.REM_ACCESS_ERR),                      # invalid rkey
    ({"remote_addr_delta": -2}, Status.REM_ACCESS_ERR),             # remote out of bounds
    ({"addr_delta": 1 << 20}, Status.LOC_PROT_ERR),                 # local out of bounds
    ({"opcode": FADD, "remote_addr_delta": 4}, Status.REM_INV_REQ_ERR),  # misaligned atomic
    ({"opcode": READ, "rkey": 0xBAD0}, Status.REM_ACCESS_ERR),
])
def test_bad_access_gives_the_verbs_status(conn, kw, status):
    kw = dict(kw)
    extra = {}
    if "remote_addr_delta" in kw:
        # from the end of B's memory region (a negative delta straddles it)
        end = conn._dst.addr + (conn.regions + 2 * conn.max_wr) * 8
        extra["remote_addr"] = end + kw.pop("remote_addr_delta")
    if "addr_delta" in kw:
        extra["addr"] = conn._src.addr + kw.pop("addr_delta")
    c = _status_after(conn, _raw(conn, **kw, **extra))
    assert c.status == status
    with pytest.raises(CompletionError) as e:
        c.raise_for_status()
    assert e.value.status_name == status.name
    # the application's error is not a path failure: no failover, the QP is dead
    assert conn.stats("A").failovers == conn.stats("B").failovers == 0
    assert conn.state("A") == "Error"
    assert conn.read("B", 1) == 0  # nothing was written
    # a post to the dead QP completes with WR_FLUSH_ERR, as verbs does
    assert _status_after(conn, Wr(9, "WRITE", region=1, value=5)).status == Status.WR_FLUSH_ERR
    assert conn.read("B", 1) == 0


def test_send_longer_than_the_receive_buffer(conn):
    buf = conn.register("B", 16)
    conn.post_recv("B", RawRecvWr(7, addr=buf.addr, length=4, lkey=buf.lkey, num_sge=1))
    c = _status_after(conn, _raw(conn, opcode=SEND, remote_addr=0, rkey=0))
    assert c.status == Status.REM_INV_REQ_ERR
    r = [x for x in conn.completions if x.host == "B"]
    assert [(x.wr_id, x.status) for x in r] == [(7, Status.LOC_LEN_ERR)]


def test_receive_with_a_bad_lkey(conn):
    buf = conn.register("B", 16)
    conn.post_recv("B", RawRecvWr(7, addr=buf.addr, length=16, lkey=0xBAD, num_sge=1))
    c = _status_after(conn, _raw(conn, opcode=SEND, remote_addr=0, rkey=0))
    assert c.status == Status.REM_OP_ERR
    assert [x.status for x in conn.completions if x.host == "B"] == [Status.LOC_PROT_ERR]


@pytest.mark.parametrize("copy_posts", [False, True])
def test_full_send_queue_is_enomem_and_harmless(copy_posts):
    """The layer's capacity: the default QP's send queue (direct) or its own ring (copy)."""
    with Fabric() as fab:
        conn = fab.connect("Shift", regions=2, max_wr=4, copy_posts=copy_posts, record=True)
        for i in range(4):
            conn.post_send("A", Wr(i, "WRITE", region=1, value=i))
        with pytest.raises(PostError) as e:
            conn.post_send("A", Wr(9, "WRITE", region=1, value=9))
        assert e.value.errno_name == "ENOMEM"
        for i in range(4):
            conn.post_recv("B", i)
        with pytest.raises(PostError) as e:
            conn.post_recv("B", 9)
        assert e.value.errno_name == "ENOMEM"
        drive(conn)
        assert [c.wr_id for c in conn.completions if c.host == "A"] == [0, 1, 2, 3]
        assert conn.read("B", 1) == 3


@pytest.mark.parametrize("copy_posts", [False, True])
@pytest.mark.parametrize("bad", [{"opcode": 99}, {"send_flags": SIGNALED | 512}])
def test_batched_post_stops_at_the_bad_wr(fabric, copy_posts, bad):
    """The WRs before the bad one are posted, the rest not, on either posting path (the
    backend refuses an unknown opcode; the layer refuses its own doorbell flag)."""
    conn = fabric.connect("Shift", regions=8, copy_posts=copy_posts, record=True)
    conn.post_recv("B", 10)
    conn.post_recv("B", 11)
    with pytest.raises(PostError) as e:
        conn.post_send_many([Wr(1, "WRITE", region=1, value=1), Wr(2, "WRITE_IMM"),
                             _raw(conn, wr_id=3, **bad), Wr(4, "WRITE_IMM")])
    assert e.value.errno_name == "EINVAL" and "#2" in str(e.value)
    drive(conn)
    assert [(c.host, c.wr_id) for c in conn.completions] == [("A", 1), ("A", 2), ("B", 10)]
    a = conn.host_state("A")
    assert (a.sends_posted, a.sends_completed, a.outstanding) == (1, 1, 0)


@pytest.mark.parametrize("kw", [
    {"opcode": 99}, {"opcode": -1}, {"send_flags": 0x8000}, {"num_sge": 2},
    {"num_sge": -1}, {"length": MAX_MSG + 1}, {"send_flags": SIGNALED | 8, "length": 65},
    {"send_flags": SIGNALED | 8, "opcode": READ}, {"send_flags": SIGNALED | 512},
])
def test_malformed_wr_is_einval_and_changes_nothing(conn, kw):
    with pytest.raises(PostError) as e:
        conn.post_send("A", _raw(conn, **kw))
    assert e.value.errno_name == "EINVAL"
    assert conn.host_state("A").outstanding == 0
    post_round(conn, 1)
    drive(conn)
    assert_nccl_delivered(conn, 1)


def test_malformed_recv_is_einval(conn):
    with pytest.raises(PostError) as e:
        conn.post_recv("B", RawRecvWr(1, num_sge=3))
    assert e.value.errno_name == "EINVAL"


@pytest.mark.parametrize("call, exc", [
    (lambda c: c.post_send("A", Wr("1", "WRITE")), TypeError),
    (lambda c: c.post_send("A", Wr(1, "WRITE", region=1, value=-1)), ValueError),
    (lambda c: c.post_send("A", Wr(1, "WRITE", region=1, value=1 << 64)), ValueError),
    (lambda c: c.post_send("A", Wr(1, "WRITE", region=9)), ValueError),
    (lambda c: c.post_send("A", Wr(1, "FOO")), ValueError),
    (lambda c: c.post_send("A", Wr(1, 3)), TypeError),
    (lambda c: c.post_send("A", Wr(1, "WRITE", signaled=1)), TypeError),
    (lambda c: c.post_send("A", Wr(1, "READ")), ValueError),
    (lambda c: c.post_send("A", {"id": 1}), TypeError),
    (lambda c: c.post_send("C", Wr(1, "WRITE")), ValueError),
    (lambda c: c.post_send(1, Wr(1, "WRITE")), TypeError),
    (lambda c: c.post_recv("B", "x"), TypeError),
    (lambda c: c.post_recv("B", True), TypeError),
    (lambda c: c.post_recv("C", 1), ValueError),
    (lambda c: c.post_recv("A", -1), ValueError),
    (lambda c: c.poll_cq("C"), ValueError),
    (lambda c: c.poll("A", -1), ValueError),
    (lambda c: c.transmit("A", "1"), TypeError),
    (lambda c: c.transmit("A", 3), ValueError),
    (lambda c: c.deliver(1, "AB"), ValueError),
    (lambda c: c.deliver(1, 0), TypeError),
    (lambda c: c.timeout("A", 1.0), TypeError),
    (lambda c: c.nic_fail("A", 0), ValueError),
    (lambda c: c.app_write("B", 1, "7"), TypeError),
    (lambda c: c.apply(("Bogus", 1)), ValueError),
    (lambda c: c.apply("NicFail"), TypeError),
    (lambda c: c.apply(()), TypeError),
    (lambda c: c.apply((3, 1)), TypeError),
    (lambda c: c.register("A", 0), ValueError),
    (lambda c: c.register("A", 1 << 40), ValueError),
    (lambda c: c.post_send("A", RawSendWr(1, "WRITE")), TypeError),
    (lambda c: c.post_send("A", RawSendWr(1, 0, rkey=1 << 33)), ValueError),
])
def test_wrong_python_types_and_values_raise_before_c(conn, call, exc):
    with pytest.raises(exc):
        call(conn)
    post_round(conn, 1)
    drive(conn)
    assert_nccl_delivered(conn, 1)


@pytest.mark.parametrize("event, says", [
    ({"event": "Deliver", "args": [1, "AtoB"]},
     "Deliver: unexpected field(s) args (it takes path, direction)"),
    ({"event": "Deliver", "path": 1}, "Deliver: missing field(s) direction"),
    ({"event": "Deliver", "path": 1, "direction": "AB"}, "Deliver: unknown direction 'AB'"),
    (("NicFail", "A", 3), "NicFail: nic = 3 out of range [1, 2]"),
    (("nic_fail", "A", 1), "unknown event 'nic_fail'; events: Init, PostSend"),
    (("Transmit", "A"), "Transmit takes 2 argument(s) (host, path), not 1"),
    ({"event": "PostSend", "host": "A", "wr": 1}, "PostSend: wr = 1 is a WR number"),
    ({"event": "PostSend", "host": "A", "wr": {"id": 1, "opp": "WRITE"}},
     "PostSend: Wr.__init__() got an unexpected keyword argument 'opp'"),
    ({"event": "Init", "workload": 1}, "Init is not an event of a connection"),
])
def test_a_bad_event_names_the_field_and_its_value(conn, event, says):
    with pytest.raises((TypeError, ValueError)) as e:
        conn.apply(event)
    assert says in str(e.value)
    post_round(conn, 1)
    drive(conn)
    assert_nccl_delivered(conn, 1)


@pytest.mark.parametrize("kw, exc", [
    ({"retries": 8}, ValueError), ({"retries": "1"}, TypeError), ({"mem_size": 1}, ValueError),
    ({"rnr_nak": 1}, TypeError),
])
def test_bad_fabric_arguments(kw, exc):
    with pytest.raises(exc):
        Fabric(**kw)


@pytest.mark.parametrize("kw, exc", [
    ({"design": "Foo"}, ValueError), ({"design": 3}, TypeError), ({"regions": 0}, ValueError),
    ({"max_wr": 0}, ValueError), ({"probe": "x"}, ValueError), ({"ctl_retries": -1}, ValueError),
    ({"copy_posts": 1}, TypeError), ({"fail_back": "no"}, TypeError),
])
def test_bad_connection_arguments(kw, exc):
    with Fabric() as fab, pytest.raises(exc):
        fab.connect(**kw)


def test_closed_handles_raise():
    fab = Fabric()
    conn = fab.connect()
    conn.close()
    with pytest.raises(ClosedError):
        conn.post_send("A", Wr(1, "WRITE", region=1, value=1))
    with pytest.raises(ClosedError):
        conn.progress("A")
    conn.close()  # idempotent
    fab.close()
    with pytest.raises(ClosedError):
        fab.transmit("A", 1)
    fab.close()


def test_fabric_close_closes_its_connections():
    fab = Fabric()
    conn = fab.connect()
    fab.close()
    with pytest.raises(ClosedError):
        conn.poll_cq("A")


def test_rnr_nak_gives_rnr_retry_exceeded():
    with Fabric(rnr_nak=True, rnr_retry=1) as fab:
        conn = fab.connect("NoFailover", regions=2, record=True)
        conn.post_send("A", Wr(1, "SEND"))  # no receive posted
        drive(conn)
        assert [c.status for c in conn.completions] == [Status.RNR_RETRY_EXC_ERR]


def test_rnr_retry_7_retries_for_ever():
    """rnr_retry = 7 is IBTA's "for ever" (NCCL and perftest set it): the SEND without a
    receive WR is retransmitted past any count, never fails, and executes once a receive
    WR is there."""
    with Fabric(rnr_nak=True, rnr_retry=7) as fab:
        conn = fab.connect("NoFailover", regions=2, record=True)
        conn.post_send("A", Wr(1, "SEND"))  # no receive posted
        for _ in range(60):  # never quiet: it RNR-NAKs and retransmits
            assert conn.pump() > 0
            conn.poll("A")
        sent = fab.counters()["transmitted"]
        assert sent > 2 * 7 and conn.completions == []  # far past 7 retries, no error
        conn.post_recv("B", 1)
        drive(conn, limit=60)
        # A's send completion and B's receive completion
        assert [c.status for c in conn.completions] == [Status.SUCCESS] * 2


def test_checked_poll_raises_the_verbs_status(conn):
    conn.post_send("A", _raw(conn, rkey=0xBAD0))
    conn.pump()
    with pytest.raises(CompletionError) as e:
        conn.poll("A", check=True)
    assert e.value.status_name == "REM_ACCESS_ERR" and e.value.completion.wr_id == 1
    conn.post_send("A", Wr(2, "WRITE", region=1, value=1))
    with pytest.raises(CompletionError) as e:
        conn.poll_cq("A", check=True)
    assert e.value.status == Status.WR_FLUSH_ERR


def test_a_nic_in_fatal_error_completes_nothing_until_its_event_is_read():
    """device_fatal: A's NIC 1 dies under a SEND with no flush; the SEND's completion
    comes only once A's layer reads IBV_EVENT_DEVICE_FATAL (shift_async_event), and a
    later post completes flushed at once."""
    with Fabric(device_fatal=True) as fab:
        conn = fab.connect("NoFailover", regions=2, record=True)
        conn.post_recv("B", 1)
        conn.post_send("A", Wr(1, "SEND"))
        assert conn.nic_fail("A", 1)
        drive(conn, nic_events=False)
        assert conn.completions == []  # silent: not even a flush
        assert conn.fatal_event("B", 1) is False  # B's NIC lives: no event
        assert conn.fatal_event("A", 1) is True
        assert conn.fatal_event("A", 1) is False  # read once
        conn.post_send("A", Wr(2, "WRITE"))
        drive(conn)
        assert [(c.wr_id, c.status) for c in conn.completions if c.host == "A"] == [
            (1, Status.WR_FLUSH_ERR), (2, Status.WR_FLUSH_ERR)]


def test_a_second_death_of_a_nic_the_layer_took_over_is_nothing_to_act_on():
    """A NIC the layer took over (its death read: the layer flushes the QP's posts) comes
    back and dies again before the QP is reset: the device raises its event again, the
    layer has nothing new to do (spec: NicFail leaves a TakenOver QP as it is, and no
    FatalEvent is enabled), so shift_async_event says 0, and posts still flush at once."""
    with Fabric(device_fatal=True) as fab:
        conn = fab.connect("NoFailover", regions=2, record=True)
        assert conn.nic_fail("A", 1) and conn.fatal_event("A", 1) is True
        assert conn.nic_recover("A", 1) and conn.nic_fail("A", 1)
        assert conn.fatal_event("A", 1) is False
        conn.post_send("A", Wr(1, "WRITE"))
        assert [(c.wr_id, c.status) for c in conn.poll("A")] == [(1, Status.WR_FLUSH_ERR)]


def test_every_connection_on_a_dead_nic_reads_its_death_once():
    """A device's event reaches every endpoint on it, as a verbs layer fans one device
    context's IBV_EVENT_DEVICE_FATAL out to its QPs: two connections on A's NIC 1 both
    fail over from it. A connection opened after the death (the NIC back) has no event
    of it."""
    with Fabric(device_fatal=True) as fab:
        first, second = fab.connect("Shift", record=True), fab.connect("Shift", record=True)
        assert first.nic_fail("A", 1)
        assert first.fatal_event("A", 1) is True and first.fatal_event("A", 1) is False
        assert second.fatal_event("A", 1) is True and second.fatal_event("A", 1) is False
        assert first.fatal_event("B", 1) is second.fatal_event("B", 1) is False
        for conn in (first, second):  # a post to the silent QP flushes: the failover
            conn.post_recv("B", 1)
            conn.post_send("A", Wr(1, "SEND_IMM"))
            drive(conn)
            assert conn.stats("A").failovers == 1
            assert [(c.wr_id, c.status) for c in conn.completions if c.host == "B"] == [
                (1, Status.SUCCESS)]
        assert fab.nic_recover("A", 1)
        third = fab.connect("Shift", record=True)
        assert third.fatal_event("A", 1) is False


def test_fatal_event_arguments_are_checked():
    with Fabric(device_fatal=True) as fab:
        conn = fab.connect("Shift", regions=2)
        for nic in (0, 3, "1"):
            with pytest.raises((ValueError, TypeError), match="nic"):
                conn.fatal_event("A", nic)
    with pytest.raises((ValueError, TypeError), match="device_fatal"):
        Fabric(device_fatal=2)
