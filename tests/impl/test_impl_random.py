"""Seeded random interleavings of the NCCL Simple workload with one fault (either host's
default NIC, or the default link; with or without recovery) and a few packet drops. After
every step the applications' views must satisfy the properties SHIFT promises
(NotificationIntegrity, DataAtNotification, post-ordered successful completions), and once
the run settles every notification must have been delivered, once, in order."""

from __future__ import annotations

import random

import pytest
from impl_helpers import assert_nccl_delivered, drive, post_round
from shift.impl import Fabric

ROUNDS = 6


def check_views(conn, posted: int, errors_allowed: bool = False) -> None:
    obs = conn.observe()
    taken = [r for r in obs.rcv_seen if r.status == "SUCCESS"]
    assert len(taken) <= posted
    for k, n in enumerate(taken, start=1):
        assert (n.wr, n.recv) == (2 * k, k), f"notification {k}: {n}"
        r = (k - 1) % conn.regions + 1
        assert n.mem[r - 1] == 100 + k
    seen = [s.wr for s in obs.snd_seen]
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    if not errors_allowed:
        assert all(s.status == "SUCCESS" for s in obs.snd_seen)


FIRST = [("NicFail", "A", 1), ("NicFail", "B", 1), ("LinkDown", 1)]
SECOND = [("NicFail", "A", 2), ("NicFail", "B", 2), ("LinkDown", 2), ("NicFail", "A", 1),
          ("NicFail", "B", 1), ("LinkDown", 1)]


def _recovery(fault):
    return {"NicFail": ("NicRecover",) + tuple(fault[1:]), "LinkDown": ("LinkUp", fault[1])}[
        fault[0]]


def random_run(seed: int, double: bool = False) -> None:
    rng = random.Random(seed)
    with Fabric(retries=3) as fab:
        conn = fab.connect("Shift", regions=4, probe=rng.choice(["wire", "instant"]))
        fault = rng.choice(FIRST)
        recover = _recovery(fault)
        fault_at = rng.randrange(0, 120)
        recover_at = fault_at + rng.randrange(5, 200) if rng.random() < 0.6 else None
        second = rng.choice(SECOND) if double else None
        second_at = fault_at + rng.randrange(1, 150)
        drops = 2
        posted = 0
        for t in range(400):
            taken = sum(r.status == "SUCCESS" for r in conn.observe().rcv_seen)
            if t == fault_at:
                conn.apply(fault)
            elif second and t == second_at:
                conn.apply(second)
            elif t == recover_at:
                conn.apply(recover)
            elif posted < ROUNDS and posted - taken < conn.regions and rng.random() < 0.15:
                posted += 1
                post_round(conn, posted)
            else:
                r = rng.random()
                p = rng.choice((1, 2))
                d = rng.choice(("AtoB", "BtoA"))
                if r < 0.25:
                    conn.transmit("A", p)
                elif r < 0.55:
                    conn.deliver(p, d)
                elif r < 0.57 and drops:
                    drops -= conn.drop(p, d)
                elif r < 0.72:
                    conn.poll_cq(rng.choice("AB"))
                elif r < 0.9:
                    conn.progress(rng.choice("AB"))
                else:
                    # a timer is long next to everything else: it fires only once the
                    # layers have nothing left to do and nothing is in flight on its path
                    for h in "AB":
                        while conn.progress(h) != "none":
                            pass
                    if fab.wire(p, "AtoB") == 0 and fab.wire(p, "BtoA") == 0:
                        conn.timeout("A", p)
            check_views(conn, posted, errors_allowed=double)
        if recover_at is not None and recover_at >= 400:
            conn.apply(recover)
        if double:
            # both paths may be gone: safety must hold, and the run must end either with
            # everything delivered or with the error surfaced to the sender
            drive(conn)
            check_views(conn, posted, errors_allowed=True)
            obs = conn.observe()
            done = {s.wr for s in obs.snd_seen}
            assert all(2 * k in done for k in range(1, posted + 1)) or conn.state("A") in (
                "Fallback", "WaitSignaled", "WaitDrained") or any(
                s.status != "SUCCESS" for s in obs.snd_seen), (obs, conn.host_state("A"))
            return
        while posted < ROUNDS:
            drive(conn)  # NCCL's flow control: reuse a buffer once its note was taken
            posted += 1
            post_round(conn, posted)
        drive(conn)
        check_views(conn, posted)
        assert_nccl_delivered(conn, ROUNDS)
        assert conn.state("A") != "Error"


@pytest.mark.parametrize("seed", range(300))
def test_random_interleavings_with_one_fault(seed):
    random_run(seed)


@pytest.mark.parametrize("seed", range(300))
def test_random_interleavings_with_two_faults_stay_safe(seed):
    random_run(10_000 + seed, double=True)
