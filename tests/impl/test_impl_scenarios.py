"""Scenario tests of the native core through shift.impl: the failures the SHIFT paper
injects (sender NIC, receiver NIC, link, flapping) and those it does not describe (a
second failure during the handshake, the replay or the fail-back; the backup path failing
too), each asserting what each application sees."""

from __future__ import annotations

import pytest
from impl_helpers import assert_nccl_delivered, drive, notes, post_round, step
from shift.impl import Fabric, Status, Wr
from shift.vocabulary import Event

FAULT_POSITIONS = range(0, 30, 3)


def _run_with_fault(conn, fault, pos, recover=None, rounds=4, more=3):
    for k in range(1, rounds + 1):
        post_round(conn, k)
    for i in range(pos):
        step(conn, i)
    conn.apply(fault)
    drive(conn)
    # traffic continues on the backup path
    for k in range(rounds + 1, rounds + more + 1):
        post_round(conn, k)
        drive(conn)
    total = rounds + more
    if recover is not None:
        conn.apply(recover)
        drive(conn)
        for k in range(total + 1, total + 3):
            post_round(conn, k)
            drive(conn)
        total += 2
    return total


@pytest.mark.parametrize("pos", FAULT_POSITIONS)
def test_sender_nic_failure(conn, pos):
    total = _run_with_fault(conn, ("NicFail", "A", 1), pos, recover=("NicRecover", "A", 1))
    assert_nccl_delivered(conn, total)
    a, b = conn.stats("A"), conn.stats("B")
    assert a.failovers == b.failovers == 1  # one failover, once per host
    assert (a.failbacks, b.failbacks) == (1, 0)  # A's send side fails back
    assert conn.observe().layer == {"A": "Default", "B": "Default"}


@pytest.mark.ideal_rc  # F7: on hardware's RC, a notification ACKed dies with B's NIC
@pytest.mark.parametrize("pos", FAULT_POSITIONS)
def test_receiver_nic_failure(conn, pos):
    total = _run_with_fault(conn, ("NicFail", "B", 1), pos, recover=("NicRecover", "B", 1))
    assert_nccl_delivered(conn, total)
    assert conn.stats("A").failbacks == 1
    assert conn.observe().layer == {"A": "Default", "B": "Default"}


@pytest.mark.parametrize("pos", FAULT_POSITIONS)
def test_link_down_then_up(conn, pos):
    total = _run_with_fault(conn, ("LinkDown", 1), pos, recover=("LinkUp", 1))
    assert_nccl_delivered(conn, total)
    assert conn.observe().layer == {"A": "Default", "B": "Default"}


@pytest.mark.ideal_rc  # F7: on hardware's RC, a notification ACKed dies with B's NIC
@pytest.mark.parametrize("pos", FAULT_POSITIONS)
def test_receiver_nic_failure_without_recovery_stays_on_backup(conn, pos):
    total = _run_with_fault(conn, ("NicFail", "B", 1), pos)
    assert_nccl_delivered(conn, total)
    assert conn.observe().layer == {"A": "Fallback", "B": "Fallback"}


@pytest.mark.parametrize("pos", FAULT_POSITIONS)
def test_without_fail_back_the_recovered_path_stays_unused(fabric, pos):
    """fail_back=False: the layer stays on the backup path even once the default NIC is
    back (the spec's D.failBack = FALSE, or a bound without recovery)."""
    conn = fabric.connect("Shift", regions=4, fail_back=False, record=True)
    total = _run_with_fault(conn, ("NicFail", "A", 1), pos, recover=("NicRecover", "A", 1))
    assert_nccl_delivered(conn, total)
    assert conn.observe().layer == {"A": "Fallback", "B": "Fallback"}
    assert conn.stats("A").failbacks == 0


def test_flapping_link(conn):
    k = 0
    for flap in range(4):
        for _ in range(2):
            k += 1
            post_round(conn, k)
        for i in range(3 + flap):
            step(conn, i)
        conn.link_down(1)
        drive(conn)
        k += 1
        post_round(conn, k)
        drive(conn)
        conn.link_up(1)
        drive(conn)
        k += 1
        post_round(conn, k)
        drive(conn)
    k += 1  # a last round: the fence of a fail-back the link's last return started
    post_round(conn, k)
    drive(conn)
    assert_nccl_delivered(conn, k)
    s = conn.stats("A")
    # A cannot see link 1: it may fail back onto it while it is down too (the reconnect is
    # a message on the backup path), and that fail-back's traffic fails over again
    assert s.failovers >= 4 and s.failbacks >= 4
    assert conn.observe().layer == {"A": "Default", "B": "Default"}


def test_fast_flap_during_failback_probe(fabric):
    conn = fabric.connect("Shift", regions=8, probe="wire", record=True)
    post_round(conn, 1)
    conn.link_down(1)
    drive(conn)  # a failover; the fail-back (B's reset, B's probe) fails on the dead link
    assert conn.stats("A").failovers == 1
    conn.link_up(1)
    post_round(conn, 2)  # traffic again: the fail-back goes on; the link dies mid-way
    for _ in range(3):
        for h in "AB":
            conn.progress(h)
        conn.deliver(2, "AtoB")
        conn.deliver(2, "BtoA")
    conn.link_down(1)
    drive(conn)
    post_round(conn, 3)
    drive(conn)
    conn.link_up(1)
    for k in (4, 5):
        post_round(conn, k)
        drive(conn)
    assert_nccl_delivered(conn, 5)
    assert conn.observe().layer == {"A": "Default", "B": "Default"}


@pytest.mark.parametrize("op", ["FADD", "CAS"])
def test_atomic_in_flight_gets_an_error(fabric, op):
    conn = fabric.connect("Shift", regions=8, record=True)
    conn.post_recv("B", 1)
    conn.app_write("B", 2, 5)
    conn.post_send("A", Wr(1, op, region=2, value=1 if op == "FADD" else 9, compare=5))
    conn.post_send("A", Wr(2, "WRITE_IMM"))
    assert conn.transmit("A", 1) and conn.deliver(1, "AtoB")  # the atomic executes
    assert conn.drop(1, "BtoA")  # its answer is lost
    conn.nic_fail("A", 1)
    drive(conn)
    snd = conn.observe().snd_seen
    assert [(s.wr, s.status) for s in snd] == [(1, "WR_FLUSH_ERR"), (2, "WR_FLUSH_ERR")]
    assert conn.read("B", 2) == (6 if op == "FADD" else 9)  # applied exactly once
    assert conn.state("A") == "Error"
    assert conn.stats("A").refused == 2
    assert conn.stats("A").replayed == 0
    with pytest.raises(Exception) as e:
        conn.completions[0].raise_for_status()
    assert e.value.status_name == "WR_FLUSH_ERR"
    # the connection is dead, as an RC QP in ERR: later WRs are flushed
    conn.post_send("A", Wr(3, "WRITE", region=1, value=1))
    drive(conn)
    assert conn.observe().snd_seen[-1] == type(snd[0])(3, "WR_FLUSH_ERR")


def test_atomic_timeout_reports_retry_exceeded(fabric):
    conn = fabric.connect("Shift", regions=8, record=True)
    conn.post_send("A", Wr(1, "FADD", region=1, value=3))
    conn.link_down(1)
    drive(conn)
    assert [(s.wr, s.status) for s in conn.observe().snd_seen] == [(1, "RETRY_EXC_ERR")]
    assert conn.read("B", 1) == 0


def test_ineligible_wr_is_refused_like_an_atomic(conn):
    conn.post_send("A", Wr(1, "WRITE", region=1, value=7, eligible=False))
    conn.nic_fail("A", 1)
    drive(conn)
    assert [(s.wr, s.status) for s in conn.observe().snd_seen] == [(1, "WR_FLUSH_ERR")]
    assert conn.stats("A").refused == 1


def test_received_notification_is_not_replayed(conn):
    """T2 for a notification: executed, ACK lost. The counter filter skips it; its
    success is synthesised; the receiver sees it once. The WRITE before it runs again."""
    post_round(conn, 1)
    for ev in (("Transmit", "A", 1), ("Transmit", "A", 1), ("Deliver", 1, "AtoB"),
               ("Deliver", 1, "AtoB"), ("Drop", 1, "BtoA"), ("Drop", 1, "BtoA")):
        assert conn.apply(ev)
    conn.nic_fail("A", 1)
    drive(conn)
    assert_nccl_delivered(conn, 1)
    s = conn.stats("A")
    assert s.skipped == 1 and s.replayed == 1
    assert conn._fabric.counters()["executed"] == 3  # the WRITE ran twice: not exactly-once


@pytest.mark.ideal_rc  # polls the dead NIC's flush at once
def test_second_failure_during_handshake_surfaces_the_error(conn):
    post_round(conn, 1)
    conn.pump()
    conn.poll("A")
    conn.poll("B")
    post_round(conn, 2)
    conn.nic_fail("A", 1)
    assert conn.poll_cq("A") is None  # the flush on the default QP triggers instead
    assert conn.state("A") == "Fallback"
    assert conn.progress("A") == "handshake"  # the counter is on the backup wire
    conn.link_down(2)  # ... and lost with the second path
    drive(conn)
    snd = conn.observe().snd_seen
    assert (2, "SUCCESS") in [(s.wr, s.status) for s in snd]
    assert [(s.wr, s.status) for s in snd][-2:] == [(3, "RETRY_EXC_ERR"), (4, "WR_FLUSH_ERR")]
    assert conn.state("A") == "Error"
    # B took notification 1 only, once; no duplicate, no data corruption
    assert [n.wr for n in notes(conn)] == [2]


def test_second_failure_during_handshake_recovers_if_backup_returns(conn):
    post_round(conn, 1)
    conn.nic_fail("A", 1)
    conn.poll("A")
    conn.progress("A")
    conn.link_down(2)
    conn.timeout("A", 2)  # the handshake timer resends the counter: lost again
    conn.link_up(2)
    drive(conn)  # the next resend gets through
    assert_nccl_delivered(conn, 1)
    assert conn.state("A") == "Fallback"


@pytest.mark.ideal_rc  # polls the dead NIC's flush at once
def test_lost_counters_are_resent_by_the_handshake_timer(fabric, conn):
    """Control messages are packets (issue 15, item 3): the wire loses A's counter, then
    B's answer; HandshakeTimeout(A) resends A's counter (same number) each time, and B,
    seeing a duplicate that asks, answers again. Nothing is delivered twice."""
    post_round(conn, 1)
    conn.nic_fail("A", 1)
    conn.poll("A")
    assert conn.progress("A") == "handshake"
    a = conn.host_state("A")
    assert a.asked and a.ctr_seq == 1 and fabric.wire(2, "AtoB") == 1
    assert conn.drop(2, "AtoB")  # A's counter is lost
    assert conn.apply(Event("HandshakeTimeout", ("A",)))
    assert conn.host_state("A").ctr_seq == 1  # the same counter, resent
    assert conn.deliver(2, "AtoB")  # B takes it: a failover
    assert conn.host_state("B").peer_seq == 1
    assert conn.progress("B") == "trigger"
    assert conn.progress("B") == "handshake"
    assert conn.drop(2, "BtoA")  # B's answer is lost
    b = conn.host_state("B")
    assert conn.handshake_timeout("A")
    assert conn.deliver(2, "AtoB")  # a duplicate that asks: B answers again
    assert conn.host_state("B") == b
    assert fabric.wire(2, "BtoA") == 1
    assert not conn.handshake_timeout("B")  # B awaits nothing
    drive(conn)
    assert_nccl_delivered(conn, 1)
    obs = conn.observe().as_dict()
    assert obs["ctrSeq"] == {"A": 1, "B": 1} and obs["peerSeq"] == {"A": 1, "B": 1}
    assert not conn.handshake_timeout("A")  # answered
    assert conn.stats("A").ctl_rejected == conn.stats("B").ctl_rejected == 0


@pytest.mark.ideal_rc  # polls the dead NIC's flush at once
def test_second_failure_during_replay(conn):
    for k in (1, 2):
        post_round(conn, k)
    conn.nic_fail("A", 1)
    conn.poll("A")
    assert conn.progress("A") == "handshake"
    conn.pump()  # A's counter reaches B
    assert conn.progress("B") == "trigger"
    assert conn.progress("B") == "handshake"
    conn.pump()  # B's counter reaches A
    assert conn.progress("A") == "replay"
    assert conn.transmit("A", 2)  # the first replayed WR goes out
    conn.nic_fail("A", 2)  # the backup NIC dies mid-replay
    drive(conn)
    snd = [(s.wr, s.status) for s in conn.observe().snd_seen]
    assert snd and all(st == "WR_FLUSH_ERR" for _, st in snd)
    assert conn.state("A") == "Error"
    got = notes(conn)
    assert [n.wr for n in got] in ([], [2])  # a prefix, no duplicate
    assert len({n.recv for n in got}) == len(got)


def test_second_failure_during_failback_missed_notice(conn):
    """The default path dies again between the fence and the fail-back notice: B never
    hears it, A's released WRs time out, and a second failover (B answers again from the
    backup path) delivers everything once, in order."""
    post_round(conn, 1)
    conn.link_down(1)
    drive(conn)
    conn.link_up(1)
    drive(conn)
    assert conn.state("A") == "WaitSignaled"
    post_round(conn, 2)  # WRITE (backup), WRITE_IMM: the fence
    assert conn.state("A") == "WaitDrained"
    post_round(conn, 3)  # held on the default QP, doorbell not rung
    assert not conn.transmit("A", 1)
    conn.pump()
    conn.poll("A")
    conn.poll("B")
    conn.link_down(1)  # before the release: the notice will be lost
    assert conn.progress("A") == "release"
    drive(conn)
    assert_nccl_delivered(conn, 3)
    assert conn.stats("A").failovers == 2
    post_round(conn, 4)
    drive(conn)
    conn.link_up(1)
    drive(conn)
    post_round(conn, 5)
    drive(conn)
    assert_nccl_delivered(conn, 5)


def test_fence_holds_the_default_doorbell(conn):
    post_round(conn, 1)
    conn.nic_fail("B", 1)
    drive(conn)
    conn.nic_recover("B", 1)
    drive(conn)
    assert conn.state("A") == "WaitSignaled"
    conn.post_recv("B", 2)
    conn.post_send("A", Wr(3, "WRITE", region=2, value=102, signaled=False))
    assert conn.state("A") == "WaitSignaled"  # unsignaled: not a fence
    conn.post_send("A", Wr(4, "WRITE_IMM"))
    assert conn.state("A") == "WaitDrained" and conn.observe().fence == 4
    conn.post_recv("B", 3)
    conn.post_send("A", Wr(5, "WRITE", region=3, value=103, signaled=False))
    conn.post_send("A", Wr(6, "WRITE_IMM"))
    assert not conn.transmit("A", 1)  # held
    conn.pump()
    assert conn.progress("A") == "none"  # fence not polled yet
    conn.poll("A")
    assert conn.progress("A") == "release"
    assert conn.transmit("A", 1)
    drive(conn)
    assert_nccl_delivered(conn, 3)


def test_backup_path_fails_too(conn):
    post_round(conn, 1)
    conn.nic_fail("A", 1)
    drive(conn)
    post_round(conn, 2)
    conn.nic_fail("B", 2)  # now both paths are dead
    drive(conn)
    obs = conn.observe()
    # A: round 1 done; round 2's WRs, on the dead backup, time out and reach the app
    assert [(s.wr, s.status) for s in obs.snd_seen] == [(2, "SUCCESS"), (3, "RETRY_EXC_ERR"),
                                                         (4, "WR_FLUSH_ERR")]
    assert conn.state("A") == "Error"
    # B: notification 1 once; its receive for round 2 comes back flushed
    assert [n.wr for n in notes(conn)] == [2]
    assert [(r.recv, r.status) for r in obs.rcv_seen][-1] == (2, "WR_FLUSH_ERR")


@pytest.mark.ideal_rc  # a notification with no receive WR left is dropped, not RNR-NAKed
@pytest.mark.parametrize("rounds", [1, 3])
def test_naive_replay_slides_the_receive_queue(fabric, rounds):
    conn = fabric.connect("NaiveReplay", regions=8, record=True)
    for k in range(1, rounds + 1):
        post_round(conn, k)
    conn.post_recv("B", rounds + 1)
    for _ in range(2 * rounds):
        assert conn.transmit("A", 1)
    for _ in range(2 * rounds):  # everything executes ...
        assert conn.deliver(1, "AtoB")
    while conn.drop(1, "BtoA"):  # ... and every ACK is lost
        pass
    conn.nic_fail("A", 1)
    drive(conn)
    got = notes(conn)
    # the replayed notification 1 consumed the spare receive: one buffer off
    assert [(n.wr, n.recv) for n in got][: rounds + 1] == \
        [(2 * k, k) for k in range(1, rounds + 1)] + [(2, rounds + 1)]
    assert conn.stats("A").skipped == 0


def test_no_failover_propagates_the_error(fabric):
    conn = fabric.connect("NoFailover", regions=8, record=True)
    post_round(conn, 1)
    conn.nic_fail("A", 1)
    drive(conn)
    snd = [(s.wr, s.status) for s in conn.observe().snd_seen]
    assert snd == [(1, "WR_FLUSH_ERR"), (2, "WR_FLUSH_ERR")]
    assert {h: s.failovers for h, s in conn.stats_by_host().items()} == {"A": 0, "B": 0}
    assert conn.observe().layer == {"A": "Default", "B": "Default"}


def test_buffer_reuse_during_replay_is_visible(conn):
    """SHIFT's assumption (a): a zero-copy WRITE replayed after the application rewrote
    its source buffer (AppWrite) carries the new value."""
    conn.post_recv("B", 1)
    conn.post_send("A", Wr(1, "WRITE", region=1, value=11, signaled=False, inline=False))
    conn.post_send("A", Wr(2, "WRITE_IMM"))
    conn.nic_fail("A", 1)
    conn.poll("A")
    conn.app_write("A", 1, 99)  # races the replay
    drive(conn)
    assert notes(conn)[0].mem[0] == 99


@pytest.mark.ideal_rc  # B's PollCq right after the Deliver: no WriteCqe
def test_events_by_name_and_projection(fabric):
    conn = fabric.connect("Shift", regions=2, probe="instant", record=True)
    trace = [
        ("PostRecv", "B", 1),
        {"event": "PostSend", "host": "A",
         "wr": {"id": 1, "op": "WRITE", "region": 1, "value": 7, "signaled": False}},
        ("PostSend", "A", Wr(2, "WRITE_IMM")),
        ("Transmit", "A", 1), ("Transmit", "A", 1), ("Deliver", 1, "AtoB"),
        ("Deliver", 1, "AtoB"), ("Deliver", 1, "BtoA"), ("Deliver", 1, "BtoA"),
        ("PollCq", "B"), ("PollCq", "A"), {"event": "NicFail", "host": "A", "nic": 1},
        Event("NicRecover", ("A", 1)), ("Progress", "A"),
    ]
    out = conn.run(trace)
    assert out[9].wr_id == 1 and out[9].imm == 2 and out[10].wr_id == 2
    d = conn.observe().as_dict()
    assert d["sndSeen"] == {"A": [{"wr": 2, "status": "SUCCESS", "val": 0}], "B": []}
    assert d["rcvSeen"] == {"A": [], "B": [{"wr": 2, "recv": 1, "status": "SUCCESS",
                                            "mem": {1: 7, 2: 0}, "data": 0}]}
    assert d["sendMode"] == d["recvMode"] == {"A": "Default", "B": "Default"}
    assert d["recvDone"] == {"A": 0, "B": 1}
    assert conn.host_state("B").recvs_completed == 1


def test_reads_and_atomics_return_values(conn):
    conn.app_write("B", 3, 40)
    conn.post_send("A", Wr(1, "READ", region=3))
    conn.post_send("A", Wr(2, "FADD", region=3, value=2))
    conn.post_send("A", Wr(3, "CAS", region=3, compare=42, value=7))
    drive(conn)
    assert [c.status for c in conn.completions] == [Status.SUCCESS] * 3
    assert conn.read("B", 3) == 7
    # each returns the region's value before it into its own landing slot, and the
    # application's view carries it
    assert [conn.returned(w) for w in (1, 2, 3)] == [40, 40, 42]
    assert [(s.wr, s.val) for s in conn.observe().snd_seen] == [(1, 40), (2, 40), (3, 42)]


def test_a_send_payload_lands_in_the_buffer_of_the_receive_it_consumes(conn):
    for r in (1, 2):
        conn.post_recv("B", r)
    conn.post_send("A", Wr(1, "SEND", value=11))
    conn.post_send("A", Wr(2, "SEND", value=22))
    drive(conn)
    assert [conn.received(r) for r in (1, 2)] == [11, 22]
    assert [(r.recv, r.data) for r in conn.observe().rcv_seen] == [(1, 11), (2, 22)]


@pytest.mark.parametrize("fault", [("NicFail", "A", 1), ("NicFail", "B", 1), ("LinkDown", 1)])
@pytest.mark.parametrize("copy_posts", [False, True])
def test_two_way_ping_pong_survives_a_failover_and_fails_back_both_ways(fabric, fault,
                                                                        copy_posts):
    """Both hosts send and receive on one connection (ibv_rc_pingpong): each SEND_IMM lands
    once, in order, in its own receive WR's buffer at the peer, through a failover while
    both directions are in flight and the fail-back of both directions."""
    conn = fabric.connect("Shift", regions=2, copy_posts=copy_posts, record=True)
    for k in range(1, 7):
        conn.post_recv("A", k)
        conn.post_recv("B", k)
    conn.post_send("A", Wr(1, "SEND_IMM", value=101))
    conn.post_send("B", Wr(1, "SEND_IMM", value=201))
    drive(conn)
    conn.post_send("A", Wr(2, "SEND_IMM", value=102))
    conn.post_send("B", Wr(2, "SEND_IMM", value=202))
    conn.post_send("A", Wr(3, "WRITE", region=1, value=7))  # B's region 1
    conn.post_send("B", Wr(3, "WRITE", region=2, value=8))  # A's region 2
    conn.apply(fault)
    drive(conn)
    assert conn.state("A") == conn.state("B") == "Fallback"
    conn.apply(("NicRecover" if fault[0] == "NicFail" else "LinkUp", *fault[1:]))
    drive(conn)
    for k in range(4, 7):  # the first is each side's fence; then the default path again
        conn.post_send("A", Wr(k, "SEND_IMM", value=100 + k))
        conn.post_send("B", Wr(k, "SEND_IMM", value=200 + k))
        drive(conn)
    obs = conn.observe()
    for h, sent, got in (("A", obs.snd_seen, obs.rcv_seen_a), ("B", obs.snd_seen_b, obs.rcv_seen)):
        peer = 200 if h == "A" else 100
        assert [(s.wr, s.status) for s in sent] == [(k, "SUCCESS") for k in range(1, 7)]
        assert [(r.wr, r.recv, r.status, r.data) for r in got] == [  # WR 3 is a WRITE
            (k, i, "SUCCESS", peer + k) for i, k in enumerate((1, 2, 4, 5, 6), 1)]
        st = conn.host_state(h)
        assert (st.send_state, st.recv_state, st.recvs_completed) == ("Default", "Default", 5)
    assert conn.memory("B") == (7, 0) and conn.memory("A") == (0, 8)
    for s in conn.stats_by_host().values():  # one failover, one fail-back per host
        assert (s.failovers, s.failbacks) == (1, 1)


def test_deterministic_replay_of_a_trace():
    def run():
        with Fabric(retries=1) as fab:
            c = fab.connect("Shift", regions=4, record=True)
            for k in range(1, 4):
                post_round(c, k)
            for i in range(7):
                step(c, i)
            c.nic_fail("B", 1)
            drive(c)
            return c.observe().as_dict(), c.stats_by_host()
    assert run() == run()


def test_prepared_and_batched_posts(conn):
    wrs = [Wr(i, "WRITE", region=1 + i % 4, value=10 + i, signaled=i == 7) for i in range(8)]
    chain = conn.prepare(wrs)
    for _ in range(3):
        assert conn.post_prepared(chain) == 8
        conn.pump()
    assert conn.post_send_many(wrs) == 8
    drive(conn)
    assert [c.wr_id for c in conn.completions] == [7, 7, 7, 7]
    assert [conn.read("B", r) for r in (1, 2, 3, 4)] == [14, 15, 16, 17]
    with pytest.raises(TypeError):
        conn.post_prepared(wrs)


@pytest.mark.ideal_rc  # B's PollCq right after the Deliver: no WriteCqe
def test_every_event_of_the_vocabulary_by_name(conn):
    results = conn.run([
        ("PostRecv", "B", 1), ("PostSend", "A", Wr(1, "WRITE_IMM")), ("Transmit", "A", 1),
        ("Drop", 1, "AtoB"), ("Timeout", "A", 1), ("Transmit", "A", 1), ("Deliver", 1, "AtoB"),
        ("Deliver", 1, "BtoA"), ("PollCq", "A"), ("PollCq", "B"), ("AppWrite", "B", 2, 9),
        ("LinkDown", 2), ("LinkUp", 2), ("NicFail", "B", 2), ("NicRecover", "B", 2),
        ("Progress", "A"), {"event": "PollCq", "host": "A"},
    ])
    assert results[:8] == [True] * 8
    assert results[8].wr_id == 1 and results[9].imm == 1
    assert conn.read("B", 2) == 9
    assert results[-2] == "none" and results[-1] is None


@pytest.mark.ideal_rc  # A polls its receive completion right after the pump: no WriteCqe
def test_a_post_in_error_flushes_ahead_of_a_later_receive_completion(fabric):
    """A send side in Error flushes a new post at once, at the tail of the backup CQ as
    the spec's PostSend has it: ahead of a receive completion that arrives after it (the
    host's receive side still works on the backup path), behind what was there."""
    conn = fabric.connect("Shift", regions=2, record=True)
    conn.post_recv("A", 1)
    conn.post_send("A", Wr(1, "FADD", region=1, value=1))  # an atomic: A refuses
    conn.nic_fail("A", 1)
    drive(conn)
    assert conn.host_state("A").send_state == "Error"
    assert conn.host_state("A").recv_state == "Fallback"
    conn.post_send("A", Wr(2, "WRITE", region=1, value=5))  # flushed at once
    conn.post_send("B", Wr(1, "SEND_IMM", value=9))  # lands in A's receive WR 1 afterwards
    conn.pump()
    assert conn.received(1, "A") == 9
    first, second = conn.poll_cq("A"), conn.poll_cq("A")
    assert (first.wr_id, first.status) == (2, Status.WR_FLUSH_ERR)
    assert (second.wr_id, second.status, second.imm) == (1, Status.SUCCESS, 1)
    obs = conn.observe()
    assert [(s.wr, s.status) for s in obs.snd_seen] == [
        (1, "WR_FLUSH_ERR"), (2, "WR_FLUSH_ERR")]
    assert [(r.wr, r.recv, r.data) for r in obs.rcv_seen_a] == [(1, 1, 9)]


def test_the_hardware_events_of_the_vocabulary_by_name(fabric):
    """WriteCqe, FatalEvent, HandshakeTimeout and CompletionTimeout by name, on the
    hardware's RC (Fabric's defaults): each acts exactly when its name says it can."""
    conn = fabric.connect("Shift", regions=2, record=True)
    results = conn.run([
        ("PostRecv", "B", 1), ("PostSend", "A", Wr(1, "WRITE_IMM")), ("Transmit", "A", 1),
        ("Deliver", 1, "AtoB"),    # B's NIC ACKs before the completion is in host memory
        ("PollCq", "B"), ("WriteCqe", "B", 1), ("WriteCqe", "B", 1), ("PollCq", "B"),
        ("Deliver", 1, "BtoA"), ("PollCq", "A"),
        ("CompletionTimeout", "A"),  # nothing of A's is outstanding on the default path
        ("FatalEvent", "A", 1),      # A's NIC 1 is alive: no event
        ("NicFail", "A", 1),
        ("FatalEvent", "A", 1), ("FatalEvent", "A", 1),  # its death, read once
        ("HandshakeTimeout", "A"),   # no failover yet: A awaits no answer
    ])
    assert results[:4] == [True] * 4
    assert results[4] is None and results[5] is True and results[6] is False
    assert results[7].imm == 1 and results[8] is True and results[9].wr_id == 1
    assert results[10] is False and results[11] is False and results[12] is True
    assert results[13:15] == [True, False]
    assert results[15] is False
    # A's next post is flushed by its layer (the NIC is dead): the failover starts
    drive = conn.run([("PostSend", "A", Wr(2, "WRITE", region=1, value=3)), ("PollCq", "A"),
                      ("Progress", "A")])
    assert drive[1] is None and drive[2] == "handshake"  # A sent its counter first: it asks
    assert conn.handshake_timeout("A") is True and conn.handshake_timeout("B") is False
