"""A control message is input from the network (issue 15, item 7): one the peer's layer
could not have sent - truncated, extended, of an unknown kind, stale, or carrying a
receive counter above the notifications this endpoint posted - is rejected and counted
(`Stats.ctl_rejected`), never acted on; the connection then completes its workload.
native/tests/driver.c feeds 110,000 random and mutated ones under ASan/UBSan."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from impl_helpers import assert_nccl_delivered, drive, post_round
from shift.impl import Connection, Fabric, PathInfo

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


# -- the two-phase set-up's messages (src/layer.h's ctl_setup, ctl_keys; setup.c)
SETUP, KEYS, READY, ASK = 4, 5, 1, 2
SETUP_FMT, KEYS_FMT = "=IBBHIIHBB16sIII", "=IBBHII16I"


def setup_msg(info, flags: int = READY, keys: int = 1, seen: int = 1, pad: int = 0,
              reserved: int = 0) -> bytes:
    """A CTL_SETUP: the sender's backup QP, its flags, its pairs announced, ours it holds."""
    return struct.pack(SETUP_FMT, MAGIC, SETUP, flags, pad, info.qp_num, info.psn, info.lid,
                       info.port, reserved, info.gid, info.ctl_qp_num, keys, seen)


def keys_msg(first: int, pairs: list[tuple[int, int]], n: int | None = None) -> bytes:
    """A CTL_KEYS: pairs (default rkey, backup rkey) numbered from first."""
    flat = [k for p in pairs for k in p] + [0] * (16 - 2 * len(pairs))
    return struct.pack(KEYS_FMT, MAGIC, KEYS, len(pairs) if n is None else n, 0, first, 0,
                       *flat)


@pytest.fixture
def two_phase():
    with Fabric(retries=1) as fab:
        conn = fab.connect("Shift", regions=4, two_phase=True, record=True)
        drive(conn)
        assert conn.setup_state("A").backup_ready and conn.setup_state("B").backup_ready
        yield conn


def _setup_rejected(conn: Connection, host: str, path: int, msg: bytes) -> None:
    before = conn.setup_state(host)
    _rejected(conn, host, path, msg)
    assert conn.setup_state(host) == before


def test_malformed_set_up_messages_are_rejected_and_counted(two_phase):
    conn = two_phase
    b2 = conn.local_info("B", 2)  # what B's layer announced to A
    mr = conn._dst  # B's region: A holds its pair as number 1
    pair = (mr.rkey, mr.rkey_backup)
    good = setup_msg(b2)
    assert conn.ctl_input("A", 1, good) is True  # the peer's latest state again: taken
    assert conn.ctl_input("A", 1, keys_msg(1, [pair])) is True  # a pair it holds, repeated
    bad_gid = b2.gid[:-1] + bytes([b2.gid[-1] ^ 1])
    for msg in (
        good[:-1], good + b"\0", setup_msg(b2, pad=1), setup_msg(b2, flags=READY | 4),
        setup_msg(b2, flags=ASK),  # B's readiness never goes back
        setup_msg(b2, reserved=1), setup_msg(b2, keys=0),  # fewer pairs than announced
        setup_msg(b2, seen=2),  # holds more of A's pairs than A announced
        setup_msg(b2, seen=0),  # fewer than it said it holds
        setup_msg(b2, keys=(1 << 20) + 1),
        setup_msg(PathInfo(0, b2.psn, b2.lid, b2.port, b2.gid)),
        setup_msg(PathInfo(b2.qp_num, 1 << 24, b2.lid, b2.port, b2.gid)),
        setup_msg(PathInfo(b2.qp_num, b2.psn, b2.lid, 0, b2.gid)),
        setup_msg(PathInfo(b2.qp_num + 1, b2.psn, b2.lid, b2.port, b2.gid)),  # another QP
        setup_msg(PathInfo(b2.qp_num, b2.psn, b2.lid, b2.port, bad_gid)),
        keys_msg(1, []), keys_msg(1, [pair], n=9), keys_msg(0, [pair]),
        keys_msg(1, [(pair[0], pair[1] + 1)]),  # pair 1 is B's for good
        keys_msg(1, [pair], n=0), keys_msg((1 << 20), [pair, pair]),
        keys_msg(1, [pair])[:-1],
    ):
        _setup_rejected(conn, "A", 1, msg)
    _setup_rejected(conn, "A", 2, good)  # set-up travels on the default path only
    flat = bytearray(keys_msg(2, [(7, 8)]))
    flat[-1] = 1  # a slot past n not 0
    _setup_rejected(conn, "A", 1, bytes(flat))
    assert conn.stats("B").ctl_rejected == 0
    # the connection goes on and fails over with the keys it learnt
    post_round(conn, 1)
    conn.nic_fail("A", 1)
    post_round(conn, 2)
    drive(conn)
    assert_nccl_delivered(conn, 2)


def test_set_up_messages_to_a_connection_made_in_one_call_are_rejected(conn):
    info = conn.local_info("B", 2)
    _rejected(conn, "A", 1, setup_msg(info))
    _rejected(conn, "A", 1, keys_msg(1, [(1, 2)]))
    assert conn.setup_state("A").backup_ready and not conn.setup_state("A").inband


def _setup_valid(conn: Connection, host: str, info, held: list, path: int, msg: bytes) -> bool:
    """setup.c's rule, restated for a host whose set-up is done: would the peer's layer
    have sent msg? (held: the peer's pairs the host holds, in order.)"""
    st = conn.setup_state(host)
    if path != 1 or len(msg) < 5 or struct.unpack_from("=I", msg)[0] != MAGIC:
        return False
    if msg[4] == SETUP:
        if len(msg) != struct.calcsize(SETUP_FMT):
            return False
        _, _, flags, pad, *rest = struct.unpack(SETUP_FMT, msg)
        keys, seen = rest[-2:]
        return bool(pad == 0 and flags & ~3 == 0 and flags & READY
                and msg[8:40] == setup_msg(info)[8:40] and st.peer_keys <= keys <= 1 << 20
                and st.keys_acked <= seen <= st.keys_announced)
    if msg[4] != KEYS or len(msg) != struct.calcsize(KEYS_FMT):
        return False
    _, _, n, pad, first, pad2, *flat = struct.unpack(KEYS_FMT, msg)
    if pad or pad2 or not 1 <= n <= 8 or first < 1 or first + n - 1 > 1 << 20:
        return False
    if any(flat[2 * n:]):
        return False
    return all(tuple(flat[2 * j:2 * j + 2]) == held[first + j - 1]
               for j in range(n) if first + j <= len(held))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 79), st.integers(0, 255),
                          st.sampled_from([1, 1, 1, 2])), min_size=1, max_size=40))
def test_mutated_set_up_messages_are_taken_exactly_when_the_peer_could_send_them(muts):
    """One byte of a valid CTL_SETUP or CTL_KEYS (the peer's latest state, the next pair)
    changed, on either path: taken exactly when the rule says so, else rejected, counted,
    and nothing else changes."""
    with Fabric(retries=1) as fab:
        conn = fab.connect("Shift", regions=2, two_phase=True)
        drive(conn)
        info, mr = conn.local_info("B", 2), conn._dst
        held = [(mr.rkey, mr.rkey_backup)]
        for is_setup, pos, val, path in muts:
            st_ = conn.setup_state("A")
            base = (setup_msg(info, keys=st_.peer_keys, seen=st_.keys_acked) if is_setup
                    else keys_msg(len(held), [held[-1], (len(held) + 100, len(held) + 200)]))
            msg = bytearray(base)
            msg[pos % len(msg)] = val
            msg = bytes(msg)
            ok = _setup_valid(conn, "A", info, held, path, msg)
            before, stats = conn.setup_state("A"), conn.stats("A")
            assert conn.ctl_input("A", path, msg) is ok
            after = conn.stats("A")
            if not ok:
                assert after.ctl_rejected == stats.ctl_rejected + 1
                assert conn.setup_state("A") == before
                continue
            assert after.ctl_received == stats.ctl_received + 1
            if msg[4] == KEYS:
                n, first = msg[5], struct.unpack_from("=I", msg, 8)[0]
                flat = struct.unpack(KEYS_FMT, msg)[6:]
                for j in range(n):
                    if first + j == len(held) + 1:
                        held.append(tuple(flat[2 * j:2 * j + 2]))
            assert conn.setup_state("A").peer_keys_held == len(held)
