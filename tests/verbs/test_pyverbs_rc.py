"""pyverbs drives the stack (issue 18, item 5): device, PD, MR, CQ, an RC QP through
RESET → INIT → RTR → RTS, and traffic of every kind between two processes, one per
host (tests/verbs/pyverbs_rc.py is each end; this test relays their exchange)."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
from shift.verbs import devices
from shift.verbs.rdma_core import Build
from verbs_helpers import line, tell

pytestmark = pytest.mark.xdist_group("verbs")

END = str(Path(__file__).with_name("pyverbs_rc.py"))
SUCCESS, FETCH_ADD_OPCODE = 0, 4  # IBV_WC_SUCCESS, IBV_WC_FETCH_ADD


@pytest.mark.parametrize("device", ["sim0", "sim1"])
def test_pyverbs_rc_traffic_between_two_hosts(rdma: Build, device: str) -> None:
    fabric = {"SHIFT_SIM_FABRIC": f"pyverbs-{uuid.uuid4().hex[:8]}"}
    argv = [sys.executable, END]
    with devices.started(rdma, "A", [*argv, "A", device], env=fabric) as a, \
            devices.started(rdma, "B", [*argv, "B", device], env=fabric) as b:
        addr_a, addr_b = line(a), line(b)
        tell(a, json.dumps(addr_b))
        tell(b, json.dumps(addr_a))
        assert line(b) == "ready"
        tell(a, "go")
        seen_a = line(a)
        tell(b, "bye")
        seen_b = line(b)
        assert a.wait(timeout=60) == 0 and b.wait(timeout=60) == 0
    assert isinstance(seen_a, dict) and isinstance(seen_b, dict)
    assert [c["wr_id"] for c in seen_a["completions"]] == [1, 2, 3, 4]  # in post order
    assert all(c["status"] == SUCCESS for c in seen_a["completions"])
    assert seen_a["completions"][3]["opcode"] == FETCH_ADD_OPCODE
    assert seen_a["read"] == "B's own bytes"          # the READ brought B's bytes
    assert seen_a["fetched"] == 40                    # FETCH_AND_ADD returned the old value
    assert seen_b["written"] == "written by A"        # the WRITE landed in B's memory
    assert seen_b["received"] == "sent by A"          # the SEND in B's receive buffer
    assert seen_b["completions"] == [{"wr_id": 9, "status": SUCCESS, "opcode": 128,
                                      "byte_len": len("sent by A")}]
    assert seen_b["counter"] == 42                    # 40 + the addend 2
