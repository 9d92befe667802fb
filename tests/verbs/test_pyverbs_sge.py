"""Several SGEs per WR, both ways, between two processes (issue 18: rdma-core's tests draw
a QP's SGEs from 1 to max_sge / 2): simnic's WR has one, and the provider gathers a SEND's
or a WRITE's elements at the post and scatters a receive's or a READ's at the poll
(verbs/provider/sge.c). Also messages above 4 KiB, the limits the provider enforces, and a
completion channel that a peer's traffic wakes (tests/verbs/pyverbs_sge.py is each end)."""

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

END = str(Path(__file__).with_name("pyverbs_sge.py"))
SUCCESS, LOC_PROT_ERR = 0, 4                       # ibv_wc_status
SEND, WRITE, READ, RECV = 0, 1, 2, 128             # ibv_wc_opcode
GUARD = "ee"


def pattern(seed: int, n: int) -> str:
    """pyverbs_sge.py's bytes of a piece, as hex."""
    return bytes((seed * 31 + i * 7) % 251 for i in range(n)).hex()


def guard(n: int) -> str:
    return GUARD * n


def split(msg: str, lengths: list[int]) -> list[str]:
    """A message (hex) scattered over pieces of these lengths: what each piece holds,
    the guard bytes past the message's end."""
    out, at = [], 0
    for n in lengths:
        part = msg[2 * at:2 * (at + n)]
        out.append(part + guard(n - len(part) // 2))
        at += n
    return out


@pytest.fixture(scope="module")
def seen(rdma: Build) -> tuple[dict, dict]:
    fabric = {"SHIFT_SIM_FABRIC": f"sge-{uuid.uuid4().hex[:8]}"}
    argv = [sys.executable, END]
    with devices.started(rdma, "A", [*argv, "A", "sim0"], env=fabric) as a, \
            devices.started(rdma, "B", [*argv, "B", "sim0"], env=fabric) as b:
        addr_a, addr_b = line(a), line(b)
        tell(a, json.dumps(addr_b))
        tell(b, json.dumps(addr_a))
        assert line(b) == "ready" and line(a) == "posted"
        tell(a, "go")
        seen_a = line(a)
        tell(b, "bye")
        seen_b = line(b)
        assert a.wait(timeout=60) == 0 and b.wait(timeout=60) == 0
    assert isinstance(seen_a, dict) and isinstance(seen_b, dict)
    return seen_a, seen_b


def test_gathered_sends_land_scattered(seen: tuple[dict, dict]) -> None:
    a, b = seen
    assert a["s1"] == pattern(1, 10) + pattern(2, 20) + pattern(3, 30)  # what A gathered
    assert b["received"] == [
        {"wr_id": 11, "status": SUCCESS, "opcode": RECV, "byte_len": 60},
        {"wr_id": 12, "status": SUCCESS, "opcode": RECV, "byte_len": 10_000},
        {"wr_id": 13, "status": SUCCESS, "opcode": RECV, "byte_len": 24}]
    assert b["r1"] == split(a["s1"], [5, 7, 100, 100])     # 60 bytes over 3 of 4 pieces
    assert b["r1_guard"] == [GUARD] * 4                     # nothing past a piece
    assert b["r2"] == a["s2"] + guard(2000)                 # 10,000 bytes, in 2 pieces
    assert b["r3"] == split(a["s3"], [10, 100])             # inline, 2 pieces gathered


def test_gathered_write(seen: tuple[dict, dict]) -> None:
    a, b = seen
    assert a["w1"] == pattern(4, 16) + pattern(5, 32)
    assert b["w1"] == a["w1"] and b["w1_guard"] == GUARD


def test_reads_scattered_signaled_or_not(seen: tuple[dict, dict]) -> None:
    a, _ = seen
    assert a["rd1"] == pattern(20, 100)   # unsignaled: scattered when a later WR completed
    assert a["rd2"] == pattern(21, 100)
    assert [(c["wr_id"], c["status"], c["opcode"]) for c in a["sent"]] == [
        (1, SUCCESS, SEND), (2, SUCCESS, WRITE), (3, SUCCESS, SEND), (5, SUCCESS, READ),
        (6, SUCCESS, SEND)]                # the program's wr_ids, in post order


def test_the_other_way_through_a_completion_channel(seen: tuple[dict, dict]) -> None:
    a, b = seen
    assert b["sent"] == [{"wr_id": 14, "status": SUCCESS, "opcode": SEND, "byte_len": 50}]
    assert b["events"] >= 2                # B saw its completions only through events
    assert a["reply"] == [{"wr_id": 50, "status": SUCCESS, "opcode": RECV, "byte_len": 50}]
    assert b["reply"] == pattern(30, 5) + pattern(31, 15) + pattern(32, 10) + pattern(33, 20)
    assert a["reply_pieces"] == split(b["reply"], [10, 100])
    assert a["reply_guard"] == GUARD * 2


def test_limits_are_reported_and_enforced(seen: tuple[dict, dict]) -> None:
    a, _ = seen
    assert a["max_sge"] == 8 and a["max_msg_sz"] == 65536
    for what in ("send_five", "recv_five", "qp_past_max_sge", "too_long"):
        assert a[what].startswith("refused"), (what, a[what])
    # another NIC's key among several SGEs fails the WR as that one SGE would, with its wr_id
    assert [(c["wr_id"], c["status"]) for c in a["bad_key"]] == [(10, LOC_PROT_ERR)]
