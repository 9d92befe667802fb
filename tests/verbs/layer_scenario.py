"""Run in the lock-step environment (test_layer.py): one scenario on two connections with
the same events - the layer over the simulator's backend, and over libibverbs on the
simulated provider - and what each showed, as JSON: their observations after each phase,
the B's regions, the states, the failover statistics, and what the wire carried."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from shift.impl import Connection, Fabric, Wr
from shift.impl.verbs import DesignCode
from shift.verbs.layer import VerbsConnection

KW: dict[str, Any] = dict(regions=4, max_wr=16, probe="instant", ctl_retries=255, record=True)


def settle(conn: Connection, timeouts: bool) -> None:
    for _ in range(30):
        conn.pump()
        conn.write_cqes()
        for h in "AB":
            conn.fatal_events(h)
            while conn.progress(h) != "none":
                pass
            conn.poll_step(h)
        if timeouts:
            conn.timeout("A", 1)


def scenario(fabric: Fabric, conn: Connection) -> dict[str, Any]:
    """A WRITE and a notification, then A's default NIC dies under a WRITE in flight, and
    comes back: failover, replay on the backup path, fail-back."""
    out: dict[str, Any] = {"phases": []}
    conn.post_recv("B", 1)
    conn.post_recv("B", 2)
    conn.post_send("A", Wr(id=1, op="WRITE", region=1, value=7, signaled=True))
    conn.post_send("A", Wr(id=2, op="SEND_IMM", region=2, value=9, signaled=True))
    settle(conn, False)
    out["phases"].append(conn.observe().as_dict())
    conn.post_send("A", Wr(id=3, op="WRITE", region=1, value=8, signaled=True))
    conn.transmit("A", 1)
    conn.nic_fail("A", 1)
    # the layer's first control message leaves as the failover starts: what carries it
    for _ in range(5):
        conn.fatal_events("A")
        conn.poll_step("A")
        conn.progress("A")
    out["ctl_on_wire"] = fabric.head_kind(2, "AtoB")
    settle(conn, True)
    out["phases"].append(conn.observe().as_dict())
    conn.nic_recover("A", 1)
    conn.post_send("A", Wr(id=4, op="SEND_IMM", region=3, value=5, signaled=True))
    settle(conn, True)
    out["phases"].append(conn.observe().as_dict())
    out["memory_B"] = list(conn.memory("B"))
    out["states"] = [conn.state("A"), conn.state("B")]
    out["stats_A"] = dataclasses.asdict(conn.stats("A"))
    return out


def main() -> None:
    with Fabric() as f:
        direct = scenario(f, f.connect("Shift", **KW))
    with Fabric() as f:
        verbs = scenario(f, VerbsConnection(f, DesignCode("Shift"), **KW))
    print(json.dumps({"direct": direct, "verbs": verbs}))


if __name__ == "__main__":
    main()
