"""Several endpoints on one completion queue (`Fabric.shared_cq`, C: shift_cq): two
connections on one fabric whose endpoints share a CQ per host and path. The layer
demultiplexes by QP number, so each endpoint's view must be what it would have been on
CQs of its own: the same random events run once with shared CQs and once without, and
every endpoint's completions, the memory at each notification, its failover states and
counters must be equal (native/README.md, docs/design.md)."""

from __future__ import annotations

import random

import pytest
from impl_helpers import IDEAL_RC, guide_block
from shift.impl import CoreError, Fabric, SharedCq, Wr
from shift.impl._native import ffi, lib

CONNS = 2


def qp_fails(conn, host: str) -> bool:
    """The default QP of host's endpoint of conn alone goes to ERR (its WRs flushed): a
    failure of that connection's path, not of the NIC the other connection shares."""
    qp = ffi.new("sn_qp *")
    assert lib.shift_sim_qp(conn.handle, "AB".index(host), 1, qp) == 0
    attr = ffi.new("struct sn_qp_attr *")
    attr.qp_state = lib.SHIFT_QPS_ERR
    assert lib.sn_modify_qp(qp[0], attr, lib.SN_QP_STATE) == 0
    return True


def post_round(conn, sender: str, k: int, value: int) -> None:
    """NCCL Simple: the peer posts receive k; sender WRITEs value into region k, then a
    signaled WRITE_WITH_IMM."""
    conn.post_recv("B" if sender == "A" else "A", k)
    r = (k - 1) % conn.regions + 1
    conn.post_send(sender, Wr(2 * k - 1, "WRITE", region=r, value=value, signaled=False))
    conn.post_send(sender, Wr(2 * k, "WRITE_IMM"))


def run(seed: int, shared: bool, design: str, hardware: bool) -> list:
    """Seeded random events over two connections; what each endpoint saw."""
    rng = random.Random(seed)
    fab = Fabric(retries=1, **({} if hardware else IDEAL_RC))
    cq = {h: fab.shared_cq(h, cqe=256) for h in "AB"} if shared else None
    # (max_wr past what the rounds post: no post meets a full queue)
    conns = [fab.connect(design, regions=4, max_wr=32, record=True, cq=cq)
             for _ in range(CONNS)]
    rounds = [{"A": 0, "B": 0} for _ in conns]
    kept = 0
    faults = 0
    for _ in range(300):
        c = rng.randrange(CONNS)
        conn = conns[c]
        what = rng.random()
        if what < 0.15:
            sender = rng.choice("AB")
            if rounds[c][sender] < 12:
                rounds[c][sender] += 1
                k = rounds[c][sender]
                post_round(conn, sender, k, 1000 * c + 100 * "AB".index(sender) + k)
        elif what < 0.55:
            fab.transmit(rng.choice("AB"), rng.choice((1, 2)))
            fab.deliver(rng.choice((1, 2)), rng.choice(("AtoB", "BtoA")))
        elif what < 0.8:
            h = rng.choice("AB")
            conn.poll(h, rng.choice((1, 2, 8)))
            kept = max(kept, max(x.stats(h).cq_kept for x in conns))
        elif what < 0.9:
            h = rng.choice("AB")
            conn.progress(h)
            fab.write_cqes()
            conn.fatal_events(h)
        elif what < 0.93 and faults < 2:
            faults += 1
            if rng.random() < 0.5:
                qp_fails(conn, rng.choice("AB"))  # this connection alone
            else:
                fab.nic_fail(rng.choice("AB"), 1)  # both connections
        else:
            fab.timeout(rng.choice("AB"), rng.choice((1, 2)))
    settle(fab, conns)
    seen = [conn.observe() for conn in conns]
    fab.close()
    return [seen, kept]


def settle(fab: Fabric, conns: list) -> None:
    """Recover what failed, then wire, NICs, layers and applications until quiet."""
    for h in "AB":
        fab.nic_recover(h, 1)
    for _ in range(400):
        moved = fab.pump() > 0
        moved |= fab.write_cqes() > 0
        for conn in conns:
            for h in "AB":
                moved |= conn.fatal_events(h) > 0
                while conn.progress(h) != "none":
                    moved = True
        for conn in conns:
            for h in "AB":
                moved |= bool(conn.poll(h))
        if not moved:
            for conn in conns:
                for h, p in (("A", 1), ("A", 2), ("B", 1), ("B", 2)):
                    moved |= conn.timeout(h, p)
        if not moved:
            return
    raise AssertionError("the run did not settle")


@pytest.mark.parametrize("design", ["Shift", "ShiftCounted", "NoFailover"])
@pytest.mark.parametrize("hardware", [False, True], ids=["ideal", "hardware"])
@pytest.mark.parametrize("seed", range(4))
def test_each_endpoint_on_a_shared_cq_sees_what_it_saw_alone(seed, design, hardware):
    own, own_kept = run(seed, False, design, hardware)
    shared, shared_kept = run(seed, True, design, hardware)
    assert own_kept == 0
    for c in range(CONNS):
        assert shared[c].as_dict() == own[c].as_dict(), f"connection {c}"
    assert any(o.snd_seen or o.rcv_seen for o in shared)


def test_a_poll_keeps_the_other_endpoints_completion_for_it():
    with Fabric(**IDEAL_RC) as fab:
        cq = {"A": fab.shared_cq("A", cqe=128)}
        c0 = fab.connect("Shift", regions=2, max_wr=8, cq=cq)
        c1 = fab.connect("Shift", regions=2, max_wr=8, cq=cq)
        post_round(c1, "A", 1, 7)
        fab.pump()
        assert c0.poll("A") == []  # it read c1's completion off the CQ, and kept it
        assert (c0.stats("A").cq_kept, c1.stats("A").cq_kept) == (0, 1)
        got = c1.poll("A")
        assert [(c.wr_id, c.ok, c.qp_num) for c in got] == [(2, True, c1.qp_num("A"))]
        assert c1.stats("A").cq_kept == 0
        assert [c.wr_id for c in c1.poll("B")] == [1] and c1.read("B", 1) == 7


def test_shared_cq_arguments_and_lifetime():
    with Fabric() as fab, Fabric() as other:
        qa, qb = fab.shared_cq("A", cqe=33), fab.shared_cq("B")
        with pytest.raises(TypeError):
            fab.connect("Shift", cq=[qa])
        with pytest.raises(TypeError):
            fab.connect("Shift", cq={"A": 1})
        with pytest.raises(ValueError, match="host A"):
            fab.connect("Shift", cq={"B": qa})
        with pytest.raises(ValueError, match="another fabric"):
            other.connect("Shift", cq={"A": qa})
        with pytest.raises(ValueError):
            fab.shared_cq("A", cqe=0)
        # a QP's share is max_wr + max_wr (the backup QP's one more): 16 and 17 of 33
        conn = fab.connect("Shift", max_wr=8, cq={"A": qa, "B": qb})
        with pytest.raises(CoreError, match="ENOMEM"):
            fab.connect("Shift", max_wr=8, cq={"A": qa})
        with pytest.raises(CoreError):
            qa.close()  # EBUSY: a connection's endpoint is on it
        conn.close()
        qa.close()
        qa.close()  # closing twice is nothing
        assert isinstance(qb, SharedCq)
    # the fabric closed qb with it
    with pytest.raises(CoreError):
        qb.handle  # noqa: B018


def test_the_guides_shared_cq_example_runs():
    """docs/library.md's example, as written."""
    exec(compile(guide_block("# shared_cq.py"), "shared_cq.py", "exec"), {})
