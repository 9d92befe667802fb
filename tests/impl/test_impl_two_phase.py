"""Connection set-up in two phases per path (issue 15, item 4): each host's endpoint is
made alone, the applications exchange only their default QPs' information (as
ibv_rc_pingpong does over TCP), and the layers set the backup path up in-band over the
default path - its QP number, first PSN, GID and the regions' backup rkeys. The
connection is failover-ready only once that is done; before, a failure reaches the
application as on plain RC. native/tests/driver.c has the C side (test_setup_*)."""

from __future__ import annotations

import pytest
from impl_helpers import assert_nccl_delivered, drive, post_round
from shift.impl import Fabric, PathInfo, PostError, Status


def _drop_ctl(conn, path: int = 1) -> int:
    """Lose every control message heading path's channels, both ways."""
    n = 0
    for d in ("AtoB", "BtoA"):
        while conn._fabric.head_kind(path, d) == "ctl":
            n += conn.drop(path, d)
    return n


def test_backup_path_is_set_up_in_band_and_serves_a_failover():
    with Fabric(retries=1) as fab:
        conn = fab.connect("Shift", regions=4, two_phase=True, record=True)
        for h in ("A", "B"):
            s = conn.setup_state(h)
            assert s.inband and not s.backup_ready and s.keys_announced == 1
        # the backup QPs: each knows only its own number until the layers speak
        a2, b2 = conn.local_info("A", 2), conn.local_info("B", 2)
        assert a2.qp_num != b2.qp_num and 0 <= a2.psn <= 0xFFFFFF and len(a2.gid) == 16
        assert conn.progress("A") == "setup"
        drive(conn)
        for h in ("A", "B"):
            s = conn.setup_state(h)
            assert s.backup_ready and s.peer_keys_held == s.peer_keys == 1 and s.keys_acked == 1
            assert conn.stats(h).ctl_rejected == 0
        with pytest.raises(PostError):  # connected in-band already
            conn.connect_path("A", 2, b2)
        # rounds of NCCL Simple; A's default NIC dies; B's rkeys are translated to the
        # backup NIC's that B's layer announced, and the data lands
        for k in (1, 2):
            post_round(conn, k)
        drive(conn)
        post_round(conn, 3)
        conn.nic_fail("A", 1)
        post_round(conn, 4)
        drive(conn)
        assert conn.stats("A").failovers == 1
        conn.nic_recover("A", 1)
        drive(conn)
        for k in (5, 6):
            post_round(conn, k)
            drive(conn)
        assert_nccl_delivered(conn, 6)
        assert conn.stats("A").failbacks == 1


def test_a_region_registered_after_the_connect_is_announced_in_band():
    with Fabric(retries=1) as fab:
        conn = fab.connect("ShiftPrefix", two_phase=True)
        drive(conn)
        conn.register("B", 64)
        assert conn.setup_state("A").peer_keys_held == 1
        drive(conn)
        a, b = conn.setup_state("A"), conn.setup_state("B")
        assert a.peer_keys == a.peer_keys_held == 2 and a.backup_ready
        assert b.keys_announced == b.keys_acked == 2


def test_lost_set_up_messages_are_resent_by_the_handshake_timer():
    with Fabric(retries=1) as fab:
        conn = fab.connect("Shift", two_phase=True, ctl_retries=3)
        assert conn.progress("A") == conn.progress("B") == "setup"
        assert _drop_ctl(conn) == 4  # each host's keys, then its set-up message
        for h in ("A", "B"):
            assert conn.progress(h) == "none"  # nothing new to say: only the timer resends
        assert not conn.setup_state("A").backup_ready
        assert conn.handshake_timeout("A")
        drive(conn, timeouts=False)
        assert conn.setup_state("A").backup_ready and conn.setup_state("B").backup_ready
        assert not conn.handshake_timeout("A")  # nothing waits any more


def test_a_failure_before_the_backup_is_ready_reaches_the_application():
    with Fabric(retries=1) as fab:
        conn = fab.connect("Shift", two_phase=True, record=True)
        conn.progress("A")
        conn.progress("B")
        _drop_ctl(conn)  # the set-up never arrives
        post_round(conn, 1)
        conn.nic_fail("A", 1)
        drive(conn)
        assert conn.stats("A").failovers == 0
        assert not conn.setup_state("A").backup_ready
        assert conn.host_state("A").send_state == "Error"
        seen = [c for c in conn.completions if c.host == "A"]
        assert seen and all(c.status != Status.SUCCESS for c in seen)
        kinds = [e.type.name for e in conn.events("A")]
        assert "PATH_DOWN" in kinds and "FAILOVER_STARTED" not in kinds


def test_connect_path_checks_its_arguments():
    with Fabric(retries=1) as fab:
        conn = fab.connect("Shift", two_phase=True)
        info = conn.local_info("B", 1)
        with pytest.raises(TypeError):
            conn.connect_path("A", 1, (1, 2))  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            conn.connect_path("A", 3, info)
        with pytest.raises(PostError):  # connected by the constructor already
            conn.connect_path("A", 1, info)
        bad = PathInfo(info.qp_num, 1 << 24, info.lid, info.port, info.gid)
        with pytest.raises(PostError):
            conn.connect_path("A", 2, bad)
