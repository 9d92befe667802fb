"""UD datagrams through pyverbs between two processes, one per host (socket mode): a
datagram's send completes at once, its receive names the sender's QP and keeps the GRH's
40 bytes; one lost by `shift drop` never arrives (UD does not retransmit) and one with a
Q_Key the receiver does not take is discarded, while the next is received
(tests/verbs/pyverbs_ud.py is each end; this test relays their exchange)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from shift.verbs import control, devices
from shift.verbs.rdma_core import Build
from verbs_helpers import line, tell

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_cli_errors import shift  # noqa: E402

pytestmark = pytest.mark.xdist_group("verbs")

END = str(Path(__file__).with_name("pyverbs_ud.py"))
SUCCESS, SEND, RECV, QKEY, GRH = 0, 0, 128, 0x1234, 40


def send(a: subprocess.Popen[str], word: str, qkey: int = QKEY) -> object:
    tell(a, f"{word} {qkey}")
    return line(a)


def test_ud_datagrams_between_two_hosts_one_dropped(rdma: Build, tmp_path: Path) -> None:
    fabric = f"ud-{uuid.uuid4().hex[:8]}"
    env = {"SHIFT_SIM_FABRIC": fabric}
    argv = [sys.executable, END]
    with devices.started(rdma, "A", [*argv, "A", "sim0"], env=env) as a, \
            devices.started(rdma, "B", [*argv, "B", "sim0"], env=env) as b:
        addr_a, addr_b = line(a), line(b)
        assert isinstance(addr_a, dict) and isinstance(addr_b, dict)
        tell(a, json.dumps(addr_b))
        tell(b, json.dumps(addr_a))
        assert line(b) == "ready"
        sent = [send(a, "first")]
        tell(b, "next")
        first = line(b)
        drop = shift("drop", "sim0", "--host", "B", "-n", "1", cwd=tmp_path, env=env)
        assert drop.returncode == 0, drop.stderr
        sent += [send(a, "lost"), send(a, "badkey", QKEY + 1), send(a, "third")]
        tell(b, "next")
        third = line(b)
        stats = control.stats(fabric, "B")
        tell(a, "bye")
        tell(b, "bye")
        assert a.wait(timeout=60) == 0 and b.wait(timeout=60) == 0
    # every send completed at once, the lost and the discarded ones too: UD has no ACK
    assert sent == [{"wr_id": len(w), "status": SUCCESS, "opcode": SEND, "byte_len": len(w),
                     "src_qp": 0} for w in ("first", "lost", "badkey", "third")]
    assert addr_a["qpn"] < 0x200000 <= addr_b["qpn"]  # host B's QP numbers from SN_QPN_HOST_B
    assert first == {"wr_id": 0, "status": SUCCESS, "opcode": RECV, "byte_len": GRH + 5,
                     "src_qp": addr_a["qpn"], "data": "first"}
    # the next receive WR took "third": "lost" never came, "badkey" was discarded
    assert third == {"wr_id": 1, "status": SUCCESS, "opcode": RECV, "byte_len": GRH + 5,
                     "src_qp": addr_a["qpn"], "data": "third"}
    assert stats["dropped"] == 1 and stats["ud_discarded"] == 1
